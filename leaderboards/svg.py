"""Inline SVG line charts (no plotting library, no network): score vs length, score vs step.

    from leaderboards.svg import length_chart, step_chart
    length_chart(board["series"]["by_length"], threshold=85.6)   # -> markupsafe.Markup
    step_chart(board["series"]["by_step"][0])                    # the paper's Figure 4, one run

Every piece of text is escaped here (run names reach the page through these charts too).
Geometry lives in `Axis` so the tests can map drawn coordinates back to data values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from markupsafe import Markup, escape

from harness.core.lengths import format_length

# Okabe–Ito: distinguishable with the common colour-vision deficiencies (yellow dropped: unreadable on white).
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F7F7F", "#000000"]


@dataclass(frozen=True)
class Axis:
    """Linear map from [lo, hi] (or log2 of it) onto pixels [p0, p1]."""

    lo: float
    hi: float
    p0: float
    p1: float
    log2: bool = False

    def _t(self, v: float) -> float:
        f = math.log2 if self.log2 else float
        lo, hi = f(self.lo), f(self.hi)
        return 0.5 if hi == lo else (f(v) - lo) / (hi - lo)

    def __call__(self, v: float) -> float:
        return self.p0 + (self.p1 - self.p0) * self._t(v)

    def invert(self, p: float) -> float:
        t = 0.5 if self.p1 == self.p0 else (p - self.p0) / (self.p1 - self.p0)
        if self.log2:
            return 2 ** (math.log2(self.lo) + t * (math.log2(self.hi) - math.log2(self.lo)))
        return self.lo + t * (self.hi - self.lo)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k) covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks, v = [], start
    while v <= hi + step * 1e-9:
        if v >= lo - step * 1e-9:
            ticks.append(round(v, 10))
        v += step
    return ticks


def padded_range(values: list[float], min_span: float = 2.0) -> tuple[float, float]:
    """A y range around the data with room to see movement (Figure 4 moves by a few points)."""
    lo, hi = min(values), max(values)
    if hi - lo < min_span:
        mid = (hi + lo) / 2
        lo, hi = mid - min_span / 2, mid + min_span / 2
    pad = (hi - lo) * 0.1
    lo, hi = max(0.0, lo - pad), min(100.0, hi + pad)
    ticks = nice_ticks(lo, hi)
    return min(lo, ticks[0]), max(hi, ticks[-1])


def _fmt_tick(v: float) -> str:
    return f"{v:g}"


def _chart(
    series,
    x: Axis,
    y: Axis,
    x_ticks,
    x_label_fn,
    y_ticks,
    width,
    height,
    title,
    x_title,
    y_title,
    threshold=None,
    label: str = "chart",
    underlay: list[str] | None = None,
    y_label_fn=None,
) -> Markup:
    """The shared frame: title, grid, axes, threshold line, `underlay` (bands and shaded spans,
    drawn under the lines so points stay visible), the series and their legend."""
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(title)}" data-chart="{escape(label)}">'
        )
    ]
    out.append(f'<text class="chart-title" x="{x.p0:.1f}" y="16">{escape(title)}</text>')
    out += _grid(x, y, y_ticks, y_label_fn or _fmt_tick)
    out += _x_axis(x, y, x_ticks, x_label_fn, height, x_title)
    out.append(
        f'<text class="axis-title" transform="translate(12 {(y.p0 + y.p1) / 2:.1f}) rotate(-90)" text-anchor="middle">{escape(y_title)}</text>'
    )
    if threshold is not None and y.lo <= threshold <= y.hi:
        py = y(threshold)
        out.append(f'<line class="threshold" x1="{x.p0:.1f}" x2="{x.p1:.1f}" y1="{py:.1f}" y2="{py:.1f}"/>')
        out.append(
            f'<text class="tick threshold-label" x="{x.p1:.1f}" y="{py - 4:.1f}" text-anchor="end">threshold {escape(_fmt_tick(threshold))}</text>'
        )
    out += underlay or []
    out += _lines(series, x, y)
    out += _legend(series, x)
    out.append("</svg>")
    return Markup("".join(out))


def _grid(x: Axis, y: Axis, y_ticks, y_label_fn) -> list[str]:
    """A horizontal grid line and a label per y tick."""
    out = []
    for v in y_ticks:
        py = y(v)
        out.append(f'<line class="grid" x1="{x.p0:.1f}" x2="{x.p1:.1f}" y1="{py:.1f}" y2="{py:.1f}"/>')
        out.append(
            f'<text class="tick" x="{x.p0 - 6:.1f}" y="{py + 4:.1f}" text-anchor="end">{escape(y_label_fn(v))}</text>'
        )
    return out


def _x_axis(x: Axis, y: Axis, x_ticks, x_label_fn, height, x_title) -> list[str]:
    """The x axis: a tick mark and label per tick, the axis line, its title."""
    out = []
    for v in x_ticks:
        px = x(v)
        out.append(f'<line class="axis" x1="{px:.1f}" x2="{px:.1f}" y1="{y.p0:.1f}" y2="{y.p0 + 4:.1f}"/>')
        out.append(
            f'<text class="tick" x="{px:.1f}" y="{y.p0 + 17:.1f}" text-anchor="middle">{escape(x_label_fn(v))}</text>'
        )
    out.append(f'<line class="axis" x1="{x.p0:.1f}" x2="{x.p1:.1f}" y1="{y.p0:.1f}" y2="{y.p0:.1f}"/>')
    out.append(
        f'<text class="axis-title" x="{(x.p0 + x.p1) / 2:.1f}" y="{height - 4}" text-anchor="middle">{escape(x_title)}</text>'
    )
    return out


def _lines(series, x: Axis, y: Axis) -> list[str]:
    """Each series as a path through its points, every point a circle with its tooltip."""
    out = []
    for i, s in enumerate(series):
        color = s.get("color") or PALETTE[i % len(PALETTE)]
        pts = [(x(px), y(py), tip) for px, py, tip in s["points"]]
        width_attr = ' stroke-width="2.6"' if s.get("bold") else ""
        dash = ' stroke-dasharray="5 3"' if s.get("dashed") else ""
        out.append(f'<g class="series" data-series="{escape(s["label"])}">')
        if len(pts) > 1:
            d = " ".join(f"{'M' if j == 0 else 'L'}{px:.2f},{py:.2f}" for j, (px, py, _) in enumerate(pts))
            out.append(f'<path d="{d}" fill="none" stroke="{color}"{width_attr}{dash}/>')
        for px, py, tip in pts:
            out.append(
                f'<circle cx="{px:.2f}" cy="{py:.2f}" r="3.2" fill="{color}"><title>{escape(tip)}</title></circle>'
            )
        out.append("</g>")
    return out


def _legend(series, x: Axis) -> list[str]:
    """Legend under the title, wrapping by measured-ish width (7 px per character)."""
    out = []
    lx, ly = x.p0, 30
    for i, s in enumerate(series):
        color = s.get("color") or PALETTE[i % len(PALETTE)]
        w = 22 + 7 * len(s["label"]) + 14
        if lx + w > x.p1 and lx > x.p0:
            lx, ly = x.p0, ly + 15
        out.append(
            f'<g class="legend"><line x1="{lx:.1f}" x2="{lx + 16:.1f}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" stroke-width="2.5"/>'
            f'<text x="{lx + 20:.1f}" y="{ly}">{escape(s["label"])}</text></g>'
        )
        lx += w
    return out


def _top(series_count: int, labels: list[str], width: int, left: int, right: int) -> int:
    """Room above the plot for the title and a wrapped legend."""
    rows, used = 1, 0
    for lab in labels:
        w = 36 + 7 * len(lab)
        if used + w > width - left - right and used > 0:
            rows, used = rows + 1, 0
        used += w
    return 30 + 15 * rows


def _band(points: list[tuple], x: Axis, y: Axis, color: str, run: str) -> str:
    """The 95% interval of a run's curve as a shaded polygon (upper edge out, lower edge back);
    empty where the results hold no interval (schema 1) at some length."""
    have = [(p[0], p[3], p[4]) for p in points if len(p) >= 5 and p[3] is not None and p[4] is not None]
    if len(have) < 2 or len(have) != len(points):
        return ""
    edge = [(x(L), y(hi)) for L, _, hi in have] + [(x(L), y(lo)) for L, lo, _ in reversed(have)]
    d = " ".join(f"{px:.2f},{py:.2f}" for px, py in edge)
    return (
        f'<polygon class="band" data-series="{escape(run)}" points="{d}" fill="{color}" fill-opacity="0.15" '
        f'stroke="none"><title>{escape(run)}: 95% interval</title></polygon>'
    )


def _length_tip(run: str, point: tuple) -> str:
    L, m, sd = point[:3]
    tip = f"{run} · {format_length(L)}: {m:.2f}" + (f" ± {sd:.2f}" if sd is not None else "")
    if len(point) >= 5 and point[3] is not None and point[4] is not None:
        tip += f" (95% interval [{point[3]:.2f}, {point[4]:.2f}])"
    return tip


def length_chart(
    by_length: list[dict],
    threshold: float | None = None,
    width: int = 720,
    height: int = 340,
    label: str = "RULER",
) -> Markup:
    """A suite's average vs context length, one line per run (x on a log2 axis: lengths double),
    with each run's 95% interval shaded where the results carry one. Points are (length, mean,
    std) or (length, mean, std, ci_low, ci_high) (leaderboards.series)."""
    lengths = sorted({p[0] for s in by_length for p in s["points"]})
    left, right, bottom = 46, 16, 38
    top = _top(len(by_length), [s["run"] for s in by_length], width, left, right)
    height = max(height, top + 200)
    x = Axis(lengths[0], lengths[-1], left + 10, width - right - 10, log2=True)
    y = Axis(0, 100, height - bottom, top)
    series = [
        {"label": s["run"], "points": [(p[0], p[1], _length_tip(s["run"], p)) for p in s["points"]]} for s in by_length
    ]
    bands = [_band(s["points"], x, y, PALETTE[i % len(PALETTE)], s["run"]) for i, s in enumerate(by_length)]
    return _chart(
        series,
        x,
        y,
        lengths,
        format_length,
        nice_ticks(0, 100),
        width,
        height,
        f"{label} average vs context length",
        "context length (tokens)",
        "score",
        threshold,
        "by-length",
        underlay=[b for b in bands if b],
    )


def _window_span(window: list[int] | None, x: Axis, y: Axis) -> list[str]:
    """The checkpoints the table averages, shaded behind the step chart's lines."""
    if not window:
        return []
    a, b = x(window[0]), x(window[1])
    pad = 6 if a == b else 0  # one step: a visible sliver, not a zero-width rectangle
    tip = f"averaged in the table: steps {window[0]}–{window[1]}" if window[0] != window[1] else f"step {window[0]}"
    return [
        (
            f'<rect class="window" data-window="{window[0]}-{window[1]}" x="{min(a, b) - pad:.2f}" y="{y.p1:.2f}" '
            f'width="{abs(b - a) + 2 * pad:.2f}" height="{y.p0 - y.p1:.2f}" fill="#8a93a0" fill-opacity="0.12">'
            f"<title>{escape(tip)}</title></rect>"
        ),
        f'<text class="tick window-label" x="{min(a, b) - pad + 3:.1f}" y="{y.p0 - 5:.1f}">averaged</text>',
    ]


