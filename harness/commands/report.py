"""`harness report`: re-print the results table without re-running anything.

    harness report results/anchor                      # its results.json (else its samples.jsonl)
    harness report results/anchor/results.json results/base/results.json
    harness report results/anchor/samples.jsonl --threshold 80   # re-aggregate the store

A results.json is printed as aggregated; --threshold recomputes the effective length from its
per-length averages. A samples.jsonl (or a run directory without results.json, e.g. a run that
was killed) is re-aggregated from its records; it does not know which tasks were excluded, so the
suite's other tasks show as unavailable.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.errors import UserError

HELP = "re-print the results table from results.json, a run directory or samples.jsonl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS",
        help="results.json, a run directory holding it, or a samples.jsonl store",
    )
    parser.add_argument(
        "--threshold", type=float, default=None, help="effective-length threshold (default: the one stored, else 85.6)"
    )


def _is_store(path: Path) -> bool:
    """A file whose first line is a results-store header (whatever its name)."""
    from harness.paths import open_regular

    try:
        with os.fdopen(open_regular(path), "rb") as f:  # a FIFO: not a store (and never a hang)
            return f.read(32).startswith(b'{"type": "header"')
    except OSError:
        return False


def _suite_tasks() -> dict[str, list[str]]:
    """The registry's suites, so a re-aggregated report counts tasks out of the full suite."""
    from tasks.registry import all_suites

    return all_suites()


def load_any(target: str, threshold: float | None) -> dict:
    from harness.aggregate import DEFAULT_THRESHOLD, apply_threshold, load_results, results_from_store

    path = Path(target)
    if path.is_dir():
        if (path / "results.json").is_file():
            path = path / "results.json"
        elif (path / "samples.jsonl").is_file():
            path = path / "samples.jsonl"
        else:
            raise UserError(
                f"{path} holds neither results.json nor samples.jsonl: pass a run directory written by harness eval"
            )
    if path.is_file() and (_is_store(path) or path.suffix == ".jsonl"):  # a .jsonl is a store or no results file
        return results_from_store(path, DEFAULT_THRESHOLD if threshold is None else threshold, _suite_tasks())
    results = load_results(path)
    return results if threshold is None else apply_threshold(results, threshold)


def run(args: argparse.Namespace) -> int:
    from harness.errors import require_at_least
    from harness.table import format_table

    require_at_least((("--threshold", args.threshold, 0),))
    if args.threshold is not None and args.threshold > 100:
        raise UserError(f"--threshold {args.threshold} is above 100: scores are percentages (RULER uses 85.6)")
    tables = [format_table(load_any(target, args.threshold)) for target in args.results]
    print("\n\n".join(tables))
    return 0
