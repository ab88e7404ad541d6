"""`harness leaderboard`: one self-contained HTML leaderboard (plus CSV/JSON/Markdown) from results.

    harness leaderboard out/full out/anchor/results.json --out site/ --baseline full --title "SlimPajama-64K"

RESULTS are results.json files (docs/contracts.md) or run directories holding one; each run is a
row. Writes DIR/index.html, leaderboard.csv, leaderboard.json and leaderboard.md and prints their
paths. With --baseline, leaderboard-delta.{csv,md} hold the delta view too.
"""

from __future__ import annotations

import argparse

HELP = "render an HTML leaderboard (+ CSV/JSON/Markdown) from results.json files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results", nargs="+", metavar="RESULTS", help="results.json files or run directories holding one"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="directory for index.html and the exports")
    parser.add_argument(
        "--baseline", metavar="NAME", help="run name to subtract in the delta view (e.g. full attention)"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        metavar="X",
        help="effective-length threshold (scores ×100; RULER uses 85.6); also shows it for partial task sets",
    )
    parser.add_argument("--title", metavar="T", help="page title")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.errors import UserError, require_at_least
    from leaderboards.build import build, load_runs
    from leaderboards.export import to_csv, to_json, to_markdown
    from leaderboards.render import render_html

    require_at_least((("--threshold", args.threshold, 0),))  # above 100: build() says so
    board = build(load_runs(args.results), baseline=args.baseline, threshold=args.threshold, title=args.title)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file: pass a directory (it is created if missing)")
    files = {
        "index.html": render_html(board),
        "leaderboard.csv": to_csv(board),
        "leaderboard.json": to_json(board),
        "leaderboard.md": to_markdown(board),
    }
    if board["baseline"]:
        files["leaderboard-delta.csv"] = to_csv(board, "delta")
        files["leaderboard-delta.md"] = to_markdown(board, "delta")
    from harness.atomic import atomic_write_many

    # All files go to temp files first and are renamed in together: a full disk or a kill leaves
    # the previous page and exports whole.
    atomic_write_many({out / name: text for name, text in files.items()})
    for name in files:
        print(out / name)
    return 0