def step_chart(run_series: dict, width: int = 420, height: int = 280, label: str = "") -> Markup:
    """One run's score at each checkpoint step: per length, plus the average (the AnchorAttention
    paper's Figure 4), the steps the table averages shaded."""
    steps = sorted({st for line in run_series["lines"] for st, _ in line["points"]})
    values = [v for line in run_series["lines"] for _, v in line["points"]]
    labels = ["Avg"] + [line["label"] for line in run_series["lines"]]
    left, right, bottom = 46, 12, 38
    top = _top(len(labels), labels, width, left, right)
    height = max(height, top + 170)
    lo, hi = padded_range(values)
    x = Axis(steps[0], steps[-1], left + 10, width - right - 10)
    y = Axis(lo, hi, height - bottom, top)
    series = [
        {
            "label": "Avg",
            "color": "#000000",
            "bold": True,
            "points": [(st, v, f"{run_series['run']} · step {st} · Avg: {v:.2f}") for st, v in run_series["avg"]],
        }
    ]
    for i, line in enumerate(run_series["lines"]):
        series.append(
            {
                "label": line["label"],
                "color": PALETTE[i % (len(PALETTE) - 1)],
                "dashed": False,
                "points": [
                    (st, v, f"{run_series['run']} · step {st} · {line['label']}: {v:.2f}") for st, v in line["points"]
                ],
            }
        )
    return _chart(
        series,
        x,
        y,
        steps,
        str,
        nice_ticks(lo, hi),
        width,
        height,
        f"{run_series['run']}: {label + ' ' if label else ''}score vs checkpoint step",
        "training step",
        "score",
        None,
        "by-step",
        underlay=_window_span(run_series.get("window"), x, y),
    )


