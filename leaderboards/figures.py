"""The leaderboard's charts as figure files: SVG (the page's own, from leaderboards.svg) and
PDF/PNG drawn by matplotlib (the `plots` extra) from the same series (leaderboards.series).

    from leaderboards.figures import write_figures
    paths = write_figures(board, Path("figs"), formats=("svg", "pdf", "png"))

Per charted suite: <suite>-score-vs-length.*, and per run with several checkpoints
<suite>-<run>-score-vs-step.* and <suite>-<run>-effective-length-vs-step.*. PDFs embed TrueType
fonts (pdf.fonttype 42), which journals ask for and which keeps the text searchable.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.core.errors import UserError
from leaderboards.svg import PALETTE

FORMATS = ("svg", "pdf", "png")
PNG_DPI = 200

# The page's chart CSS, inlined so a standalone SVG file looks as it does on the page.
_SVG_STYLE = (
    "<style>svg.chart{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;font-size:11px}"
    ".grid{stroke:#e6e9ee}.axis{stroke:#8a93a0}.tick{fill:#5b6472}"
    ".chart-title{font-weight:600;font-size:12.5px;fill:#1d2430}.axis-title{fill:#5b6472}"
    ".legend text{fill:#1d2430}.threshold{stroke:#1b7837;stroke-dasharray:4 4}"
    ".threshold-label{fill:#1b7837}.window-label{font-size:10px}circle{stroke:#fff;stroke-width:1}</style>"
)


def parse_formats(text: str) -> tuple[str, ...]:
    """ "svg,pdf" -> ("svg", "pdf"); an unknown format is a one-line error."""
    wanted = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    bad = [f for f in wanted if f not in FORMATS]
    if bad or not wanted:
        raise UserError(f"--figure-formats {text!r}: choose from {', '.join(FORMATS)} (comma-separated)")
    return wanted


def slug(text: str) -> str:
    """A file-name-safe form of a suite or run name (run names are free text)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"


def standalone_svg(svg: str) -> str:
    """The page's SVG with its CSS inlined and a pixel size, readable on its own."""
    width, height = re.search(r'viewBox="0 0 (\S+) (\S+)"', svg).groups()  # type: ignore[union-attr]
    head, rest = svg.split(">", 1)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{head} width="{width}" height="{height}">{_SVG_STYLE}{rest}\n'


def figure_specs(board: dict) -> list[dict]:
    """Every figure of the board: name, kind, the series it draws and the suite label."""
    specs = []
    for block in board["series"]["suites"]:
        base, label = slug(block["suite"]), block["label"]
        specs.append({"name": f"{base}-score-vs-length", "kind": "length", "data": block, "label": label})
        for s in block["by_step"]:
            if len({st for line in s["lines"] for st, _ in line["points"]}) > 1:
                name = f"{base}-{slug(s['run'])}-score-vs-step"
                specs.append({"name": name, "kind": "step", "data": s, "label": label})
        for e in block["eff_by_step"]:
            name = f"{base}-{slug(e['run'])}-effective-length-vs-step"
            specs.append({"name": name, "kind": "eff", "data": e, "label": label})
    return _unique(specs)


def _unique(specs: list[dict]) -> list[dict]:
    """Two run names that slug alike ("a/b", "a_b") get numbered files, never one overwriting the other."""
    seen: dict[str, int] = {}
    for spec in specs:
        n = seen.get(spec["name"], 0)
        seen[spec["name"]] = n + 1
        if n:
            spec["name"] += f"-{n + 1}"
    return specs


def _svg(spec: dict) -> str:
    from leaderboards.svg import eff_step_chart, length_chart, step_chart

    data, label = spec["data"], spec["label"]
    if spec["kind"] == "length":
        return str(length_chart(data["by_length"], threshold=data["threshold"], label=label))
    if spec["kind"] == "step":
        return str(step_chart(data, label=label))
    return str(eff_step_chart(data, label=label))


