"""Samples and wall time a sequential comparison saves against the fixed protocol, on real runs.

    python benchmarks/sequential_savings.py --a 'runs/demo/anchor/ckpt-*' --b 'runs/demo/full/ckpt-*' \\
        --tasks niah_single_1,niah_multikey_2,niah_multikey_3,vt --lengths 1k,2k --samples 500 --out runs/savings/demo
    python benchmarks/sequential_savings.py --a smollm2-135m-instruct --b smollm2-135m-instruct \\
        --b-args=--dtype=bfloat16 --tasks niah_single_1,vt,cwe --lengths 1k --samples 500 --out runs/savings/smollm2

Four `harness eval` processes, each timed as a whole: the fixed protocol (every sample of every cell)
for arm A and for arm B, each into its own folder; then the sequential comparison (`--against` arm
B's checkpoints) into fresh folders, so it reuses nothing the fixed runs computed (each pair of runs
also has its own sample cache: both pay for generating their samples). Then, per cell, the fixed
run's paired 95% interval of A - B (the leaderboard's: samples and checkpoints resampled, paired on
shared samples) beside the sequential verdict, its interval and n, and whether the verdict
contradicts a cell the fixed run decides (better while the fixed interval lies below 0, worse while
above, equivalent while it lies wholly outside the margin). Last, the samples evaluated (per run,
times its checkpoints) and the wall time of the two protocols as ratios.

Extra eval flags for both arms go after --eval-arg (repeat it), for one arm after --a-args/--b-args
(one string, split like a shell would).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _harness(args: list[str], cwd: Path, log: Path) -> float:
    """Run `harness ARGS` in cwd; its wall seconds. Output goes to log; a failure stops the benchmark."""
    cmd = [sys.executable, "-m", "harness", *args]
    start = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"benchmark: `harness {shlex.join(args)}` failed (rc {proc.returncode}); see {log}")
    return seconds


def _eval_args(ns: argparse.Namespace, cache: Path) -> list[str]:
    out = ["eval", "--tasks", ns.tasks, "--lengths", ns.lengths, "--samples", str(ns.samples), "--no-progress"]
    return out + ["--cache-dir", str(cache), *ns.eval_arg]


def _records(out: Path) -> int:
    with open(out / "samples.jsonl") as fh:
        return sum(1 for _ in fh) - 1  # the header line


def run_protocols(ns: argparse.Namespace) -> dict:
    root = Path(ns.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    a_extra, b_extra = shlex.split(ns.a_args or ""), shlex.split(ns.b_args or "")
    fixed, seq = root / "fixed", root / "sequential"
    for d in (fixed, seq):
        d.mkdir(exist_ok=True)
    times = {}
    if not ns.sequential_only:
        base = _eval_args(ns, fixed / "cache")
        times["fixed A"] = _harness(
            [*base, "--ckpts", ns.a, *a_extra, "--out", str(fixed / "A")], fixed, fixed / "A.log"
        )
        times["fixed B"] = _harness(
            [*base, "--ckpts", ns.b, *b_extra, "--out", str(fixed / "B")], fixed, fixed / "B.log"
        )
    elif not (fixed / "A/results.json").exists() or not (fixed / "B/results.json").exists():
        sys.exit(f"benchmark: --sequential-only reuses the fixed runs under {fixed}: run without it first")
    seq_args = [*_eval_args(ns, seq / "cache"), "--ckpts", ns.a, *a_extra, "--out", str(seq / "A")]
    seq_args += ["--against", ns.b, "--equivalence-margin", str(ns.margin), "--alpha", str(ns.alpha)]
    seq_args += ["--round-size", str(ns.round_size)] + (["--hold-averages"] if ns.hold_averages else [])
    if b_extra:  # arm B's own flags: a folder evaluated once with them, then compared against
        times["sequential B (first round)"] = _harness(
            [*_eval_args(ns, seq / "cache"), "--ckpts", ns.b, *b_extra, "--out", str(seq / "B"), "--samples", "1"],
            seq,
            seq / "B0.log",
        )
        seq_args[seq_args.index("--against") + 1] = str(seq / "B")
    times["sequential A+B"] = _harness(seq_args, seq, seq / "A.log")
    return {"root": root, "times": times}


def _fixed_interval(a: dict, b: dict, suite: str, task: str | None, length: int) -> dict | None:
    from leaderboards.intervals import delta_interval

    if task is None:
        col = {"suite": suite, "key": f"len:{length}", "length": length, "id": f"{suite}:{length}"}
    else:
        col = {"suite": suite, "key": f"task:{task}", "task": task, "length": length, "id": f"{suite}:{task}:{length}"}
    return delta_interval(a, b, col)


def contradicts(verdict: str, low: float, high: float, margin: float) -> bool:
    """Whether a sequential verdict contradicts what the fixed interval [low, high] decides."""
    if verdict == "better":
        return high < 0
    if verdict == "worse":
        return low > 0
    if verdict == "equivalent":
        return low >= margin or high <= -margin
    return False


def compare(root: Path, margin: float) -> tuple[list[list[str]], dict]:
    from harness.core.results_file import load_results

    fa, fb = load_results(root / "fixed/A/results.json"), load_results(root / "fixed/B/results.json")
    sa = load_results(root / "sequential/A/results.json")
    seq = sa["sequential"]
    suite = next(iter(fa["suites"]))
    rows, bad, decided_fixed, agreed = [], 0, 0, 0
    for task, by_len in seq["cells"].items():
        for L, cell in by_len.items():
            iv = _fixed_interval(fa, fb, suite, None if task == "average" else task, int(L))
            lo, hi = (iv["low"], iv["high"]) if iv else (float("nan"), float("nan"))
            fixed_says = "better" if lo > 0 else "worse" if hi < 0 else "undecided"
            decided_fixed += fixed_says != "undecided"
            agreed += fixed_says != "undecided" and cell["verdict"] == fixed_says
            wrong = iv is not None and contradicts(cell["verdict"], lo, hi, margin)
            bad += wrong
            s_lo, s_hi = cell["interval"] or (float("nan"), float("nan"))
            rows.append(
                [
                    task,
                    L,
                    f"[{lo:+.1f}, {hi:+.1f}] {fixed_says}",
                    f"{cell['verdict']} [{s_lo:+.1f}, {s_hi:+.1f}]",
                    f"{cell['n']}/{cell['fixed_n'] if task != 'average' else cell['pool']}",
                    "CONTRADICTS" if wrong else "",
                ]
            )
    summary = {"contradictions": bad, "fixed_decided": decided_fixed, "same_verdict": agreed, "cells": len(rows)}
    return rows, summary


def evaluations(root: Path) -> dict:
    """Records (sample x checkpoint evaluations) each protocol stored, both arms together."""
    seq = root / "sequential"
    seq_b = [p.parent for p in seq.glob("**/samples.jsonl") if p.parent.name != "A"]
    return {
        "fixed": _records(root / "fixed/A") + _records(root / "fixed/B"),
        "sequential": _records(seq / "A") + sum(_records(p) for p in seq_b),
    }


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="arm A's --ckpts (the run judged better or worse)")
    p.add_argument("--b", required=True, help="arm B's --ckpts (the run compared against)")
    p.add_argument("--a-args", default="", help="eval flags for arm A only (one string)")
    p.add_argument("--b-args", default="", help="eval flags for arm B only (one string)")
    p.add_argument("--eval-arg", action="append", default=[], help="an eval flag for both arms (repeat)")
    p.add_argument("--tasks", required=True)
    p.add_argument("--lengths", required=True)
    p.add_argument("--samples", type=int, default=500, help="the fixed protocol's samples per cell (RULER: 500)")
    p.add_argument("--margin", type=float, default=5.0)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--round-size", type=int, default=25)
    p.add_argument("--out", required=True)
    p.add_argument("--compare-only", action="store_true", help="read the four runs under --out, run nothing")
    p.add_argument(
        "--sequential-only",
        action="store_true",
        help="run the sequential protocol alone, on the fixed runs under --out",
    )
    p.add_argument(
        "--hold-averages", action="store_true", help="the sequential run keeps tasks drawn for their averages"
    )
    ns = p.parse_args(argv)
    root = Path(ns.out).resolve()
    times = _saved_times(root, "") if ns.compare_only else run_protocols(ns)["times"]
    rows, summary = compare(root, ns.margin)
    print(
        _table(
            ["cell", "length", f"fixed {ns.samples}: A-B 95% interval", "sequential verdict [CS]", "n/fixed", ""], rows
        )
    )
    ev = evaluations(root)
    seq = load_seq(root)
    print()
    print(f"cells: {summary['cells']}; the fixed run decides {summary['fixed_decided']}, the sequential run agrees on "
          f"{summary['same_verdict']} of them; contradictions: {summary['contradictions']}")  # fmt: skip
    print(f"paired samples: sequential {seq['samples']['used']} / fixed {seq['samples']['fixed']} = "
          f"{seq['samples']['used'] / seq['samples']['fixed']:.2f}x")  # fmt: skip
    print(f"evaluations (samples x checkpoints, both arms): sequential {ev['sequential']} / fixed {ev['fixed']} = "
          f"{ev['sequential'] / ev['fixed']:.2f}x")  # fmt: skip
    for hold in (False, True):
        drawn, fixed, counts = replay(root, ns, hold)
        rule = "averages held (--hold-averages)" if hold else "averages through tasks (the default)"
        print(f"replayed on the fixed runs' samples, {rule}: {drawn} / {fixed} = {drawn / fixed:.2f}x "
              f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")  # fmt: skip
    if ns.sequential_only:  # the fixed runs' times, from the run that made them
        times = {**_saved_times(root, "fixed "), **times}
    if "fixed A" in times and "fixed B" in times:
        fixed_s = times["fixed A"] + times["fixed B"]
        seq_s = sum(v for k, v in times.items() if k.startswith("sequential"))
        print("wall seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in times.items()))
        print(f"wall time: sequential {seq_s:.0f} s / fixed {fixed_s:.0f} s = {seq_s / fixed_s:.2f}x")
    from harness.core.atomic import atomic_write

    atomic_write(root / "savings.json", json.dumps({"summary": summary, "evaluations": ev, "times": times}, indent=2))
    return 0 if summary["contradictions"] == 0 else 1


def replay(root: Path, ns: argparse.Namespace, hold: bool) -> tuple[int, int, dict[str, int]]:
    """The rule replayed on the fixed runs' paired scores (the same samples, in the draw order a
    sequential run takes; the suite's averages per length as cells): (samples drawn, fixed, verdict
    counts over every cell). `hold`: averages keep their tasks drawn (--hold-averages)."""
    from harness.core.results_file import load_results
    from harness.pipeline.sequential_cells import Comparison, Rule, paired_units

    units = paired_units(load_results(root / "fixed/A/results.json"), load_results(root / "fixed/B/results.json"))
    rule = Rule(alpha=ns.alpha, margin=ns.margin, round_size=ns.round_size, hold_averages=hold)
    tasks = sorted({t for t, _ in units})
    comp = Comparison(rule, {k: len(v) for k, v in units.items()}, {"suite": tasks} if len(tasks) > 1 else {})
    while comp.next_round() is not None:
        comp.feed(units)
    drawn, fixed = comp.used()
    return drawn, fixed, comp.counts()


def _saved_times(root: Path, prefix: str) -> dict[str, float]:
    """The wall seconds an earlier run of this benchmark saved under --out, those named prefix*."""
    try:
        saved = json.loads((root / "savings.json").read_text()).get("times") or {}
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in saved.items() if k.startswith(prefix) and isinstance(v, (int, float))}


def load_seq(root: Path) -> dict:
    from harness.core.results_file import load_results

    return load_results(root / "sequential/A/results.json")["sequential"]


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    raise SystemExit(main())
