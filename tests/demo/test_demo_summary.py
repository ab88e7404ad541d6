"""The demo's summary: intervals on every number, the difference's paired interval, and in words
which differences are significant (constructed runs with a known shift, tests/leaderboard/paired_fixtures.py)."""

from __future__ import annotations

import json

from harness.demo import _summary
from tests.leaderboard.paired_fixtures import write_paired


def test_summary_states_intervals_and_significance(tmp_path):
    paths = write_paired(tmp_path)
    loaded = {n: json.loads(paths[n].read_text()) for n in ("full", "anchor", "same")}
    out = _summary(loaded, [1024, 2048], "full")
    lines = out.splitlines()
    full = next(line for line in lines if line.startswith("full "))
    stats = loaded["full"]["suites"]["ruler"]["per_length"]["1024"]
    assert f"{stats['mean']:.1f} [{stats['ci_low']:.1f}, {stats['ci_high']:.1f}]" in full
    anchor = next(line for line in lines if line.startswith("anchor - full"))
    assert anchor.count("*") == 3  # 1K, 2K and Avg: all significant
    same = next(line for line in lines if line.startswith("same - full"))
    assert "*" not in same and "+0.0 [" in same
    assert "anchor - full: anchor is significantly better than full at 1K (+" in out
    assert "same - full: the difference is not significant at 1K, 2K, Avg (the interval contains 0" in out


def test_summary_without_samples_says_so(tmp_path):
    paths = write_paired(tmp_path)
    loaded = {n: json.loads(paths[n].read_text()) for n in ("full", "anchor")}
    for res in loaded.values():
        res["suites"]["ruler"].pop("samples")
    out = _summary(loaded, [1024, 2048], "full")
    assert "no interval at 1K, 2K, Avg (results without per-sample scores)" in out
