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

from tasks.lengths import format_length

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
) -> Markup:
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(title)}" data-chart="{escape(label)}">'
        )
    ]
    out.append(f'<text class="chart-title" x="{x.p0:.1f}" y="16">{escape(title)}</text>')
    for v in y_ticks:
        py = y(v)
        out.append(f'<line class="grid" x1="{x.p0:.1f}" x2="{x.p1:.1f}" y1="{py:.1f}" y2="{py:.1f}"/>')
        out.append(
            f'<text class="tick" x="{x.p0 - 6:.1f}" y="{py + 4:.1f}" text-anchor="end">{escape(_fmt_tick(v))}</text>'
        )
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
    out.append(
        f'<text class="axis-title" transform="translate(12 {(y.p0 + y.p1) / 2:.1f}) rotate(-90)" text-anchor="middle">{escape(y_title)}</text>'
    )
    if threshold is not None and y.lo <= threshold <= y.hi:
        py = y(threshold)
        out.append(f'<line class="threshold" x1="{x.p0:.1f}" x2="{x.p1:.1f}" y1="{py:.1f}" y2="{py:.1f}"/>')
        out.append(
            f'<text class="tick threshold-label" x="{x.p1:.1f}" y="{py - 4:.1f}" text-anchor="end">threshold {escape(_fmt_tick(threshold))}</text>'
        )
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
    # Legend under the title, wrapping by measured-ish width (7 px per character).
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
    out.append("</svg>")
    return Markup("".join(out))


def _top(series_count: int, labels: list[str], width: int, left: int, right: int) -> int:
    """Room above the plot for the title and a wrapped legend."""
    rows, used = 1, 0
    for lab in labels:
        w = 36 + 7 * len(lab)
        if used + w > width - left - right and used > 0:
            rows, used = rows + 1, 0
        used += w
    return 30 + 15 * rows


def length_chart(by_length: list[dict], threshold: float | None = None, width: int = 720, height: int = 340) -> Markup:
    """RULER average vs context length, one line per run (x on a log2 axis: lengths double)."""
    lengths = sorted({p[0] for s in by_length for p in s["points"]})
    left, right, bottom = 46, 16, 38
    top = _top(len(by_length), [s["run"] for s in by_length], width, left, right)
    height = max(height, top + 200)
    x = Axis(lengths[0], lengths[-1], left + 10, width - right - 10, log2=True)
    y = Axis(0, 100, height - bottom, top)
    series = [
        {
            "label": s["run"],
            "points": [
                (L, m, f"{s['run']} · {format_length(L)}: {m:.2f}" + (f" ± {sd:.2f}" if sd is not None else ""))
                for L, m, sd in s["points"]
            ],
        }
        for s in by_length
    ]
    return _chart(
        series,
        x,
        y,
        lengths,
        format_length,
        nice_ticks(0, 100),
        width,
        height,
        "RULER average vs context length",
        "context length (tokens)",
        "score",
        threshold,
        "by-length",
    )


def step_chart(run_series: dict, width: int = 420, height: int = 280) -> Markup:
    """One run's RULER score at each checkpoint step: per length, plus the average (Figure 4)."""
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
        f"{run_series['run']}: score vs checkpoint step",
        "training step",
        "score",
        None,
        "by-step",
    )
