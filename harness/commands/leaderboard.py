"""`harness leaderboard`: one self-contained HTML leaderboard (plus CSV/JSON/Markdown) from results.

    harness leaderboard out/full out/anchor/results.json --out site/ --baseline full --title "SlimPajama-64K"

RESULTS are results.json files (docs/contracts.md) or run directories holding one; each run is a
row. Writes DIR/index.html, leaderboard.csv, leaderboard.json and leaderboard.md and prints their
paths. With --baseline, leaderboard-delta.{csv,md} hold the delta view too. Paths on the page are
shown relative to the folder that holds DIR; --rope-diagnostic adds the RoPE-under-bf16 section.
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
    parser.add_argument(
        "--rope-diagnostic",
        metavar="FILE",
        help="a rope_diagnostic.json (harness diagnose rope, harness demo) to show as the page's RoPE section",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.errors import UserError, require_at_least
    from leaderboards.build import build, load_runs
    from leaderboards.export import to_csv, to_json, to_markdown
    from leaderboards.render import render_html

    require_at_least((("--threshold", args.threshold, 0),))  # above 100: build() says so
    from leaderboards.diagnostic import load_rope_diagnostic

    rope = load_rope_diagnostic(args.rope_diagnostic) if args.rope_diagnostic else None
    out = Path(args.out)
    # Paths on the page count from the folder that holds the page's folder (harness demo: its --out).
    board = build(
        load_runs(args.results),
        baseline=args.baseline,
        threshold=args.threshold,
        title=args.title,
        root=out.resolve().parent,
        rope=rope,
    )
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
