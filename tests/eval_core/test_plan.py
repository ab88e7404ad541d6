"""`harness plan` against the closed-form sample-size formula on constructed runs."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from harness.cli import main
from harness.commands.plan import plan
from harness.core.results_file import write_results
from harness.pipeline.aggregate import aggregate

Z_SUM = 1.959963984540054 + 0.8416212335729143  # alpha 0.05 two-sided, power 0.8


def _rec(task, L, fp, step, i, score, secs):
    return {
        "type": "sample",
        "run": "r",
        "checkpoint": {"path": f"ck-{step}", "step": step, "fingerprint": fp},
        "suite": "toy",
        "task": task,
        "task_version": "1",
        "length": L,
        "index": i,
        "seed": 42,
        "dataset_hash": "h",
        "prediction": "",
        "score": score,
        "metric": "string_match_all",
        "num_tokens": 1,
        "settings": {},
        "metadata": {},
        "eval_seconds": secs,
    }


def _run(name, scores: dict, secs=0.5):
    """scores[(task, L)] = (K, n) matrix."""
    K = next(iter(scores.values())).shape[0]
    ckpts = [{"path": f"ck-{s}", "step": s, "fingerprint": f"{name}{s}", "training": None} for s in range(K)]
    recs = [
        _rec(t, L, ckpts[k]["fingerprint"], k, i, float(m[k, i]), secs)
        for (t, L), m in scores.items()
        for k in range(K)
        for i in range(m.shape[1])
    ]
    suites = {"toy": {"tasks": sorted({t for t, _ in scores}), "excluded": [], "unavailable": {}, "lengths": [1024]}}
    return aggregate(recs, suites, {"name": name, "checkpoints": ckpts}, {})


def _scores(seed, n=80, p=0.3, K=2):
    rng = np.random.default_rng(seed)
    return (rng.random((K, n)) < p).astype(float)


def test_unpaired_rows_match_the_closed_form():
    a, b = _scores(1), _scores(2, p=0.6)
    base = _run("full", {("A", 1024): a, ("B", 1024): b})
    rows = {r["task"]: r for r in plan(base, None, 5.0, 0.05, 0.8, None)}
    for task, m in (("A", a), ("B", b)):
        per_sample = (100 * m.mean(axis=0)).tolist()  # each sample averaged over the checkpoints
        var = statistics.variance(per_sample)
        assert rows[task]["variance"] == pytest.approx(var)
        assert rows[task]["needed"] == math.ceil(2 * Z_SUM**2 * var / 25 - 1e-6)
        assert rows[task]["seconds_per_run"] == pytest.approx(rows[task]["needed"] * 0.5 * 2)
    avg = next(r for r in rows.values() if r.get("average"))
    var = (statistics.variance((100 * a.mean(0)).tolist()) + statistics.variance((100 * b.mean(0)).tolist())) / 4
    assert avg["needed"] == math.ceil(2 * Z_SUM**2 * var / 25 - 1e-6) and avg["seconds_per_sample"] == 1.0


def test_paired_uses_the_variance_of_differences():
    a = _scores(3, n=100)
    better = a.copy()
    better[:, :20] = 1.0  # the first 20 samples right in every checkpoint
    base, other = _run("full", {("A", 1024): a}), _run("anchor", {("A", 1024): better})
    row = plan(base, other, 5.0, 0.05, 0.8, 3)[0]
    d = (100 * better.mean(0) - 100 * a.mean(0)).tolist()
    assert row["variance"] == pytest.approx(statistics.variance(d)) and row["observed"] == pytest.approx(
        statistics.fmean(d)
    )
    assert row["needed"] == math.ceil(Z_SUM**2 * statistics.variance(d) / 25 - 1e-6)
    assert row["seconds_per_run"] == pytest.approx(row["needed"] * 0.5 * 3)
    # pairing needs fewer samples than treating the runs as independent
    assert row["needed"] < plan(base, None, 5.0, 0.05, 0.8, 3)[0]["needed"]


def test_no_spread_falls_back_to_the_binomial_variance():
    base = _run("full", {("A", 1024): np.ones((1, 40))})
    row = plan(base, None, 10.0, 0.05, 0.8, None)[0]
    p = (40 + 0.5) / 41
    assert row["variance"] == pytest.approx(1e4 * p * (1 - p)) and "binomial" in row["note"]


def test_cli_prints_the_plan_and_rejects_bad_input(tmp_path, capsys):
    path = tmp_path / "full" / "results.json"
    write_results(path, _run("full", {("A", 1024): _scores(4)}))
    assert main(["plan", "--baseline", str(path.parent), "--delta", "5"]) == 0
    out = capsys.readouterr().out
    assert "detect a difference of 5 points at alpha 0.05" in out and "every task and length at --samples" in out
    for bad, msg in (
        (["--delta", "0"], "--delta 0.0 is outside 0.01..100.0 points"),
        (["--delta", "1e-300"], "--delta 1e-300 is outside"),  # delta**2 underflows: was a ZeroDivisionError
        (["--delta", "5", "--power", "1.5"], "--power 1.5 is outside"),
        (["--delta", "5", "--alpha", "0"], "--alpha 0.0 is outside"),
    ):
        assert main(["plan", "--baseline", str(path), *bad]) == 2
        assert msg in capsys.readouterr().err
    old = tmp_path / "old" / "results.json"
    legacy = _run("x", {("A", 1024): _scores(4)})  # a version-1 file: valid, but no per-sample blocks
    legacy["schema_version"] = 1
    for suite in legacy["suites"].values():
        suite.pop("samples", None)
    write_results(old, legacy)
    assert main(["plan", "--baseline", str(old), "--delta", "5"]) == 2
    assert "no per-sample scores" in capsys.readouterr().err