def write_figures(board: dict, out: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Write every figure in every format into `out` (created); returns the paths written."""
    specs = figure_specs(board)
    raster = [f for f in formats if f != "svg"]
    if raster and specs:
        _require_matplotlib(raster)
    files: dict[str | Path, str | bytes] = {}
    for spec in specs:
        if "svg" in formats:
            files[out / f"{spec['name']}.svg"] = standalone_svg(_svg(spec))
        if raster:
            files.update(_matplotlib_files(spec, out, raster))
    from harness.core.atomic import atomic_write_many

    # Drawn in memory first, then each file renamed into place: a full disk or a folder that cannot
    # be made is one line (harness.core.atomic), and no half-written figure is left behind.
    atomic_write_many(files)
    if not files:  # nothing to chart: the folder asked for still exists afterwards
        from harness.core.atomic import os_error

        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise os_error(out, exc) from None
    return [Path(p) for p in files]


def _require_matplotlib(formats: list[str]) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(
            f"{'/'.join(f.upper() for f in formats)} figures need matplotlib: pip install -e '.[plots]' "
            "(or pass --figure-formats svg)"
        ) from None


def _matplotlib_files(spec: dict, out: Path, formats: list[str]) -> dict[str | Path, str | bytes]:
    """{path: the figure's bytes} per raster format, drawn in memory."""
    import io

    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    draw = {"length": _mpl_length, "step": _mpl_step, "eff": _mpl_eff}[spec["kind"]]
    files: dict[str | Path, str | bytes] = {}
    with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42, "font.size": 9}):
        fig = Figure(figsize=(6.4, 3.6) if spec["kind"] == "length" else (4.8, 3.2), layout="constrained")
        draw(fig.add_subplot(), spec["data"], spec["label"])
        for fmt in formats:
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, dpi=PNG_DPI, metadata=_metadata(fmt, spec["name"]))
            files[out / f"{spec['name']}.{fmt}"] = buf.getvalue()
    return files


def _metadata(fmt: str, name: str) -> dict:
    # Fixed metadata (no creation date): the same results give the same PDF bytes.
    if fmt == "pdf":
        return {"Title": name, "Creator": "harness", "CreationDate": None}
    return {"Title": name, "Software": "harness"} if fmt == "png" else {}


def _mpl_length(ax, block: dict, label: str) -> None:
    from harness.core.lengths import format_length

    lengths = sorted({p[0] for s in block["by_length"] for p in s["points"]})
    for i, s in enumerate(block["by_length"]):
        color = PALETTE[i % len(PALETTE)]
        xs, ys = [p[0] for p in s["points"]], [p[1] for p in s["points"]]
        ax.plot(xs, ys, marker="o", markersize=3.5, color=color, label=s["run"])
        if s["points"] and all(len(p) >= 5 and p[3] is not None for p in s["points"]):
            ax.fill_between(xs, [p[3] for p in s["points"]], [p[4] for p in s["points"]], color=color, alpha=0.15)
    if block["threshold"] is not None:
        ax.axhline(block["threshold"], color="#1b7837", linestyle="--", linewidth=0.9)
        ax.annotate(
            f"threshold {block['threshold']:g}",
            (1, block["threshold"]),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            color="#1b7837",
            fontsize=7,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [format_length(L) for L in lengths])
    ax.minorticks_off()
    ax.set_ylim(0, 100)
    ax.set(xlabel="context length (tokens)", ylabel="score")
    _title(ax, f"{label} average vs context length")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))


def _mpl_step(ax, s: dict, label: str) -> None:
    if s.get("window"):
        lo, hi = s["window"]
        ax.axvspan(lo, hi, color="#8a93a0", alpha=0.12, linewidth=0, label="averaged")
    ax.plot(*zip(*s["avg"]), color="black", linewidth=2.2, marker="o", markersize=3, label="Avg")
    for i, line in enumerate(s["lines"]):
        ax.plot(
            *zip(*line["points"]),
            color=PALETTE[i % (len(PALETTE) - 1)],
            marker="o",
            markersize=2.5,
            linewidth=1,
            label=line["label"],
        )
    ax.set(xlabel="training step", ylabel="score")
    _title(ax, f"{s['run']}: {label} score vs checkpoint step")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))


def _mpl_eff(ax, e: dict, label: str) -> None:
    from harness.core.lengths import format_length

    lengths = e["lengths"]
    rungs = ["< " + format_length(lengths[0])] + [format_length(L) for L in lengths]
    ys = [0 if v is None else lengths.index(v) + 1 for _, v in e["points"]]
    ax.plot(
        [st for st, _ in e["points"]],
        ys,
        marker="o",
        markersize=3.5,
        color=PALETTE[0],
        label=f"threshold {e['threshold']:g}",
    )
    ax.set_yticks(range(len(rungs)), rungs)
    ax.set_ylim(-0.4, len(rungs) - 0.6)
    ax.set(xlabel="training step", ylabel="effective length")
    _title(ax, f"{e['run']}: {label} effective length vs step")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))


def _title(ax, text: str) -> None:
    """Wrapped: a task-list label ("json_kv, rag_nq, ...") would run off the figure's edge."""
    import textwrap

    ax.set_title(textwrap.fill(text, 64), fontsize=9)
