"""Intervals, paired differences and sample sizes against independent computations.

The bootstrap intervals are checked against normal-approximation intervals on constructed cases
where both must agree up to Monte-Carlo error (2000 resamples, fixed seeds), the paired test on
runs whose difference is known, the sample-size planner against the closed-form formula.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.core import stats
from harness.core.paired import cell_replicates, difference_interval, paired_replicates, shared_indices
from harness.pipeline.aggregate import aggregate

Z = 1.959963984540054  # standard normal 97.5% quantile


def rec(task, length, fp, step, index, score, **extra):
    r = {
        "type": "sample",
        "run": "r",
        "checkpoint": {"path": f"ck-{step}", "step": step, "fingerprint": fp},
        "suite": "toy",
        "task": task,
        "task_version": "1",
        "length": length,
        "index": index,
        "seed": 42,
        "dataset_hash": "h",
        "prediction": "",
        "score": score,
        "metric": "string_match_all",
        "num_tokens": 1,
        "settings": {},
        "metadata": {},
    }
    r.update(extra)
    return r


def run_of(scores: dict, name: str = "r") -> dict:
    """scores[(task, length)] = (K, n) array -> results.json of one run with K checkpoints."""
    K = next(iter(scores.values())).shape[0]
    ckpts = [{"path": f"ck-{s}", "step": s, "fingerprint": f"{name}-fp{s}", "training": None} for s in range(K)]
    records = [
        rec(t, L, ckpts[k]["fingerprint"], k, i, float(v))
        for (t, L), m in scores.items()
        for k in range(K)
        for i, v in enumerate(m[k])
    ]
    tasks = sorted({t for t, _ in scores})
    lengths = sorted({L for _, L in scores})
    suites = {"toy": {"tasks": tasks, "excluded": [], "unavailable": {}, "lengths": lengths}}
    return aggregate(records, suites, {"name": name, "model": None, "mode": None, "checkpoints": ckpts}, {})


def binary(n: int, ones: int, seed: int = 0) -> np.ndarray:
    v = np.array([1.0] * ones + [0.0] * (n - ones))
    np.random.default_rng(seed).shuffle(v)
    return v


def test_binomial_cell_matches_the_normal_interval():
    n, ones = 400, 120  # p = 0.3
    res = run_of({("A", 1024): binary(n, ones)[None, :]})
    cell = res["suites"]["toy"]["per_task"]["A"]["1024"]
    p = ones / n
    half = Z * math.sqrt(p * (1 - p) / n) * 100
    assert cell["mean"] == pytest.approx(30.0)
    # Monte-Carlo error of a 2.5% quantile from 2000 replicates: about 0.14 points here
    assert cell["ci_low"] == pytest.approx(30 - half, abs=0.5)
    assert cell["ci_high"] == pytest.approx(30 + half, abs=0.5)
    assert res["intervals"]["level"] == 0.95 and res["schema_version"] == 2


def test_two_levels_crossed_design_matches_the_variance_decomposition():
    """score[k, i] = s_i + c_k: the replicate mean is mean_w(s) + mean_pick(c), independent parts,
    so its variance is var(s)/n + var(c)/K (population variances: the bootstrap's plug-in)."""
    rng = np.random.default_rng(5)
    n, K = 300, 5
    s = rng.uniform(0.2, 0.7, size=n)
    c = np.array([-0.1, -0.04, 0.0, 0.05, 0.09])
    res = run_of({("A", 2048): s[None, :] + c[:, None]})
    cell = res["suites"]["toy"]["per_task"]["A"]["2048"]
    mean = (s.mean() + c.mean()) * 100
    sd = math.sqrt(s.var() / n + c.var() / K) * 100
    assert cell["mean"] == pytest.approx(mean)
    # the checkpoint part is a 5-point discrete distribution: allow for its lumpiness
    assert cell["ci_low"] == pytest.approx(mean - Z * sd, abs=0.15 * Z * sd)
    assert cell["ci_high"] == pytest.approx(mean + Z * sd, abs=0.15 * Z * sd)
    # ignoring the checkpoints would give a much narrower interval: the checkpoint level counts
    narrow = Z * math.sqrt(s.var() / n) * 100
    assert (cell["ci_high"] - cell["ci_low"]) / 2 > 1.5 * narrow


def test_suite_average_interval_combines_tasks():
    """Two tasks with independent samples: the average's variance is (var_A/n_A + var_B/n_B) / 4."""
    a, b = binary(300, 90, 1), binary(200, 150, 2)
    res = run_of({("A", 1024): a[None, :], ("B", 1024): b[None, :]})
    avg = res["suites"]["toy"]["per_length"]["1024"]
    sd = math.sqrt(a.var() / 300 + b.var() / 200) / 2 * 100
    mean = (a.mean() + b.mean()) / 2 * 100
    assert avg["mean"] == pytest.approx(mean)
    assert avg["ci_low"] == pytest.approx(mean - Z * sd, abs=0.5)
    assert avg["ci_high"] == pytest.approx(mean + Z * sd, abs=0.5)
    # the one-length Avg is the same statistic with the same draws
    summ = res["suites"]["toy"]["summary"]["avg"]
    assert summ["ci_low"] == pytest.approx(avg["ci_low"]) and summ["ci_high"] == pytest.approx(avg["ci_high"])


def test_intervals_are_deterministic_and_contain_the_mean():
    m = np.random.default_rng(3).integers(0, 2, size=(3, 50)).astype(float)
    r1, r2 = run_of({("A", 1024): m}), run_of({("A", 1024): m})
    c1, c2 = r1["suites"]["toy"]["per_task"]["A"]["1024"], r2["suites"]["toy"]["per_task"]["A"]["1024"]
    assert (c1["ci_low"], c1["ci_high"]) == (c2["ci_low"], c2["ci_high"])
    assert c1["ci_low"] <= c1["mean"] <= c1["ci_high"]
    block = r1["suites"]["toy"]["samples"]["A"]["1024"]
    assert block["index"] == list(range(50)) and block["scores"]["0"] == m[0].tolist()


def test_perplexity_cell_interval_brackets_the_corpus_perplexity():
    rng = random.Random(0)
    recs = []
    for i in range(60):
        tokens = rng.randint(50, 150)
        nll = tokens * rng.uniform(1.5, 2.5)
        recs.append(rec("ppl", 1024, "fp", 1, i, 0.5, metadata={"nll": nll, "tokens": tokens}))
    suites = {"ppl": {"tasks": ["ppl"], "excluded": [], "unavailable": {}, "lengths": [1024]}}
    res = aggregate(recs, suites, {"name": "p", "checkpoints": None}, {})
    cell = res["suites"]["ppl"]["per_task"]["ppl"]["1024"]
    expect = math.exp(sum(r["metadata"]["nll"] for r in recs) / sum(r["metadata"]["tokens"] for r in recs))
    assert cell["mean"] == pytest.approx(expect)
    assert cell["ci_low"] < expect < cell["ci_high"] and cell["ci_high"] - cell["ci_low"] < 0.3 * expect


def _blocks(m_a: np.ndarray, m_b: np.ndarray):
    ra, rb = run_of({("A", 1024): m_a}, "a"), run_of({("A", 1024): m_b}, "b")
    return ra["suites"]["toy"]["samples"]["A"]["1024"], rb["suites"]["toy"]["samples"]["A"]["1024"]


def test_paired_identical_runs_differ_by_zero_not_significant():
    m = np.random.default_rng(1).integers(0, 2, size=(1, 80)).astype(float)
    a, b = _blocks(m, m)
    idx = shared_indices(a, b)
    assert idx == list(range(80))
    ra, rb = paired_replicates("A", 1024, a, ["0"], b, ["0"], idx)
    iv, diff = difference_interval(ra, rb, ("A", 1024))
    assert np.all(diff == 0) and iv == (0.0, 0.0) and not stats.significant(*iv)


def test_paired_shifted_run_is_significant_and_pairing_narrows_the_interval():
    rng = np.random.default_rng(2)
    base = rng.integers(0, 2, size=(1, 100)).astype(float)
    better = base.copy()
    flip = np.flatnonzero(base[0] == 0)[:15]  # 15 of 100 samples go from wrong to right: +15 points
    better[0, flip] = 1.0
    a, b = _blocks(better, base)
    idx = shared_indices(a, b)
    ra, rb = paired_replicates("A", 1024, a, ["0"], b, ["0"], idx)
    iv, _ = difference_interval(ra, rb, ("A", 1024))
    assert stats.significant(*iv) and iv[0] > 0 and iv[0] < 15 < iv[1]
    # paired sd of the difference: sqrt(p(1-p)/n) with p = 0.15 of samples changed
    sd = math.sqrt(0.15 * 0.85 / 100) * 100
    assert iv[0] == pytest.approx(15 - Z * sd, abs=1.0) and iv[1] == pytest.approx(15 + Z * sd, abs=1.0)
    # unpaired (independent draws per run) the same data would not be this sure
    ua = cell_replicates("A", 1024, a, ["0"])
    ub = cell_replicates("A", 1025, b, ["0"])  # another key: an independent draw
    u_iv, _ = difference_interval(ua, ub, ("A", 1024))
    assert u_iv[1] - u_iv[0] > 1.5 * (iv[1] - iv[0])


def test_samples_of_different_generators_are_not_paired():
    m = np.ones((1, 10))
    a, b = _blocks(m, m)
    assert shared_indices(a, dict(b, dataset_hash="other")) == []
    assert shared_indices(a, dict(b, task_version="2")) == []
    b2 = dict(b, scores={"0": [None] * 3 + [1.0] * 7}, index=list(range(10)))
    assert shared_indices(a, b2) == list(range(3, 10))


@pytest.mark.parametrize("alpha, power, za, zb", [(0.05, 0.8, 1.959964, 0.841621), (0.01, 0.9, 2.575829, 1.281552)])
def test_samples_needed_closed_form(alpha, power, za, zb):
    var, delta = 2100.0, 5.0  # points^2 (a Bernoulli p = 0.3 score x100), 5 points
    paired = stats.samples_needed(var, delta, alpha, power, paired=True)
    unpaired = stats.samples_needed(var, delta, alpha, power, paired=False)
    assert paired == math.ceil((za + zb) ** 2 * var / delta**2 - 1e-6)
    assert unpaired == math.ceil(2 * (za + zb) ** 2 * var / delta**2 - 1e-6)


def test_over_checkpoints_one_checkpoint_is_the_identity():
    r = np.arange(6, dtype=float).reshape(6, 1)
    assert np.array_equal(stats.over_checkpoints(r, stats.rng_for("x")), np.arange(6.0))
