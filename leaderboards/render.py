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
    from harness.core.provenance import now_iso
    from leaderboards.export import table_data, to_markdown
    from leaderboards.sequential_export import sequential_csv, sequential_markdown
    from leaderboards.svg import depth_heatmap

    charts = {
        "suites": [suite_charts(block) for block in board["series"]["suites"]],
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
            sequential_csv=sequential_csv(board),
            sequential_md=sequential_markdown(board),
            generated=generated or now_iso(),
            version=__version__,
        )
    )


def several_steps(run_series: dict) -> bool:
    """A step chart needs two steps at least (one checkpoint is a point, not a curve)."""
    return len({st for line in run_series["lines"] for st, _ in line["points"]}) > 1


def suite_charts(block: dict) -> dict:
    """The SVG charts of one charted suite (leaderboards.series): length, steps, effective length."""
    from leaderboards import training_curve
    from leaderboards.svg import eff_step_chart, length_chart, step_chart

    label = block["label"]
    return {
        "suite": block["suite"],
        "label": label,
        "by_length": length_chart(block["by_length"], threshold=block["threshold"], label=label),
        "by_step": [step_chart(s, label=label) for s in block["by_step"] if several_steps(s)],
        "eff_by_step": [eff_step_chart(e, label=label) for e in block["eff_by_step"]],
        "eff_by_tokens": training_curve.charts(block),
    }
