"""Render the leaderboard model to one self-contained HTML page (inline CSS/JS, no network).

    from leaderboards.render import render_html
    html = render_html(board)           # board from leaderboards.build.build

Templates live in leaderboards/templates/*.html.j2. Autoescape is on for every template, so run,
model and task names are always text; the only markup not escaped by jinja is the SVG from
leaderboards.svg, which escapes its own text.
"""

from __future__ import annotations

from pathlib import Path

TEMPLATES = Path(__file__).parent / "templates"


def environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template, whatever its extension
        undefined=jinja2.StrictUndefined,  # a typo in a template is an error, not an empty cell
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def render_html(board: dict, generated: str | None = None) -> str:
    from harness import __version__
    from harness.provenance import now_iso
    from leaderboards.export import table_data, to_markdown
    from leaderboards.svg import depth_heatmap, length_chart, step_chart

    series = board["series"]
    charts = {
        "by_length": length_chart(
            series["by_length"],
            threshold=board["threshold"] if board["threshold"] is not None else _common_threshold(board),
        )
        if series["by_length"]
        else None,
        "by_step": [
            step_chart(s) for s in series["by_step"] if len({st for l in s["lines"] for st, _ in l["points"]}) > 1
        ],
        "heatmaps": [depth_heatmap(h) for h in board.get("heatmaps") or []],
    }
    markdown = {v: to_markdown(board, v) for v in (["scores", "delta"] if board["baseline"] else ["scores"])}
    return (
        environment()
        .get_template("index.html.j2")
        .render(
            board=board,
            charts=charts,
            markdown=markdown,
            downloads=table_data(board),
            generated=generated or now_iso(),
            version=__version__,
        )
    )


def _common_threshold(board: dict) -> float | None:
    """The results' threshold for the chart line, when every run states the same one."""
    text = board["threshold_text"]
    if not text or "," in text:
        return None
    return float(text.split()[0])
