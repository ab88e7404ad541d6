"""benchmarks/sweep_projection.py against numbers worked out by hand:
hours = (sum of seconds per sample over the tasks) x samples / GPUs / 3600.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from sweep_projection import GPUS, REFERENCE_HOURS, SAMPLES, TARGET_HOURS, project


def test_the_defaults_are_the_issues():
    assert (SAMPLES, GPUS, REFERENCE_HOURS, TARGET_HOURS) == (500, 8, 26.0, 3.0)


def test_thirteen_tasks_of_twenty_seconds():
    # 13 x 20 s = 260 s a round; 260 x 500 = 130,000 GPU-seconds = 36.111 GPU-hours; / 8 = 4.5139 h
    p = project({f"t{i}": 20.0 for i in range(13)})
    assert p.seconds_per_round == 260.0
    assert p.gpu_hours == pytest.approx(130_000 / 3600)
    assert p.hours == pytest.approx(4.513_888_9, abs=1e-7)
    assert p.speedup == pytest.approx(26 / 4.513_888_9, rel=1e-7)  # 5.76 times fewer hours than 26
    assert not p.meets_target
    assert p.arithmetic() == "260.0 s (13 tasks) x 500 / 8 GPUs / 3600 = 4.51 h"


def test_per_task_shares_add_up():
    # niah_single_1: 24 x 500 / 8 / 3600 = 0.416667 h; vt: 19.5 x 500 / 8 / 3600 = 0.338542 h; sum 0.755208 h
    p = project({"niah_single_1": 24.0, "vt": 19.5})
    assert p.task_hours("niah_single_1") == pytest.approx(0.416_666_7, abs=1e-7)
    assert p.task_hours("vt") == pytest.approx(0.338_541_7, abs=1e-7)
    assert p.hours == pytest.approx(0.755_208_3, abs=1e-7)
    assert p.task_hours("niah_single_1") + p.task_hours("vt") == pytest.approx(p.hours)
    assert p.speedup == pytest.approx(34.427_586, rel=1e-6)  # 26 / 0.755208
    assert p.meets_target


def test_the_target_boundary():
    # 3 h x 3600 x 8 GPUs / 500 samples = 172.8 s a round, exactly on the target
    assert project({"a": 100.0, "b": 72.8}).meets_target
    assert project({"a": 100.0, "b": 72.9}).hours == pytest.approx(3.001_736_1, abs=1e-7)
    assert not project({"a": 100.0, "b": 72.9}).meets_target


def test_other_counts_of_samples_and_gpus():
    # 10 s x 100 samples on 1 GPU = 1000 s = 0.27778 h; on 4 GPUs a quarter of it
    assert project({"a": 10.0}, samples=100, gpus=1).hours == pytest.approx(1000 / 3600)
    assert project({"a": 10.0}, samples=100, gpus=4).hours == pytest.approx(250 / 3600)
    p = project({"a": 10.0, "b": 5.0}, estimated=("b",))
    assert p.estimated == ("b",) and p.hours == pytest.approx(15 * 500 / 8 / 3600)


@pytest.mark.parametrize("bad", [{"samples": 0}, {"gpus": 0}])
def test_counts_must_be_positive(bad):
    with pytest.raises(ValueError, match="must be positive"):
        project({"a": 1.0}, **bad)


@pytest.mark.parametrize("seconds", [-1.0, float("nan")])
def test_seconds_must_be_a_time(seconds):
    with pytest.raises(ValueError, match=">= 0"):
        project({"a": seconds})
