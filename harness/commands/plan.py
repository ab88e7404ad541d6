"""`harness plan`: how many samples a comparison needs, and what they cost to evaluate.

    harness plan --baseline results/full --delta 5                       # unpaired, 95% / 80% power
    harness plan --baseline results/full --against results/anchor --delta 5 --power 0.9

For every task and length of the baseline run (and for each suite average at each length), the
number of samples per run needed to detect a mean difference of --delta points with a two-sided
test at --alpha and the given --power (normal approximation):
    unpaired:  n = 2 (z_{1-alpha/2} + z_power)^2 var / delta^2, var = the baseline's per-sample
               variance of the score (x100, each sample's score averaged over the checkpoints);
    paired:    n = (z_{1-alpha/2} + z_power)^2 var_d / delta^2, var_d = the variance of the
               per-sample difference between --against and --baseline over the samples both
               scored (our samples are seeded per index, so two runs share them).
A suite average over T tasks uses var = sum of the tasks' variances / T^2 (n samples per task).
A cell where every sample scored the same has no variance to go on; it is planned with the
binomial variance at p = (successes + 0.5) / (n + 1), and says so.

The time is n x the measured seconds per sample (schema-2 results: provenance `throughput.seconds_per_sample` of that
cell, else the provenance throughput) x the checkpoints a run averages (--checkpoints, default
the baseline's), for one run; a comparison evaluates two. The checkpoint-to-checkpoint spread is
not reduced by more samples: average more checkpoints for that.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from harness.core.errors import UserError

HELP = "samples per task and length needed to detect a given difference, and their eval time"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline", required=True, metavar="RESULTS", help="results.json or run directory of a previous run"
    )
    parser.add_argument(
        "--against",
        metavar="RESULTS",
        default=None,
        help="a second run on the same samples: plan a paired comparison from the variance of the differences",
    )
    parser.add_argument("--delta", type=float, required=True, help="difference to detect, in score points (x100)")
    parser.add_argument("--power", type=float, default=0.8, help="probability of detecting it (default 0.8)")
    parser.add_argument("--alpha", type=float, default=0.05, help="two-sided significance level (default 0.05)")
    parser.add_argument(
        "--checkpoints", type=int, default=None, help="checkpoints each run averages (default: the baseline's count)"
    )


# Bounds that keep the arithmetic meaningful: a difference below 0.01 points (delta**2 underflows
# to 0 near 1e-160) or a level within 1e-6 of 0 or 1 (the normal quantile is infinite there).
MIN_DELTA, MAX_DELTA = 0.01, 100.0
LEVEL_MARGIN = 1e-6


def _check(args: argparse.Namespace) -> None:
    from harness.core.validate import MAX_COUNT

    if not (math.isfinite(args.delta) and MIN_DELTA <= args.delta <= MAX_DELTA):
        raise UserError(
            f"--delta {args.delta} is outside {MIN_DELTA}..{MAX_DELTA} points (scores are x100): pass e.g. --delta 5"
        )
    if not (LEVEL_MARGIN <= args.power <= 1 - LEVEL_MARGIN):
        raise UserError(f"--power {args.power} is outside (0, 1): pass e.g. --power 0.8")
    if not (LEVEL_MARGIN <= args.alpha <= 1 - LEVEL_MARGIN):
        raise UserError(f"--alpha {args.alpha} is outside (0, 1): pass e.g. --alpha 0.05")
    if args.checkpoints is not None and not 1 <= args.checkpoints <= MAX_COUNT:
        raise UserError(
            f"--checkpoints {args.checkpoints} is outside 1..{MAX_COUNT}: pass how many checkpoints a run averages"
        )


def load_with_samples(target: str, flag: str) -> dict:
    """A run's results with per-sample scores: its results.json (schema 2), else its samples.jsonl."""
    from harness.commands.report import load_any
    from harness.pipeline.reaggregate import results_from_store
    from tasks.registry import all_suites

    results = load_any(target, None)
    if any(s.get("samples") for s in results["suites"].values()):
        return results
    path = Path(target)
    store = (path if path.is_dir() else path.parent) / "samples.jsonl"
    if store.is_file():
        return results_from_store(store, suite_tasks=all_suites())
    raise UserError(
        f"{flag} {target} has no per-sample scores (results schema {results.get('schema_version')}) and no "
        "samples.jsonl beside it: pass the run directory written by harness eval"
    )


def _per_sample(block: dict) -> dict[int, float]:
    """index -> the sample's score x100 averaged over the checkpoints that scored it."""
    out = {}
    for pos, index in enumerate(block["index"]):
        vals = [v[pos] for v in block["scores"].values() if v[pos] is not None]
        if vals:
            out[index] = 100.0 * sum(vals) / len(vals)
    return out


