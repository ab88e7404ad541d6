"""Benchmark RULER sample generation: speed, landing distance, memory, time to first sample.

    python benchmarks/ruler_generate.py                      # 100 samples, 4K/32K/128K, all tasks
    python benchmarks/ruler_generate.py --samples 10 --tasks niah_single_1,fwe --lengths 4k,128k
    python benchmarks/ruler_generate.py --squad dev-v2.0.json --hotpotqa hotpot_dev_distractor_v1.json
    python benchmarks/ruler_generate.py --synthetic-qa       # speed of qa_1/qa_2 on made-up files
    python benchmarks/ruler_generate.py --startup            # and the `harness generate` start-up rows
    python benchmarks/ruler_generate.py --only-startup       # just the start-up rows (all tasks, 4K, 20 samples)

Each (task, length) runs in a fresh process so peak memory and the time from process start to
the first sample are its own. Baseline, measured in the same process: tokenizing the final
prompts once (the physical floor of an exact-length generator is one verifying pass, ratio ~1.0),
each right after its sample is generated: on a shared machine, timing all generation and then
all baselines let the load change between the two phases and moved the ratio by up to 0.5. (The
tokenizer has just seen the prompt then, so the baseline is if anything faster: a conservative
ratio.)
Targets: ratio <= 1.5 at 128K, first sample < 2 s after process start, peak RSS < 1 GB.
Times are shown as wall and CPU seconds: on a shared machine the CPU figures are the stable ones
(generation and tokenization are single-threaded here).

Start-up rows (issue 15 §4; --startup or --only-startup): the real `harness generate` command, 20 samples per task at 4K
(--startup-samples, --startup-length) in a fresh process, with the tokenizer it loads by default
(harness.models.tokenization.load_generation_tokenizer: the bare `tokenizers` tokenizer when the directory
allows it) against the same command with transformers' AutoTokenizer (the path before issue 15,
the baseline, run right after it). Shown: seconds from process launch to the first finished sample,
peak RSS, whether torch was imported, the ratio of first-sample times, and whether the two wrote
byte-identical files. Targets: first sample < 1 s, peak RSS < 150 MB, identical files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

_START = time.time()

WORKER = r"""
import json, os, statistics, sys, time
from tasks.registry import get_task
from harness.models.tokenization import load_generation_tokenizer
from benchmarks.ruler_generate import configure, peak_rss_mb
name, length, n, tok_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
# process start = when the parent launched it (psutil's create_time counts from /proc/stat's boot
# time, whole seconds, and read up to a second late here)
t_proc = float(sys.argv[5])
tok = load_generation_tokenizer(tok_path)  # no transformers: its import alone takes 3-9 s on a loaded 2-core machine
task = configure(get_task(name))
gen = gen_cpu = base = base_cpu = 0.0
samples = []
for i in range(n):
    t0, c0 = time.perf_counter(), time.process_time()
    samples.append(task.sample(length, i, 42, tok))
    gen, gen_cpu = gen + time.perf_counter() - t0, gen_cpu + time.process_time() - c0
    if i == 0:
        first, first_cpu = time.time() - t_proc, time.process_time()  # CPU since process start
    # the baseline right after each sample, so both see the same load on a shared machine
    t1, c1 = time.perf_counter(), time.process_time()
    tok.encode(samples[-1].prompt, add_special_tokens=True)
    base, base_cpu = base + time.perf_counter() - t1, base_cpu + time.process_time() - c1
gaps = sorted(length - s.num_tokens - s.max_new_tokens for s in samples)
print(json.dumps({"task": name, "length": length, "n": n, "gen_s": gen, "tok_s": base,
                  "gen_cpu": gen_cpu, "tok_cpu": base_cpu, "first_s": first, "first_cpu": first_cpu, "gaps": [gaps[0], statistics.median(gaps), gaps[-1]],
                  "rss_mb": peak_rss_mb()}))
"""

# `harness generate` itself in a fresh process, timed to its first finished sample through the
# progress callback the command passes to tasks.generate.generate_samples
STARTUP_WORKER = r"""
import json, sys, time
t_proc = float(sys.argv[1])  # when the parent launched this process
old_path, argv = sys.argv[2] == "transformers", sys.argv[3:]
import tasks.generate as gen
first = []
real = gen.generate_samples
def timed(*a, progress=None, **kw):
    def hook(k):
        if not first:
            first.append((time.time() - t_proc, time.process_time()))
        if progress:
            progress(k)
    return real(*a, progress=hook, **kw)
gen.generate_samples = timed
if old_path:  # the baseline: transformers' AutoTokenizer, as before issue 15
    import harness.models.tokenization as tz
    tz.load_generation_tokenizer = tz.load_tokenizer
