"""`harness leaderboard`: one self-contained HTML leaderboard (plus CSV/JSON/Markdown) from results.

    harness leaderboard out/full out/anchor/results.json --out site/ --baseline full --title "SlimPajama-64K"

RESULTS are results.json files (docs/contracts.md) or run directories holding one; each run is a
row. Writes DIR/index.html, leaderboard.csv, leaderboard.json and leaderboard.md and prints their
paths, and leaderboard.tex (a booktabs table, docs/exports.md). With --baseline,
leaderboard-delta.{csv,md} hold the delta view too; a run evaluated sequentially (--against /
--until-width) adds its verdicts to the page, leaderboard.md and leaderboard.tex, and writes
leaderboard-sequential.csv. --figures FIGDIR writes the page's charts as
SVG/PDF/PNG files (outside DIR's managed files; PDF/PNG need the `plots` extra). Paths on the page are
shown relative to the folder that holds DIR; --rope-diagnostic adds the RoPE-under-bf16 section.
The files change all or none (harness.core.atomic.publish_files): each DIR/<file> is a relative symlink
into the current generation under DIR/.generations/, and one rename switches every file at once.
"""

from __future__ import annotations

import argparse

# Every file a leaderboard may write (the delta ones only with --baseline).
FILES = (
    "index.html",
    "leaderboard.csv",
    "leaderboard.json",
    "leaderboard.md",
    "leaderboard.tex",
    "leaderboard-delta.csv",
    "leaderboard-delta.md",
    "leaderboard-sequential.csv",
)
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
    parser.add_argument(
        "--figures", metavar="FIGDIR", help="also write the charts as figure files (SVG, PDF, PNG) into FIGDIR"
    )
    parser.add_argument(
        "--figure-formats", default="svg,pdf,png", metavar="LIST", help="comma-separated: svg, pdf, png (default all)"
    )


def run(args: argparse.Namespace) -> int:
    from harness.core.paths import check_out, check_output_file
    from harness.core.validate import require_at_least
    from leaderboards.build import build, load_runs
    from leaderboards.export import to_csv, to_json, to_markdown
    from leaderboards.figures import parse_formats
    from leaderboards.latex import to_latex
    from leaderboards.render import render_html
    from leaderboards.sequential_export import sequential_csv, sequential_markdown
    from leaderboards.sequential_latex import sequential_latex

    require_at_least((("--threshold", args.threshold, 0),))  # above 100: build() says so
    from leaderboards.diagnostic import load_rope_diagnostic

    out = check_out(args.out)
    for name in FILES:
        check_output_file(out / name)
    formats = parse_formats(args.figure_formats)  # a bad list fails before anything is written
    figures = check_out(args.figures, "--figures") if args.figures is not None else None  # '' too
    rope = load_rope_diagnostic(args.rope_diagnostic) if args.rope_diagnostic else None
    # Paths on the page count from the folder that holds the page's folder (harness demo: its --out).
    board = build(
        load_runs(args.results),
        baseline=args.baseline,
        threshold=args.threshold,
        title=args.title,
        root=out.resolve().parent,
        rope=rope,
    )
    files = {
        "index.html": render_html(board),
        "leaderboard.csv": to_csv(board),
        "leaderboard.json": to_json(board),
        "leaderboard.md": to_markdown(board) + ("\n" + sequential_markdown(board) if board["sequential"] else ""),
        "leaderboard.tex": to_latex(board) + sequential_latex(board),
    }
    if board["sequential"]:
        files["leaderboard-sequential.csv"] = sequential_csv(board)
    if board["baseline"]:
        files["leaderboard-delta.csv"] = to_csv(board, "delta")
        files["leaderboard-delta.md"] = to_markdown(board, "delta")
    from harness.core.atomic import publish_files

    # All or none: a full disk or a kill at any point leaves the previous page and exports whole.
    publish_files(out, files, managed=FILES)
    for name in files:
        print(out / name)
    if figures is not None:
        from leaderboards.figures import write_figures

        for path in write_figures(board, figures, formats):
            print(path)
    return 0
