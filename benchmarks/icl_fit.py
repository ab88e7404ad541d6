"""How long HELMET-style ICL samples take to fit their length: guided search vs blind bisection.

    python benchmarks/icl_fit.py [--lengths 32768,131072] [--items 3]

Builds a synthetic TREC-coarse-like set (6 labels, 5000 train questions) and the embedded BPE
tokenizer, then times `ICLTask.sample` (per-demo token counts guess the demo count, the exact
prompt confirms it) against a blind bisection over the demo count done in the same process.
Prints a table of seconds per sample, full-prompt tokenizations per sample, and the speed-up ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="32768,131072")
    ap.add_argument("--items", type=int, default=3)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp())
    rng = random.Random(0)
    # fmt: off
    words = [
        "what", "is", "the", "name", "of", "city", "river", "who", "wrote", "book",
        "how", "many", "people", "live", "in", "country", "when", "did", "war", "start",
    ]
    # fmt: on
    d = tmp / "trec_coarse"
    d.mkdir()
    for split, n in (("train", 5000), ("test", 50)):
        with open(d / f"{split}.jsonl", "w") as f:
            for _ in range(n):
                text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) + "?"
                f.write(json.dumps({"text": text, "label": rng.randrange(6)}) + "\n")
    (d / "labels.json").write_text(json.dumps(["ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"]))
    os.environ["HARNESS_ICL_DATA"] = str(tmp)

    from harness.models import tokenization
    from harness.models.embedded import default_tokenizer_dir
    from tasks.icl import tasks as icl
    from tasks.registry import get_task

    tok = tokenization.load_tokenizer(str(default_tokenizer_dir()))
    task = get_task("icl_trec_coarse")
    assert isinstance(task, icl.ICLTask)
    calls = {"n": 0}
    real_count = icl.count_tokens

    def counting(t, text):
        calls["n"] += 1
        return real_count(t, text)

    icl.count_tokens = counting

    def blind(length: int, index: int) -> int:
        """Reference: bisection over 0..n with a full tokenization per probe."""
        data = icl.data.load("trec_coarse")
        text, _ = data.test[icl._test_order("trec_coarse", data.hash)[index]]
        seed = icl.item_seed(text, 42)
        demos = icl.balanced_demos(data.train, icl.demo_count("trec_coarse", length), random.Random(seed))
        mapping = list(range(6))
        random.Random(seed).shuffle(mapping)
        budget = length - task.max_new_tokens
        lo, hi = 0, len(demos) + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if counting(tok, task.render(demos[:mid], text, mapping)) <= budget:
                lo = mid
            else:
                hi = mid
        return lo

    rows = []
    for length in [int(x) for x in args.lengths.split(",")]:
        res = {}
        for name, fn in (
            ("guided", lambda i, length=length: task.sample(length, i, 42, tok).metadata["demos_used"]),
            ("bisection", lambda i, length=length: blind(length, i)),
        ):
            calls["n"] = 0
            t0 = time.perf_counter()
            used = [fn(i) for i in range(args.items)]
            res[name] = ((time.perf_counter() - t0) / args.items, calls["n"] / args.items, used)
        assert res["guided"][2] == res["bisection"][2], "both searches must pick the same demo count"
        rows.append((length, res["guided"], res["bisection"]))

    print(f"{'length':>8} {'guided s':>9} {'calls':>6} {'bisect s':>9} {'calls':>6} {'speed-up':>8}")
    for length, g, b in rows:
        print(f"{length:>8} {g[0]:>9.2f} {g[1]:>6.1f} {b[0]:>9.2f} {b[1]:>6.1f} {b[0] / g[0]:>7.2f}x")


if __name__ == "__main__":
    main()
