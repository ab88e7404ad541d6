# ruff: noqa: N999 -- the subcommand is named by its module (harness/commands/__init__.py)
"""`harness import FILES... --out DIR`: other harnesses' results as a results.json of ours.

    harness import lm-eval-out/Llama-3.1-8B/results_2025-01-01T00-00-00.json --out runs/llama-lm-eval
    harness import RULER/benchmark_root/llama/synthetic/*/pred/summary.csv --out runs/llama-ruler
    harness import HELMET/output/Llama-3.1-8B/*.json.score --out runs/llama-helmet
    harness leaderboard runs/ours runs/llama-lm-eval runs/llama-ruler --out site/

One command reads the files of one harness and one model (lm-eval results_*.json, NVIDIA RULER
summary*.csv, HELMET output *.json / *.json.score; the format is told by each file, or --from) and
writes one results.json, marked imported with its source and protocol (docs/imports.md).
"""

from __future__ import annotations

import argparse

HELP = "import lm-eval, NVIDIA RULER or HELMET result files as a results.json the leaderboard reads"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="result files of one harness and one model")
    p.add_argument("--out", required=True, help="directory to write results.json into (or a path ending in .json)")
    p.add_argument("--name", help="run name on the leaderboard (default <model>-<harness>)")
    p.add_argument(
        "--from",
        dest="fmt",
        choices=["lm-eval", "ruler", "helmet"],
        help="the files' format (default: told by each file)",
    )
    p.add_argument(
        "--length",
        help="the length the files were evaluated at, e.g. 32k (RULER summary.csv outside <model>/<benchmark>/<L>/pred/)",
    )


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from harness.core.atomic import atomic_write
    from harness.core.errors import UserError
    from harness.core.imported import imported_source
    from harness.imports import import_files

    length = None
    if args.length is not None:
        from harness.core.lengths import parse_length

        length = parse_length(args.length)
    if args.name is not None and (not args.name.strip() or not args.name.isprintable()):
        raise UserError(f"--name {args.name!r} is empty or holds a control character: pass a printable name")
    from harness.core.paths import check_out, check_output_file

    # checked like every --out ('' was ./results.json): a directory, or a path ending in .json
    out = Path(args.out) if args.out.strip() else check_out(args.out)
    folder = check_out(out.parent if out.suffix == ".json" else out)
    target = check_output_file(out if out.suffix == ".json" else folder / "results.json")
    if target.exists():
        try:
            old = json.loads(target.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if not isinstance(old, dict) or imported_source(old) is None:
            raise UserError(
                f"{target} exists and is not an imported results.json: pass another --out (a run of ours is never overwritten)"
            )
    results = import_files(args.files, fmt=args.fmt, name=args.name, length=length)
    atomic_write(target, json.dumps(results, indent=2) + "\n")
    src = results["provenance"]["source"]
    suites = ", ".join(
        f"{s} ({len(b['evaluated'])} tasks, {len(b['per_length'])} length{'s' if len(b['per_length']) != 1 else ''})"
        for s, b in results["suites"].items()
    )
    print(f"imported {results['run']['name']} from {src['harness']}: {suites} -> {target}")
    # what the row's intervals rest on: its samples (bootstrapped and paired here) or its aggregates
    print(f"per-sample scores: {src.get('per_sample', 'none')}")
    if src.get("not_imported"):
        shown = ", ".join(src["not_imported"][:8]) + (" ..." if len(src["not_imported"]) > 8 else "")
        print(f"not imported (no matching task here): {shown}")
    return 0
