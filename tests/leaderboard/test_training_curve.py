"""Effective length against training tokens, with intervals (leaderboards/training_curve.py), on a
results.json aggregated the way `harness eval` aggregates a training run's checkpoints."""

from __future__ import annotations

import pytest

from harness.core.effective_length import effective_length_value
from leaderboards.training_curve import eff_by_tokens, eff_tokens_chart

from .training_curve_fixtures import STEPS, TOKENS_PER_STEP, training_results


@pytest.fixture(scope="module")
def results():
    return training_results()


def test_points_are_the_runs_rule_at_each_checkpoint(results):
    curve = eff_by_tokens(results, "ruler", 85.6)
    per_length = results["suites"]["ruler"]["per_length"]
    assert [p[4] for p in curve["points"]] == STEPS
    for x, value, low, high, step in curve["points"]:
        assert x == step * TOKENS_PER_STEP
        means = {int(L): s["per_step"][str(step)] for L, s in per_length.items()}
        assert value == effective_length_value(means, 85.6)
        rank = [None, 1024, 2048, 4096]
        assert rank.index(low) <= rank.index(value) <= rank.index(high)
    by_step = {p[4]: p for p in curve["points"]}
    assert by_step[100][1:4] == (1024, 1024, 1024)  # 2K at 44%: no replicate reaches 85.6
    assert by_step[400][1:4] == (2048, 2048, 4096)  # 4K at 77.5% over 80 samples: it may hold 4K
    assert by_step[500][1] == 4096


def test_no_curve_without_training_tokens_or_threshold(results):
    assert eff_by_tokens(training_results(tokens=False), "ruler", 85.6) is None
    assert eff_by_tokens(results, "ruler", None) is None


def test_chart_draws_a_bar_per_checkpoint(results):
    svg = str(eff_tokens_chart(eff_by_tokens(results, "ruler", 85.6), label="RULER"))
    assert svg.count('class="interval"') == 5 and svg.count("<circle") == 5
    assert "effective length vs training tokens" in svg and "410K tokens (step 100)" in svg
    assert "95% interval 2K – 4K" in svg
