"""SVG charts: well-formed, escaped, and every drawn point maps back to its data value."""

from __future__ import annotations

import itertools
import math
import random
import xml.etree.ElementTree as ET

import pytest

from leaderboards.svg import Axis, length_chart, nice_ticks, padded_range, step_chart

from .conftest import XSS

NS = {"s": "http://www.w3.org/2000/svg"}


def test_axis_round_trips():
    rng = random.Random(1)
    for _ in range(200):
        lo, hi = sorted(rng.sample(range(1, 10_000), 2))
        ax = Axis(lo, hi, 40.0, 700.0, log2=rng.random() < 0.5)
        v = rng.uniform(lo, hi)
        assert ax.invert(ax(v)) == pytest.approx(v)
        assert ax(lo) == pytest.approx(40.0) and ax(hi) == pytest.approx(700.0)


def test_nice_ticks_cover_range_with_round_steps():
    assert nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    rng = random.Random(2)
    for _ in range(200):
        lo = rng.uniform(0, 90)
        hi = lo + rng.uniform(0.5, 50)
        ticks = nice_ticks(lo, hi)
        steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
        assert len(steps) <= 1 and all(lo - 1e-9 <= t <= hi + 1e-9 for t in ticks) and len(ticks) >= 2
        step = steps.pop()
        mant = step / 10 ** math.floor(math.log10(step))
        assert round(mant, 6) in (1, 2, 2.5, 5, 10)
    lo, hi = padded_range([90.1, 90.4])
    assert lo < 90.1 and hi > 90.4 and hi - lo >= 2


def _points(svg):
    root = ET.fromstring(str(svg))  # must be well-formed XML
    out = {}
    for g in root.iterfind(".//s:g[@class='series']", NS):
        out[g.get("data-series")] = [
            (float(c.get("cx")), float(c.get("cy")), c.find("s:title", NS).text) for c in g.iterfind("s:circle", NS)
        ]
    return root, out


def test_length_chart_points_map_back_to_scores(board):
    by_length = board["series"]["by_length"]
    svg = length_chart(by_length, threshold=85.6)
    assert "<script" not in str(svg) and "&lt;script&gt;" in str(svg)
    root, pts = _points(svg)
    assert set(pts) == {s["run"] for s in by_length} and XSS in pts  # attribute values unescape back to text
    lengths = sorted({p[0] for s in by_length for p in s["points"]})
    xs = sorted({round(x, 2) for series in pts.values() for x, _, _ in series})
    assert len(xs) == len(lengths)
    # Recover the axes from the first/last drawn x positions and 0..100 y range, then invert.
    x = Axis(lengths[0], lengths[-1], xs[0], xs[-1], log2=True)
    y_ticks = {
        t.text: float(t.get("y")) - 4
        for t in root.iterfind(".//s:text[@class='tick']", NS)
        if t.get("text-anchor") == "end"
    }
    y = Axis(0, 100, y_ticks["0"], y_ticks["100"])
    for s in by_length:
        drawn = pts[s["run"]]
        assert len(drawn) == len(s["points"])
        for (L, mean, *_), (px, py, tip) in zip(s["points"], drawn):
            assert x.invert(px) == pytest.approx(L, rel=1e-3)
            assert y.invert(py) == pytest.approx(mean, abs=0.05)
            assert f"{mean:.2f}" in tip
    assert root.find(".//s:line[@class='threshold']", NS) is not None


def test_step_chart_is_figure_4(board, runs_data):
    series = next(s for s in board["series"]["by_step"] if s["run"] == "anchor")
    svg = step_chart(series)
    _, pts = _points(svg)
    assert list(pts) == ["Avg", "4K", "8K", "16K", "32K", "64K", "128K"]
    per_length = runs_data["anchor"][0]["suites"]["ruler"]["per_length"]
    avg = runs_data["anchor"][0]["suites"]["ruler"]["summary"]["avg"]["per_step"]
    assert [st for st, _ in series["avg"]] == [1960, 1970, 1980, 1990, 2000] and len(pts["Avg"]) == 5
    for (step, value), (_, _, tip) in zip(series["avg"], pts["Avg"], strict=True):
        # Within-checkpoint mean over lengths equals the results' Avg at that step.
        assert value == pytest.approx(avg[str(step)])
        assert f"step {step}" in tip
    assert [v for _, v in next(line for line in series["lines"] if line["label"] == "8K")["points"]] == pytest.approx(
        [per_length["8192"]["per_step"][str(s)] for s in (1960, 1970, 1980, 1990, 2000)]
    )