def _variance(values: list[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    m = sum(values) / n
    return sum((v - m) ** 2 for v in values) / (n - 1)


def _binomial_fallback(values: list[float]) -> float:
    """Variance (points^2) of a 0/1 score at p = (successes + 0.5) / (n + 1): no spread was observed."""
    p = (sum(values) / 100.0 + 0.5) / (len(values) + 1)
    return 1e4 * p * (1 - p)


def _seconds(results: dict, task: str, length: str) -> float | None:
    tp = (results.get("provenance") or {}).get("throughput") or {}
    cell = (tp.get("seconds_per_sample") or {}).get(task, {}).get(length)
    if isinstance(cell, (int, float)):
        return float(cell)
    rate = tp.get("samples_per_s")
    return 1.0 / rate if isinstance(rate, (int, float)) and rate > 0 else None


def plan(
    base: dict, against: dict | None, delta: float, alpha: float, power: float, checkpoints: int | None
) -> list[dict]:
    """One row per (suite, task or suite average, length): variance, samples needed, time per run."""
    paired = against is not None
    k = checkpoints or max(1, len(base["run"].get("checkpoints") or []))
    test = (delta, alpha, power, paired)
    rows = []
    for sname, suite in base["suites"].items():
        samples = suite.get("samples") or {}
        other = ((against or {}).get("suites") or {}).get(sname, {}).get("samples") or {}
        by_length: dict[int, list[dict]] = {}
        for task, by_len in samples.items():
            for L, block in sorted(by_len.items(), key=lambda kv: int(kv[0])):
                row = _task_row(base, sname, task, L, block, (other.get(task) or {}).get(L), test)
                rows.append(row)
                if row["variance"] is not None:  # planned: it counts towards the suite average
                    by_length.setdefault(int(L), []).append(row)
        for L, parts in sorted(by_length.items()):
            if len(parts) >= 2:
                rows.append(_average_row(sname, L, parts, test))
    for row in rows:
        per_sample = row.get("seconds_per_sample")
        row["seconds_per_run"] = (
            row["needed"] * per_sample * k if row.get("needed") and per_sample is not None else None
        )
    return rows


def _task_row(base: dict, sname: str, task: str, L: str, block: dict, other: dict | None, test: tuple) -> dict:
    """The plan of one task at one length; `other`: the --against run's block for it (paired), and
    `test`: (delta, alpha, power, paired)."""
    from harness.core.paired import shared_indices
    from harness.core.stats import samples_needed

    delta, alpha, power, paired = test
    row = {"suite": sname, "task": task, "length": int(L), "have": len(block["index"]), "note": ""}
    if "scores" not in block:
        row.update(variance=None, needed=None, note="perplexity: not a mean of sample scores")
        return row
    a = _per_sample(block)
    if paired:
        idx = shared_indices(other, block) if other else []
        if not other or not idx:
            row.update(variance=None, needed=None, note="no shared samples with --against")
            return row
        b = _per_sample(other)
        values = [b[i] - a[i] for i in idx]
        row["have"] = len(idx)
        row["observed"] = sum(values) / len(values)
    else:
        values = list(a.values())
    var = _variance(values)
    if var == 0:
        var = _binomial_fallback(list(a.values()))
        row["note"] = "no spread observed: binomial variance assumed"
    row["variance"] = var
    row["needed"] = samples_needed(var, delta, alpha, power, paired=paired)
    row["seconds_per_sample"] = _seconds(base, task, L)
    return row


def _average_row(sname: str, L: int, parts: list[dict], test: tuple) -> dict:
    """The suite average over T tasks at one length: var = sum of the tasks' variances / T^2."""
    from harness.core.stats import samples_needed

    delta, alpha, power, paired = test
    var = sum(p["variance"] for p in parts) / len(parts) ** 2
    secs = [p["seconds_per_sample"] for p in parts]
    return {
        "suite": sname,
        "task": f"{sname} average ({len(parts)} tasks)",
        "length": L,
        "have": min(p["have"] for p in parts),
        "variance": var,
        "needed": samples_needed(var, delta, alpha, power, paired=paired),
        # n samples of every task: the sum of the tasks' seconds per sample
        "seconds_per_sample": sum(secs) if all(s is not None for s in secs) else None,
        "note": "n samples per task",
        "average": True,
    }


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def format_plan(rows: list[dict], args: argparse.Namespace, k: int) -> str:
    from harness.core.lengths import format_length

    kind = "paired (variance of per-sample differences)" if args.against else "unpaired (two independent runs)"
    head = [
        f"detect a difference of {args.delta:g} points at alpha {args.alpha:g} (two-sided), power {args.power:g}: {kind}",
        f"time: per run of {k} checkpoint{'s' if k != 1 else ''} at the measured seconds per sample",
        "",
    ]
    table = [["task", "length", "sd/sample", "have", "needed", "s/sample", "time/run", "note"]]
    for r in rows:
        var = r.get("variance")
        table.append(
            [
                r["task"],
                format_length(r["length"]),
                "—" if var is None else f"{math.sqrt(var):.1f}",
                str(r["have"]),
                "—" if r.get("needed") is None else str(r["needed"]),
                "—" if r.get("seconds_per_sample") is None else f"{r['seconds_per_sample']:.3g}",
                _fmt_time(r.get("seconds_per_run")),
                r.get("note", ""),
            ]
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [
        "  ".join(c.ljust(w) if i in (0, 7) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
        for row in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    tasks = [r for r in rows if r.get("needed") is not None and not r.get("average")]
    if tasks:
        most = max(r["needed"] for r in tasks)
        secs = [s for r in tasks if (s := r.get("seconds_per_sample")) is not None]
        if len(secs) == len(tasks):
            lines += ["", f"every task and length at --samples {most}: {_fmt_time(most * sum(secs) * k)} per run"]
        else:
            lines += ["", f"every task and length at --samples {most} (time unknown: no timings in the results)"]
    return "\n".join(head + lines)


def run(args: argparse.Namespace) -> int:
    _check(args)
    base = load_with_samples(args.baseline, "--baseline")
    against = load_with_samples(args.against, "--against") if args.against else None
    k = args.checkpoints or max(1, len(base["run"].get("checkpoints") or []))
    rows = plan(base, against, args.delta, args.alpha, args.power, args.checkpoints)
    if not rows:
        raise UserError(f"--baseline {args.baseline} has no scored tasks to plan for: run harness eval first")
    print(format_plan(rows, args, k))
    return 0
