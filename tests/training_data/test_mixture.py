"""Mixture math: budgets, per-source up-sampling of long documents, the Appendix C ratios."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from harness.core.errors import UserError
from training.mixture import MixtureConfig, budgets, build_mixture, parse_shares, select


@dataclass
class Doc:
    ids: list[int]
    source: str
    tag_ids: None = None


def _pool(seed=0):
    rng = random.Random(seed)
    docs = []
    for source, n, mu in (("A", 300, 5.0), ("B", 100, 6.0), ("C", 30, 7.5)):
        docs += [Doc([0] * max(1, int(rng.lognormvariate(mu, 1.0))), source) for _ in range(n)]
    return docs


def test_parse_shares():
    assert parse_shares("A=0.25, B=0.75") == {"A": 0.25, "B": 0.75}
    for bad in ("A=0.5", "A=x,B=1", "A0.5", "=1"):
        with pytest.raises(UserError):
            parse_shares(bad)


def test_budgets_keep_original_shares_by_default():
    lengths = {"A": [10, 30], "B": [60]}
    assert budgets(lengths, MixtureConfig(total_tokens=1000)) == {"A": 400, "B": 600}
    assert budgets(lengths, MixtureConfig(1000, {"A": 0.1, "B": 0.9})) == {"A": 100, "B": 900}
    with pytest.raises(UserError, match="no documents"):
        budgets(lengths, MixtureConfig(1000, {"A": 0.5, "Z": 0.5}))


def test_select_budget_overshoot_and_repeats():
    lengths = [5, 50, 7, 500, 9]
    idx = select(lengths, sum(lengths), 100, 1.0, random.Random(0))
    assert sorted(idx) == [0, 1, 2, 3, 4]  # budget = pool: every document exactly once
    idx = select(lengths, 100, 100, 3.0, random.Random(1))
    got = sum(lengths[i] for i in idx)
    assert got >= 100 and got - lengths[idx[-1]] < 100  # stops at the first document reaching the budget
    idx = select(lengths, 3 * sum(lengths), 100, 1.0, random.Random(2))
    assert len(idx) > 5 and set(idx) == {0, 1, 2, 3, 4}  # up-sampling: passes repeat the pool
    assert sorted(idx[:5]) == [0, 1, 2, 3, 4]  # ... each pass without replacement


def test_first_draw_probability_follows_weights():
    # 1 long document among 4 short; weight w: P(long first) = w / (w + 4)
    lengths = [10, 10, 10, 10, 1000]
    for w in (1.0, 4.0):
        rng = random.Random(0)
        trials = 4000
        hits = sum(select(lengths, 1, 100, w, rng)[0] == 4 for _ in range(trials))
        expected = w / (w + 4)
        assert abs(hits / trials - expected) < 4 * (expected * (1 - expected) / trials) ** 0.5 + 1e-9


def test_build_mixture_ratios_and_upsampling():
    pool = _pool()
    total = sum(len(d.ids) for d in pool) // 3
    mixes = {}
    for w in (1.0, 8.0):
        docs, report = build_mixture(pool, MixtureConfig(total, long_threshold=1000, long_weight=w, seed=0))
        mixes[w] = docs
        orig_share = {s: v.tokens / sum(x.tokens for x in report.original.values()) for s, v in report.original.items()}
        for s, v in report.mixture.items():
            assert v.tokens == sum(len(d.ids) for d in docs if d.source == s)
            biggest = max(len(d.ids) for d in pool if d.source == s)
            assert report.budgets[s] <= v.tokens < report.budgets[s] + biggest
            assert abs(report.budgets[s] - orig_share[s] * total) <= 1  # domain mixture kept
        table = report.table()
        assert "Mixture Ratio" in table and "Token Ratio" in table and "Up-sampled mixture" in table
        ratio_line = table.splitlines()[3]
        assert abs(sum(float(x.rstrip("%")) for x in ratio_line.split()[2:]) - 100) < 0.05
    long_share = {
        w: sum(len(d.ids) for d in docs if len(d.ids) >= 1000) / sum(len(d.ids) for d in docs)
        for w, docs in mixes.items()
    }
    assert long_share[8.0] > long_share[1.0] + 0.05
    assert build_mixture(pool, MixtureConfig(total, seed=5))[0] == build_mixture(pool, MixtureConfig(total, seed=5))[0]