def eff_step_chart(eff: dict, width: int = 420, height: int = 240, label: str = "") -> Markup:
    """One run's effective length at each checkpoint step (leaderboards.series `eff_by_step`): the
    y axis is the evaluated lengths, evenly spaced, with "below the first length" under them."""
    lengths = eff["lengths"]
    rungs = ["< " + format_length(lengths[0])] + [format_length(L) for L in lengths]

    def rung(value: int | None) -> int:
        return 0 if value is None else lengths.index(value) + 1

    steps = [st for st, _ in eff["points"]]
    left, right, bottom = 56, 12, 38
    top = _top(1, ["effective length"], width, left, right)
    height = max(height, top + 150)
    x = Axis(steps[0], steps[-1], left + 10, width - right - 10)
    y = Axis(0, len(lengths), height - bottom, top)
    points = [
        (st, rung(v), f"{eff['run']} · step {st}: effective length {format_length(v) if v else rungs[0]}")
        for st, v in eff["points"]
    ]
    return _chart(
        [{"label": f"effective length (threshold {eff['threshold']:g})", "color": "#0072B2", "points": points}],
        x,
        y,
        steps,
        str,
        list(range(len(rungs))),
        width,
        height,
        f"{eff['run']}: {label + ' ' if label else ''}effective length vs step",
        "training step",
        "length",
        None,
        "eff-by-step",
        y_label_fn=lambda v: rungs[int(v)],
    )


