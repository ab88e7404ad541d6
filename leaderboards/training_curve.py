"""Effective length against training tokens, with intervals: a training run's curve on the leaderboard.

    from leaderboards.training_curve import eff_by_tokens, eff_tokens_chart
    curve = eff_by_tokens(run, "ruler", threshold=85.6)   # None without per-step results or a threshold
    curve["points"]   # [(x, effective length or None, low, high, step), ...] by step
    eff_tokens_chart(curve)                                # -> markupsafe.Markup (inline SVG)

x is the checkpoint's training tokens: step x tokens_per_step of its harness_training.json, which
`harness train` writes (a run whose checkpoints do not say gets no curve here; the step chart beside
it still shows its effective length by step). The effective length is the run's
one rule (harness.core.effective_length) on the checkpoint's own suite averages (results.json
per_step); its interval is the 95% percentile interval of the same rule applied to bootstrap
replicates of those averages (each task's samples resampled with harness.core.paired's seeded draws,
tasks averaged within a replicate), so a point whose interval spans several lengths is not yet a
length the run holds. A result without per-sample scores (an import) gets points without intervals.
"""

from __future__ import annotations

import numpy as np
from markupsafe import Markup, escape

from harness.core.effective_length import effective_length_value
from harness.core.lengths import format_length
from harness.core.paired import cell_replicates, mean_of


def _tokens(checkpoints: list[dict]) -> dict[int, int] | None:
    """step -> training tokens, when every checkpoint with a step records its tokens per step."""
    out = {}
    for c in checkpoints:
        step, per = c.get("step"), (c.get("training") or {}).get("tokens_per_step")
        if not isinstance(step, int):
            continue
        if not isinstance(per, int) or isinstance(per, bool) or per <= 0:
            return None
        out[step] = step * per
    return out or None


def _replicates(suite: dict, lengths: list[int], labels: list[str]) -> dict[int, np.ndarray] | None:
    """length -> (B, K) replicates of each checkpoint's suite average (None without per-sample scores)."""
    blocks = suite.get("samples") or {}
    if not blocks:
        return None
    pooled = suite.get("weighting") == "samples"
    out = {}
    for L in lengths:
        parts, weights = [], []
        for task in suite.get("evaluated") or []:
            block = (blocks.get(task) or {}).get(str(L))
            if block is None or not all(lab in block.get("scores", {}) for lab in labels):
                continue
            parts.append(cell_replicates(task, L, block, labels))
            weights.append(len(block["index"]) if pooled else 1.0)
        if parts:
            out[L] = mean_of(parts, weights)
    return out


def _interval(reps: dict[int, np.ndarray], k: int, threshold: float) -> tuple[int | None, int | None]:
    """The 95% interval of the effective length of checkpoint k over the replicates (None: below the first)."""
    lengths = sorted(reps)
    n = reps[lengths[0]].shape[0]
    values = []
    for b in range(n):
        v = effective_length_value({L: float(reps[L][b, k]) for L in lengths}, threshold)
        values.append(0 if v is None else v)
    arr = np.asarray(values)
    low = int(np.quantile(arr, 0.025, method="inverted_cdf"))
    high = int(np.quantile(arr, 0.975, method="inverted_cdf"))
    return (low or None), (high or None)


def eff_by_tokens(run: dict, name: str, threshold: float | None) -> dict | None:
    """One run's effective length at each checkpoint against its training tokens (see the module
    docstring); None without a threshold, training tokens, two stepped checkpoints or a length table."""
    suite = run["suites"][name]
    if threshold is None:
        return None
    table: dict[int, dict[str, float]] = {}
    for L, s in suite.get("per_length", {}).items():
        raw = s.get("per_step") or {}
        if int(L) != 0 and raw and all(str(k).isdigit() for k in raw):
            table[int(L)] = {str(k): float(v) for k, v in raw.items()}
    if not table:
        return None
    labels = sorted(set.intersection(*(set(per) for per in table.values())), key=int)
    if len(labels) < 2:
        return None
    lengths = sorted(table)
    tokens = _tokens(run["run"].get("checkpoints") or [])
    if tokens is None or not all(int(lab) in tokens for lab in labels):
        return None
    reps = _replicates(suite, lengths, labels)
    points = []
    for k, lab in enumerate(labels):
        step = int(lab)
        value = effective_length_value({L: table[L][lab] for L in lengths}, threshold)
        low, high = _interval(reps, k, threshold) if reps and sorted(reps) == lengths else (None, None)
        points.append((tokens[step], value, low, high, step))
    return {
        "run": run["run"]["name"],
        "lengths": lengths,
        "threshold": threshold,
        "points": points,
        "intervals": reps is not None,
    }


def _x_label(v: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.3g}{unit}"
    return f"{v:.3g}"


def eff_tokens_chart(curve: dict, width: int = 420, height: int = 260, label: str = "") -> Markup:
    """The curve: a point per checkpoint on the lengths' rungs, its 95% interval a vertical bar."""
    from leaderboards.svg import Axis, _chart, _top, nice_ticks

    lengths = curve["lengths"]
    rungs = ["< " + format_length(lengths[0])] + [format_length(L) for L in lengths]

    def rung(value: int | None) -> int:
        return 0 if value is None else lengths.index(value) + 1

    xs = [p[0] for p in curve["points"]]
    left, right, bottom = 56, 12, 38
    top = _top(1, ["effective length"], width, left, right)
    height = max(height, top + 150)
    x = Axis(min(xs), max(xs), left + 10, width - right - 10)
    y = Axis(0, len(lengths), height - bottom, top)
    bars, points = [], []
    for xv, value, low, high, step in curve["points"]:
        shown = format_length(value) if value else rungs[0]
        tip = f"{curve['run']} · {_x_label(xv)} tokens (step {step}): effective length {shown}"
        if curve["intervals"]:
            tip += f" (95% interval {format_length(low) if low else rungs[0]} – {format_length(high) if high else rungs[0]})"
            px, y0, y1 = x(xv), y(rung(low) - 0.15), y(rung(high) + 0.15)
            bars.append(
                f'<line class="interval" data-step="{step}" x1="{px:.2f}" x2="{px:.2f}" y1="{y0:.2f}" y2="{y1:.2f}" '
                f'stroke="#0072B2" stroke-opacity="0.45" stroke-width="5" stroke-linecap="round">'
                f"<title>{escape(tip)}</title></line>"
            )
        points.append((xv, rung(value), tip))
    ticks = nice_ticks(min(xs), max(xs), 4)
    return _chart(
        [{"label": f"effective length (threshold {curve['threshold']:g})", "color": "#0072B2", "points": points}],
        x,
        y,
        [t for t in ticks if min(xs) <= t <= max(xs)] or xs[:1],
        _x_label,
        list(range(len(rungs))),
        width,
        height,
        f"{curve['run']}: {label + ' ' if label else ''}effective length vs training tokens",
        "training tokens",
        "length",
        None,
        "eff-by-tokens",
        underlay=bars,
        y_label_fn=lambda v: rungs[int(v)],
    )


def charts(block: dict) -> list[Markup]:
    """The charts of a suite's series block (leaderboards.series)."""
    return [eff_tokens_chart(e, label=block["label"]) for e in block.get("eff_by_tokens") or []]
