"""`harness report`: re-print the results table without re-running anything.

    harness report results/anchor                      # its results.json (else its samples.jsonl)
    harness report results/anchor/results.json results/base/results.json
    harness report results/anchor/samples.jsonl --threshold 80   # re-aggregate the store

A results.json is printed as aggregated; --threshold recomputes the effective length from its
per-length averages. A samples.jsonl (or a run directory without results.json, e.g. a run that
was killed) is re-aggregated from its records; it does not know which tasks were excluded, so the
suite's other tasks show as unavailable.

Paper exports (docs/exports.md): --format latex prints a booktabs table of the runs (one row
each; --interval pm|range|none, --baseline NAME adds the significance mark), and --figures DIR
writes the charts as SVG/PDF/PNG (--figure-formats; PDF/PNG need the `plots` extra).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.core.errors import UserError

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
    parser.add_argument(
        "--format",
        choices=("text", "latex"),
        default="text",
        help="text: the terminal table (default); latex: a booktabs table, one row per run",
    )
    parser.add_argument(
        "--interval",
        choices=("pm", "range", "none"),
        default="pm",
        help="LaTeX cells: mean ± half-width of the 95%% interval (pm), mean [low, high] (range), or the mean alone",
    )
    parser.add_argument("--digits", type=int, default=1, help="decimals in the LaTeX table (default 1)")
    parser.add_argument(
        "--baseline", metavar="NAME", help="LaTeX: mark scores that differ from this run at 95%% (paired bootstrap)"
    )
    parser.add_argument(
        "--figures", metavar="DIR", help="write the charts (score vs length, vs step, effective length) into DIR"
    )
    parser.add_argument(
        "--figure-formats", default="svg,pdf,png", metavar="LIST", help="comma-separated: svg, pdf, png (default all)"
    )


def _is_store(path: Path) -> bool:
    """A file whose first line is a results-store header (whatever its name)."""
    from harness.core.paths import open_regular

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
    from harness.core.results_file import load_results
    from harness.pipeline.aggregate import DEFAULT_THRESHOLD, apply_threshold
    from harness.pipeline.reaggregate import results_from_store

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
    from tasks.length_rule import check_results_lengths

    results = check_results_lengths(load_results(path), path)  # the length rule import and eval apply
    return results if threshold is None else apply_threshold(results, threshold)


def run(args: argparse.Namespace) -> int:
    from harness.core.validate import require_at_least
    from harness.pipeline.table import format_table

    require_at_least((("--threshold", args.threshold, 0),))
    if args.threshold is not None and args.threshold > 100:
        raise UserError(f"--threshold {args.threshold} is above 100: scores are percentages (RULER uses 85.6)")
    if args.digits < 0 or args.digits > 4:
        raise UserError(f"--digits {args.digits}: choose 0 to 4")
    figures = None
    if args.figures is not None:  # checked like --out, before any work ('' is a mistake, not "no figures")
        from harness.core.paths import check_out
        from leaderboards.figures import parse_formats

        figures = (check_out(args.figures, "--figures"), parse_formats(args.figure_formats))
    board = _board(args) if figures or args.format == "latex" else {}
    if figures:
        from leaderboards.figures import write_figures

        # On stderr: stdout stays the table, so `harness report R --format latex > table.tex` works.
        for path in write_figures(board, *figures):
            print(f"wrote {path}", file=sys.stderr)
    if args.format == "latex":
        from leaderboards.latex import to_latex
        from leaderboards.sequential_latex import sequential_latex

        print(to_latex(board, interval=args.interval, digits=args.digits) + sequential_latex(board), end="")
        return 0
    tables = [format_table(load_any(target, args.threshold)) for target in args.results]
    print("\n\n".join(tables))
    return 0


def _board(args: argparse.Namespace) -> dict:
    """The leaderboard model of the given runs: what the LaTeX table and the figures render."""
    from leaderboards.build import build

    return build(board_runs(args.results, args.threshold), baseline=args.baseline, threshold=args.threshold)


def board_runs(targets: list[str], threshold: float | None) -> list[dict]:
    """The leaderboard's runs from what `report` reads (a results.json, a run directory or a store);
    results naming the same run are merged by suite, as `harness leaderboard` does."""
    from leaderboards.build import validate

    runs: dict[str, dict] = {}
    for target in targets:
        data = validate(load_any(target, threshold), target)
        name = data["run"]["name"]
        merged = name in runs
        have = runs.setdefault(name, {**data, "sources": [], "suites": {}})
        clash = set(have["suites"]) & set(data["suites"])
        if clash:
            raise UserError(f"run {name!r} has suite {min(clash)!r} in two of the results given: pass one of them")
        have["suites"].update(data["suites"])
        have["sources"].append(str(target))
        if merged:
            from leaderboards.record_marks import merge_record_counts

            merge_record_counts(have, data)  # its records' warnings travel with the merged row
    return list(runs.values())
