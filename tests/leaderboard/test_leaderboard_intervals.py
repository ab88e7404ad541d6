"""Intervals and significance in the leaderboard model, and the needle-depth heatmaps, on runs
whose differences are known (tests/leaderboard/paired_fixtures.py)."""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET

import pytest

from leaderboards.svg import depth_heatmap, heat_color

from .paired_fixtures import LENGTHS, N, depths, paired_scores

NS = {"s": "http://www.w3.org/2000/svg"}


def _row(board, name):
    return next(r for r in board["rows"] if r["run"] == name)


def _cols(board, prefix):
    return [c for c in board["columns"] if c["key"].startswith(prefix) or c["key"] == prefix]


def test_score_cells_carry_their_interval(paired_board):
    cell = _row(paired_board, "full")["cells"]["ruler/len:1024"]
    lo, hi = cell["ci"]
    assert lo < cell["value"] < hi and cell["pm"] == f"±{(hi - lo) / 2:.1f}"
    assert "95% interval [" in cell["title"] and paired_board["any_intervals"]


def test_identical_run_differs_by_zero_and_is_not_significant(paired_board):
    same = _row(paired_board, "same")
    for c in paired_board["columns"]:
        if not c["numeric"]:
            continue
        d = same["delta"][c["id"]]
        assert d["value"] == pytest.approx(0.0, abs=1e-9)
        assert d["sig"] is False and d["ci"][0] <= 0 <= d["ci"][1], c["id"]
        assert "not significant at 95%" in d["title"] and "paired bootstrap over" in d["title"]


def test_shifted_run_is_significant_and_paired(paired_board):
    anchor = _row(paired_board, "anchor")
    scores = paired_scores()
    for L in LENGTHS:
        d = anchor["delta"][f"ruler/len:{L}"]
        # the shift by brute force: mean over checkpoints and tasks of anchor - full
        diffs = [
            statistics.fmean(scores["anchor"][(t, L, k)]) - statistics.fmean(scores["full"][(t, L, k)])
            for t in ("niah_single_1", "vt")
            for k in (0, 1)
        ]
        assert d["value"] == pytest.approx(100 * statistics.fmean(diffs))
        assert d["sig"] is True and d["ci"][0] > 0 and d["ci"][0] < d["value"] < d["ci"][1]
        assert f"paired bootstrap over {2 * N} shared samples" in d["title"] and "significant at 95%" in d["title"]
    avg = anchor["delta"]["ruler/avg"]
    assert avg["sig"] is True and avg["ci"][0] > 0


def test_pairing_is_what_makes_it_sure(paired_dir, tmp_path):
    """The same two runs with the anchor's samples drawn from another dataset: no pairing, a wider interval."""
    import json

    from leaderboards.build import build, load_runs

    data = json.loads(paired_dir["anchor"].read_text())
    for by_len in data["suites"]["ruler"]["samples"].values():
        for block in by_len.values():
            block["dataset_hash"] = "another"
    (tmp_path / "anchor").mkdir()
    (tmp_path / "anchor" / "results.json").write_text(json.dumps(data))
    paired = build(load_runs([paired_dir["full"], paired_dir["anchor"]]), baseline="full")
    unpaired = build(load_runs([paired_dir["full"], tmp_path / "anchor"]), baseline="full")
    p = _row(paired, "anchor")["delta"]["ruler/len:1024"]
    u = _row(unpaired, "anchor")["delta"]["ruler/len:1024"]
    assert u["value"] == pytest.approx(p["value"]) and "unpaired bootstrap" in u["title"]
    assert (u["ci"][1] - u["ci"][0]) > 1.3 * (p["ci"][1] - p["ci"][0])


def test_schema_1_results_have_no_intervals(board):
    """Hand-built schema-1 fixtures: no samples, so no interval and no mark (and nothing breaks)."""
    assert not board["any_intervals"] and not board["any_delta_intervals"] and board["heatmaps"] == []
    for r in board["rows"]:
        assert all(c.get("sig") is None for c in (r.get("delta") or {}).values())


def test_heatmaps_match_a_brute_force_count(paired_board):
    maps = {(h["kind"], h["run"]): h for h in paired_board["heatmaps"]}
    assert set(maps) == {("scores", n) for n in ("full", "anchor", "same")} | {("delta", "anchor"), ("delta", "same")}
    scores, d = paired_scores(), depths()
    hm = maps[("scores", "anchor")]
    for L in LENGTHS:
        for b, cell in enumerate(hm["cells"][str(L)]):
            per_ckpt = []
            for k in (0, 1):
                hits = [
                    v
                    for i, v in enumerate(scores["anchor"][("niah_single_1", L, k)])
                    if min(int(d[(L, i)] // 10), 9) == b
                ]
                if hits:
                    per_ckpt.append(100 * statistics.fmean(hits))
            if not per_ckpt:
                assert cell is None
                continue
            assert cell["mean"] == pytest.approx(statistics.fmean(per_ckpt))
    delta = maps[("delta", "anchor")]
    full = maps[("scores", "full")]
    for L in LENGTHS:
        for x, a, b in zip(delta["cells"][str(L)], hm["cells"][str(L)], full["cells"][str(L)]):
            assert x["mean"] == pytest.approx(a["mean"] - b["mean"])
    assert all(x["mean"] == 0 for L in LENGTHS for x in maps[("delta", "same")]["cells"][str(L)] if x)


def test_heatmap_svg_is_well_formed_and_maps_back(paired_board):
    for hm in paired_board["heatmaps"]:
        svg = str(depth_heatmap(hm))
        root = ET.fromstring(svg)
        cells = root.findall(".//s:g[@class='cell']", NS)
        expect = [(L, b) for L in hm["lengths"] for b, c in enumerate(hm["cells"][str(L)]) if c is not None]
        assert len(cells) == len(expect)
        for g in cells:
            L, lo = int(g.get("data-length")), int(g.get("data-bin"))
            value = hm["cells"][str(L)][lo // 10]["mean"]
            assert float(g.get("data-value")) == pytest.approx(value, abs=1e-4)
            tip = g.find("s:rect/s:title", NS).text
            assert f"depth {lo}–{lo + 10}%" in tip and "needle" in tip
        if hm["kind"] == "delta":
            assert "−" in root.get("aria-label") and hm["baseline"] == "full"


def test_heatmap_escapes_names():
    hm = {
        "kind": "scores",
        "run": "<script>x</script>",
        "tasks": ["a&b"],
        "bins": [[0, 10]],
        "lengths": [1024],
        "cells": {"1024": [{"mean": 50.0, "n": 3}]},
    }
    svg = str(depth_heatmap(hm))
    ET.fromstring(svg)
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_heat_colours_run_light_to_dark_and_diverge_around_white():
    light, dark = heat_color(0), heat_color(100)
    assert sum(light) > sum(dark) and heat_color(0, diverging=True, scale=10) == (255, 255, 255)
    up, down = heat_color(10, True, 10), heat_color(-10, True, 10)
    assert up[2] > up[0] and down[0] > down[2]  # blue above, orange below
