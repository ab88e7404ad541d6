"""Benchmark RULER sample generation: speed, landing distance, memory, time to first sample.

    python benchmarks/ruler_generate.py                      # 100 samples, 4K/32K/128K, all tasks
    python benchmarks/ruler_generate.py --samples 10 --tasks niah_single_1,fwe --lengths 4k,128k
    python benchmarks/ruler_generate.py --squad dev-v2.0.json --hotpotqa hotpot_dev_distractor_v1.json

Each (task, length) runs in a fresh process so peak memory and the time from process start to
the first sample are its own. Baseline, measured in the same process: tokenizing the final
prompts once (the physical floor of an exact-length generator is one verifying pass, ratio ~1.0).
Targets: ratio <= 1.5 at 128K, first sample < 2 s after process start, peak RSS < 1 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

_START = time.time()

WORKER = r"""
import json, os, resource, statistics, sys, time
import psutil
t_proc = psutil.Process().create_time()
from tasks.registry import get_task
from tasks.ruler.fitting import light_tokenizer
from benchmarks.ruler_generate import configure
name, length, n, tok_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tok = light_tokenizer(tok_path)  # transformers' import alone takes 3-9 s on a loaded 2-core machine
task = configure(get_task(name))
t0 = time.perf_counter()
samples = [task.sample(length, 0, 42, tok)]
first = time.time() - t_proc
for i in range(1, n):
    samples.append(task.sample(length, i, 42, tok))
gen = time.perf_counter() - t0
backend = tok
t1 = time.perf_counter()
for s in samples:
    backend.encode(s.prompt, add_special_tokens=True)
base = time.perf_counter() - t1
gaps = sorted(length - s.num_tokens - s.max_new_tokens for s in samples)
print(json.dumps({"task": name, "length": length, "n": n, "gen_s": gen, "tok_s": base,
                  "first_s": first, "gaps": [gaps[0], statistics.median(gaps), gaps[-1]],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def configure(task):
    """Data paths from the environment the parent sets (essays, SQuAD, HotpotQA)."""
    if getattr(task, "dataset", None) == "squad":
        task.path = os.environ.get("HARNESS_SQUAD")
    if getattr(task, "dataset", None) == "hotpotqa":
        task.path = os.environ.get("HARNESS_HOTPOTQA")
    return task


def main(argv=None) -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from harness.embedded import default_tokenizer_dir
    from harness.errors import UserError
    from tasks.lengths import format_length, parse_lengths
    from tasks.registry import get_task, split_csv
    from tasks.ruler import RULER_TASKS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--lengths", default="4k,32k,128k")
    p.add_argument("--tasks", help="comma list (default: all RULER tasks whose data is available)")
    p.add_argument("--tokenizer", help="tokenizer dir (default: the embedded tokenizer)")
    p.add_argument("--squad")
    p.add_argument("--hotpotqa")
    args = p.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if args.squad:
        env["HARNESS_SQUAD"] = os.path.abspath(args.squad)
        os.environ["HARNESS_SQUAD"] = env["HARNESS_SQUAD"]
    if args.hotpotqa:
        env["HARNESS_HOTPOTQA"] = os.path.abspath(args.hotpotqa)
        os.environ["HARNESS_HOTPOTQA"] = env["HARNESS_HOTPOTQA"]
    tok = args.tokenizer or str(default_tokenizer_dir())
    names = split_csv(args.tasks) or RULER_TASKS
    rows = []
    print(f"{'task':<17}{'L':>6}{'n':>5}{'samples/s':>11}{'gap min/med/max':>20}{'peak MB':>9}{'gen/tok':>9}{'first s':>9}")
    for name in names:
        try:
            configure(get_task(name)).check_available()
        except UserError as exc:
            print(f"{name:<17} unavailable: {exc}")
            continue
        for length in parse_lengths(args.lengths):
            res = subprocess.run([sys.executable, "-c", WORKER, name, str(length), str(args.samples), tok],
                                 capture_output=True, text=True, env=env)
            if res.returncode != 0:
                print(f"{name:<17}{format_length(length):>6} failed: {res.stderr.strip().splitlines()[-1]}")
                continue
            r = json.loads(res.stdout.strip().splitlines()[-1])
            rows.append(r)
            g = r["gaps"]
            print(f"{name:<17}{format_length(length):>6}{r['n']:>5}{r['n'] / r['gen_s']:>11.1f}"
                  f"{f'{g[0]}/{g[1]:g}/{g[2]}':>20}{r['rss_mb']:>9.0f}{r['gen_s'] / r['tok_s']:>9.2f}{r['first_s']:>9.2f}")
    if rows:
        worst = max((r for r in rows if r["length"] >= 131072), key=lambda r: r["gen_s"] / r["tok_s"], default=None)
        if worst:
            print(f"worst ratio at 128K: {worst['task']} {worst['gen_s'] / worst['tok_s']:.2f} (target <= 1.5); "
                  f"max first-sample {max(r['first_s'] for r in rows):.2f} s (target < 2); "
                  f"max peak {max(r['rss_mb'] for r in rows):.0f} MB (target < 1024)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
