"""Verdicts along a run on made-up records: a checkpoint's point is its own aggregate, the paired
difference is B - A on shared samples with a bootstrap interval, "no gain since step S" fires only
when none of the last K checkpoints is significantly above the one before them."""

from __future__ import annotations

import pytest

from harness.pipeline.run_verdicts import Curve, gains, history, log_row, no_gain_line, paired_difference, point_lines

SUITES = {
    "custom": {
        "tasks": ["niah_single_1", "vt"],
        "excluded": [],
        "unavailable": {},
        "lengths": [1024, 2048],
        "length_controlled": True,
    }
}


def _records(step: int, scores: dict[tuple[str, int], list[float]], fp: str | None = None) -> tuple[dict, list[dict]]:
    fp = fp or f"fp{step:04d}"
    ckpt = {"path": f"run/ckpt-{step}", "step": step, "fingerprint": fp, "training": None}
    recs = []
    for (task, L), values in scores.items():
        for i, s in enumerate(values):
            recs.append(
                {
                    "type": "sample",
                    "run": "run",
                    "checkpoint": {"path": ckpt["path"], "step": step, "fingerprint": fp},
                    "suite": "custom",
                    "task": task,
                    "task_version": "1",
                    "length": L,
                    "index": i,
                    "seed": 42,
                    "dataset_hash": "",
                    "prediction": "x" if s else "",
                    "score": s,
                    "metric": "m",
                    "num_tokens": L - 10,
                    "settings": {"backend": "hf"},
                    "metadata": {"max_new_tokens": 30},
                }
            )
    return ckpt, recs


def _curve(*levels, k=2, n=40) -> Curve:
    """One checkpoint per level: every sample of every task and length scores 1 below level*n, else 0."""
    curve = Curve(SUITES, 85.6, k)
    by_fp = {}
    for j, level in enumerate(levels):
        vals = [1.0 if i < level * n else 0.0 for i in range(n)]
        ckpt, recs = _records(10 * (j + 1), {(t, L): vals for t in ("niah_single_1", "vt") for L in (1024, 2048)})
        by_fp[ckpt["fingerprint"]] = (ckpt, recs)
    curve.update(by_fp, tokens_per_step=1000)
    return curve


def test_a_point_is_the_checkpoints_own_average():
    curve = _curve(0.5)
    p = curve.points[0]
    assert p.step == 10 and p.train_tokens == 10_000
    assert p.suites["custom"]["per_length"] == {1024: 50.0, 2048: 50.0}
    assert p.suites["custom"]["avg"] == 50.0
    assert p.suites["custom"]["effective_length"]["label"] == "below the first length"
    assert p.degenerate["empty"] == 0.5  # the made-up empty predictions of the zero scores


def test_paired_difference_on_shared_samples():
    curve = _curve(0.25, 0.75)
    a, b = curve.points
    d = paired_difference(a, b, SUITES)["custom"]
    assert d[1024]["diff"] == pytest.approx(50.0) and d[1024]["n"] == 80
    assert d[1024]["ci_low"] > 0 and d[1024]["significant"]
    assert gains({"custom": d}) == [("custom", 1024), ("custom", 2048)]
    back = paired_difference(b, a, SUITES)["custom"][2048]
    assert back["diff"] == pytest.approx(-50.0) and back["ci_high"] < 0


def test_only_samples_both_scored_are_paired():
    ckpt_a, recs_a = _records(10, {("vt", 1024): [1.0, 0.0, 1.0, 0.0]})
    ckpt_b, recs_b = _records(20, {("vt", 1024): [1.0, 1.0]})  # indices 0, 1 only
    recs_b.append({**recs_b[0], "index": 7})  # a sample A never saw
    curve = Curve(SUITES, 85.6, 2)
    curve.update({ckpt_a["fingerprint"]: (ckpt_a, recs_a), ckpt_b["fingerprint"]: (ckpt_b, recs_b)}, None)
    d = paired_difference(*curve.points, SUITES)["custom"][1024]
    assert d["n"] == 2 and d["diff"] == pytest.approx(50.0)  # (1+1)/2 - (1+0)/2
    other = {**recs_a[0], "task_version": "2"}  # another version of the task: no pairing at all
    curve.update({ckpt_a["fingerprint"]: (ckpt_a, [other]), ckpt_b["fingerprint"]: (ckpt_b, recs_b)}, None)
    assert paired_difference(*curve.points, SUITES) == {}


def test_no_gain_since():
    rising = _curve(0.1, 0.3, 0.5, 0.7, k=2)
    assert rising.no_gain_since() is None and no_gain_line(rising) is None
    flat = _curve(0.1, 0.6, 0.6, 0.6, k=2)
    assert flat.no_gain_since() == 20
    assert no_gain_line(flat).startswith("no gain since step 20: checkpoints 30, 40 are not significantly above it")
    assert _curve(0.5, 0.5, k=2).no_gain_since() is None  # K + 1 checkpoints needed
    assert _curve(0.5, 0.5, 0.5, k=0).no_gain_since() is None  # K 0: never said


def test_lines_history_and_log_row():
    curve = _curve(0.25, 0.5, 0.75, k=2)
    last = curve.points[-1]
    lines = point_lines(curve, last)
    assert lines[0].startswith("run/ckpt-30 (step 30 · 30K tokens): custom: 1K 75.0  2K 75.0  avg 75.0")
    assert lines[1].startswith("  vs step 20 (previous): 1K +25.0 [") and lines[2].startswith("  vs step 10 (first):")
    body = history(curve, "run", {"run/ckpt-30"})
    assert [c["present"] for c in body["checkpoints"]] == [False, False, True]
    assert body["checkpoints"][2]["vs_first"]["suites"]["custom"]["1024"]["diff"] == pytest.approx(50.0)
    row = log_row(last)
    assert row["step"] == 30 and row["eval/custom/1024"] == 75.0 and row["eval/custom/effective_length"] == 0
    assert row["eval/degenerate/empty"] == 0.25 and row["eval/train_tokens"] == 30_000