# ----------------------------------------------------------------------------------------------
# Needle depth x length heatmap

# Sequential: white to dark blue (one hue, so it reads the same with any colour-vision deficiency);
# diverging: orange (below the baseline) to white to blue (above), as the table's delta colours.
_SEQ = ((247, 251, 255), (8, 81, 156))
_DIV_NEG, _DIV_POS = (230, 97, 1), (33, 102, 172)


def _mix(a: tuple, b: tuple, t: float) -> tuple[int, int, int]:
    t = min(1.0, max(0.0, t))
    return tuple(round(x + (y - x) * t) for x, y in zip(a, b))


def heat_color(value: float, diverging: bool = False, scale: float = 100.0) -> tuple[int, int, int]:
    """Fill of a heatmap cell: 0..100 on the sequential scale, or -scale..+scale on the diverging one."""
    if diverging:
        t = abs(value) / scale if scale > 0 else 0.0
        return _mix((255, 255, 255), _DIV_POS if value > 0 else _DIV_NEG, t)
    return _mix(_SEQ[0], _SEQ[1], value / 100.0)


def _ink(rgb: tuple[int, int, int]) -> str:
    """Dark or white text, whichever contrasts more with the fill (relative luminance, WCAG)."""

    def lin(c: int) -> float:
        x = c / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])
    return "#ffffff" if (1.05 / (lum + 0.05)) > ((lum + 0.05) / 0.05) else "#1d2430"


# Heatmap geometry: cells and text big enough to read at their natural size (the page shows them
# unscaled up to the column width; 13 px cell text, 28 px rows).
HEAT_CELL_W, HEAT_CELL_H = 72, 28