from harness.cli import main
rc = main(argv)
from benchmarks.ruler_generate import peak_rss_mb
print(json.dumps({"rc": rc, "first_s": first[0][0], "first_cpu": first[0][1], "total_s": time.time() - t_proc,
                  "rss_mb": peak_rss_mb(),
                  "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}))
"""


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB. Linux's VmHWM, which starts afresh at exec:
    getrusage's ru_maxrss keeps the high-water mark of the forked parent (a benchmark parent that
    built 100 MB of synthetic QA data showed up as every child's peak)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def startup_rows(names: list[str], length: int, n: int, tok: str, env: dict, args) -> list[dict]:
    """One row per task: `harness generate` with the default (light) tokenizer path against the
    transformers path, each in a fresh process, and a byte comparison of what they wrote."""
    import tempfile
    from pathlib import Path

    from harness.core.lengths import format_length

    print(
        f"\nstart-up: `harness generate --tasks T --lengths {format_length(length)} --samples {n}` "
        "(fresh process; baseline = the same command with transformers' AutoTokenizer)"
    )
    print(
        f"{'task':<17}{'L':>6}{'n':>5}{'1st s wall':>11}{'1st s cpu':>10}{'peak MB':>9}{'torch':>7}"
        f"{'base 1st s':>11}{'base cpu':>9}{'base MB':>9}{'1st ratio':>10}{'identical':>10}"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="ruler-startup-") as tmp:
        for name in names:
            res: dict[str, Any] = {}
            for path in ("light", "transformers"):
                out = Path(tmp) / path
                argv = ["generate", "--tasks", name, "--lengths", str(length), "--samples", str(n)]
                argv += ["--out", str(out), "--tokenizer", tok, "--cache-dir", "none"]
                argv += [
                    f for flag, v in (("--squad", args.squad), ("--hotpotqa", args.hotpotqa)) if v for f in (flag, v)
                ]
                proc = subprocess.run(
                    [sys.executable, "-c", STARTUP_WORKER, repr(time.time()), path, *argv],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                if proc.returncode != 0:
                    res = {}
                    print(f"{name:<17}{format_length(length):>6} failed ({path}): {proc.stderr.strip()[-300:]}")
                    break
                res[path] = json.loads(proc.stdout.strip().splitlines()[-1])
                res[path + "_bytes"] = (out / name / f"{length}.jsonl").read_bytes()
            if not res:
                continue
            new, old = res["light"], res["transformers"]
            same = res["light_bytes"] == res["transformers_bytes"]
            rows.append({"task": name, "length": length, "n": n, "new": new, "old": old, "identical": same})
            print(
                f"{name:<17}{format_length(length):>6}{n:>5}{new['first_s']:>11.2f}{new['first_cpu']:>10.2f}"
                f"{new['rss_mb']:>9.0f}{'yes' if new['torch'] else 'no':>7}"
                f"{old['first_s']:>11.2f}{old['first_cpu']:>9.2f}{old['rss_mb']:>9.0f}"
                f"{new['first_s'] / old['first_s']:>10.2f}{'yes' if same else 'NO':>10}",
                flush=True,
            )
    if rows:
        print(
            f"start-up: max first sample {max(r['new']['first_s'] for r in rows):.2f} s wall / "
            f"{max(r['new']['first_cpu'] for r in rows):.2f} s CPU (target < 1; transformers path "
            f"{max(r['old']['first_s'] for r in rows):.2f} s / {max(r['old']['first_cpu'] for r in rows):.2f} s CPU); max peak {max(r['new']['rss_mb'] for r in rows):.0f} MB "
            f"(target < 150; transformers path {max(r['old']['rss_mb'] for r in rows):.0f} MB); "
            f"torch imported in {sum(r['new']['torch'] for r in rows)} of {len(rows)}; "
            f"byte-identical {sum(r['identical'] for r in rows)} of {len(rows)}"
        )
    return rows


def configure(task):
    """Data paths from the environment the parent sets (essays, SQuAD, HotpotQA)."""
    if getattr(task, "dataset", None) == "squad":
        task.path = os.environ.get("HARNESS_SQUAD")
    if getattr(task, "dataset", None) == "hotpotqa":
        task.path = os.environ.get("HARNESS_HOTPOTQA")
    return task


def write_synthetic_qa() -> tuple[str, str]:
    """Random-word stand-ins with the real files' shapes: SQuAD v2 dev ~1200 paragraphs of ~120
    words in 35 articles; HotpotQA dev ~7400 questions x 10 paragraphs of ~60 words."""
    import random
    import tempfile

    from tasks.data.words import cwe_words

    rng = random.Random(0)
    pool = cwe_words()
    para = lambda k: " ".join(rng.choice(pool) for _ in range(k)) + "."
    d = tempfile.mkdtemp(prefix="ruler-bench-qa-")
    squad = {
        "data": [
            {
                "title": f"A{a}",
                "paragraphs": [
                    {
                        "context": para(120),
                        "qas": [{"question": f"Question {a}-{p}?", "is_impossible": False, "answers": [{"text": "x"}]}],
                    }
                    for p in range(35)
                ],
            }
            for a in range(35)
        ]
    }
    hotpot = [
        {"question": f"Question {q}?", "answer": "x", "context": [[f"T{q}-{j}", [para(60)]] for j in range(10)]}
        for q in range(7400)
    ]
    paths = (os.path.join(d, "squad.json"), os.path.join(d, "hotpotqa.json"))
    for path, data in zip(paths, (squad, hotpot)):
        with open(path, "w") as f:
            json.dump(data, f)
    return paths


def main(argv=None) -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from harness.core.errors import UserError
    from harness.core.lengths import format_length, parse_lengths
    from harness.models.embedded import default_tokenizer_dir
    from tasks.registry import get_task, split_csv
    from tasks.ruler import RULER_TASKS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--lengths", default="4k,32k,128k")
    p.add_argument("--tasks", help="comma list (default: all RULER tasks whose data is available)")
    p.add_argument("--tokenizer", help="tokenizer dir (default: the embedded tokenizer)")
    p.add_argument("--squad")
    p.add_argument("--hotpotqa")
    p.add_argument(
        "--synthetic-qa",
        action="store_true",
        help="write SQuAD/HotpotQA-format files of random text (sizes like the real dev sets) to time qa offline",
    )
    p.add_argument("--startup", action="store_true", help="after the speed table, the `harness generate` start-up rows")
    p.add_argument("--startup-samples", type=int, default=20, help="samples per start-up row (default 20)")
    p.add_argument("--startup-length", default="4k", help="length of the start-up rows (default 4k)")
    p.add_argument("--only-startup", action="store_true", help="only the start-up rows")
    args = p.parse_args(argv)
    if args.synthetic_qa:
        args.squad, args.hotpotqa = write_synthetic_qa()
    env = dict(
        os.environ,
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    if args.squad:
        env["HARNESS_SQUAD"] = os.path.abspath(args.squad)
        os.environ["HARNESS_SQUAD"] = env["HARNESS_SQUAD"]
    if args.hotpotqa:
        env["HARNESS_HOTPOTQA"] = os.path.abspath(args.hotpotqa)
        os.environ["HARNESS_HOTPOTQA"] = env["HARNESS_HOTPOTQA"]
    tok = args.tokenizer or str(default_tokenizer_dir())
    names = split_csv(args.tasks) or RULER_TASKS
    available = []
    for name in names:
        try:
            configure(get_task(name)).check_available()
            available.append(name)
        except UserError as exc:
            print(f"{name:<17} unavailable: {exc}")
    names = available
    if args.only_startup:
        startup_rows(names, parse_lengths(args.startup_length)[0], args.startup_samples, tok, env, args)
        return 0
    rows = []
    print(
        f"{'task':<17}{'L':>6}{'n':>5}{'samples/s':>11}{'gap min/med/max':>18}{'peak MB':>9}"
        f"{'gen/tok wall':>13}{'gen/tok cpu':>12}{'1st s wall':>11}{'1st s cpu':>10}"
    )
    for name in names:
        for length in parse_lengths(args.lengths):
            res = subprocess.run(
                [sys.executable, "-c", WORKER, name, str(length), str(args.samples), tok, repr(time.time())],
                check=False,
                capture_output=True,
                text=True,
                env=env,
            )
            if res.returncode != 0:
                print(f"{name:<17}{format_length(length):>6} failed: {res.stderr.strip().splitlines()[-1]}")
                continue
            r = json.loads(res.stdout.strip().splitlines()[-1])
            rows.append(r)
            g = r["gaps"]
            print(
                f"{name:<17}{format_length(length):>6}{r['n']:>5}{r['n'] / r['gen_s']:>11.1f}"
                f"{f'{g[0]}/{g[1]:g}/{g[2]}':>18}{r['rss_mb']:>9.0f}{r['gen_s'] / r['tok_s']:>13.2f}"
                f"{r['gen_cpu'] / r['tok_cpu']:>12.2f}{r['first_s']:>11.2f}{r['first_cpu']:>10.2f}",
                flush=True,
            )
    if rows:
        worst = max((r for r in rows if r["length"] >= 131072), key=lambda r: r["gen_cpu"] / r["tok_cpu"], default=None)
        if worst:
            print(
                f"worst CPU ratio at 128K: {worst['task']} {worst['gen_cpu'] / worst['tok_cpu']:.2f} (target <= 1.5); "
                f"max first-sample {max(r['first_s'] for r in rows):.2f} s wall / "
                f"{max(r['first_cpu'] for r in rows):.2f} s CPU (target < 2); "
                f"max peak {max(r['rss_mb'] for r in rows):.0f} MB (target < 1024)"
            )
    if args.startup:
        startup_rows(names, parse_lengths(args.startup_length)[0], args.startup_samples, tok, env, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