def depth_heatmap(hm: dict, cell_w: int = HEAT_CELL_W, cell_h: int = HEAT_CELL_H) -> Markup:
    """Needle hit rate (or its difference from the baseline) by depth bin (rows) and length (columns).

    Each cell prints its value and has a <title> with the value, bin, length and needle count, so
    nothing depends on reading the colour."""
    delta = hm["kind"] == "delta"
    lengths, bins = hm["lengths"], hm["bins"]
    who = f"{hm['run']} − {hm['baseline']}" if delta else hm["run"]
    what = "needle hit rate, difference (points)" if delta else "needle hit rate (%)"
    title = f"{who}: {what} by depth and length"
    tasks = ", ".join(hm.get("tasks") or [])
    left, top, right, bottom = 84, 66, 12, 38
    # wide enough for the three heading lines (about 7.5 px a character at this size)
    width = max(left + cell_w * len(lengths) + right, round(7.5 * max(len(who), len(what), len(tasks))) + 10)
    height = top + cell_h * len(bins) + bottom
    values = [c["mean"] for L in lengths for c in hm["cells"][str(L)] if c is not None]
    scale = max([abs(v) for v in values] + [1e-9]) if delta else 100.0
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" '
            f'data-chart="heatmap" data-kind="{escape(hm["kind"])}" data-run="{escape(hm["run"])}">'
        )
    ]
    out.append(f'<text class="chart-title" x="4" y="18">{escape(who)}</text>')
    out.append(f'<text class="axis-title" x="4" y="35">{escape(what)}</text>')
    out.append(f'<text class="axis-title" x="4" y="51">{escape(tasks)}</text>')
    for j, L in enumerate(lengths):
        x = left + j * cell_w + cell_w / 2
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{top + cell_h * len(bins) + 17}" text-anchor="middle">'
            f"{escape(format_length(L))}</text>"
        )
    for i, (lo, hi) in enumerate(bins):
        y = top + i * cell_h + cell_h / 2 + 5
        out.append(f'<text class="tick" x="{left - 6}" y="{y:.1f}" text-anchor="end">{lo}–{hi}%</text>')
    for j, L in enumerate(lengths):
        for i, cell in enumerate(hm["cells"][str(L)]):
            box = (left + j * cell_w, top + i * cell_h, cell_w, cell_h)
            out.append(_heat_cell(cell, box, who, L, bins[i], delta, scale))
    out.append(
        f'<text class="axis-title" x="{left + cell_w * len(lengths) / 2:.1f}" y="{height - 3}" '
        f'text-anchor="middle">context length</text>'
    )
    out.append("</svg>")
    return Markup("".join(out))


def _heat_cell(
    cell: dict | None, box: tuple[int, int, int, int], who: str, length: int, depth: tuple, delta: bool, scale: float
) -> str:
    """One heatmap cell at box (x, y, width, height): its fill, printed value and tooltip, or a grey
    cell where no needle sat at this depth."""
    x, y, cell_w, cell_h = box
    lo, hi = depth
    where = f"{format_length(length)}, depth {lo}–{hi}%"
    if cell is None:
        return (
            f'<rect class="empty" x="{x}" y="{y}" width="{cell_w - 1}" height="{cell_h - 1}" fill="#f3f4f6">'
            f"<title>{escape(who)} · {escape(where)}: no needle at this depth</title></rect>"
        )
    v = cell["mean"]
    rgb = heat_color(v, delta, scale)
    text = (f"{v:+.0f}".replace("-", "−") if round(v) != 0 else "0") if delta else f"{v:.0f}"
    tip = f"{who} · {where}: {'Δ ' if delta else ''}{v:+.1f}" if delta else f"{who} · {where}: {v:.1f}"
    tip += f" ({cell['n']} needle{'s' if cell['n'] != 1 else ''} per checkpoint, mean over checkpoints)"
    return (
        f'<g class="cell" data-length="{length}" data-bin="{lo}" data-value="{v:.4f}">'
        f'<rect x="{x}" y="{y}" width="{cell_w - 1}" height="{cell_h - 1}" fill="rgb{rgb}" stroke="#d8dde5">'
        f"<title>{escape(tip)}</title></rect>"
        f'<text x="{x + cell_w / 2:.1f}" y="{y + cell_h / 2 + 5:.1f}" text-anchor="middle" fill="{_ink(rgb)}">'
        f"{escape(text)}<title>{escape(tip)}</title></text></g>"
    )
