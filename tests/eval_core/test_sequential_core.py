"""harness/core/sequential.py against independent references: coverage of known means (simulated),
the pool's exact mean once every value is seen, the capital processes against a product computed in
plain Python from the formulas of Waudby-Smith & Ramdas, the draw order, the verdicts."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.core.sequential import (
    GRID_POINTS,
    TRUNCATION,
    BettingSequence,
    cell_alpha,
    draw_order,
    to_points,
    verdict,
)

# -- coverage ---------------------------------------------------------------------------------------


def test_an_unbounded_stream_covers_its_mean_at_every_look():
    """i.i.d. Bernoulli(0.3): the share of 1,000 sequences whose bounds ever leave 0.3 (checked after
    every one of 30 rounds of 10) stays at or below alpha; a mean 0.1 away is left by most."""
    rng = np.random.default_rng(7)
    alpha, batch = 0.1, 1000
    seq = BettingSequence(alpha, batch=batch, grid_points=201)
    missed = np.zeros(batch, dtype=bool)
    for _ in range(30):
        seq.update((rng.random((batch, 10)) < 0.3).astype(float))
        low, high = seq.bounds()
        missed |= (low > 0.3) | (high < 0.3)
    assert missed.mean() <= alpha
    low, high = seq.bounds()
    assert np.median(high) < 0.45 and np.mean(high < 0.5) > 0.95  # it does narrow, from 1 to about 0.4


def test_a_pool_drawn_without_replacement_covers_its_mean_at_every_look():
    rng = np.random.default_rng(11)
    pool_values = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=120, p=[0.4, 0.1, 0.1, 0.1, 0.3])
    mean = pool_values.mean()
    alpha, batch = 0.1, 1000
    order = np.argsort(rng.random((batch, len(pool_values))), axis=1)
    drawn = pool_values[order]
    seq = BettingSequence(alpha, pool=len(pool_values), batch=batch, grid_points=201)
    missed = np.zeros(batch, dtype=bool)
    for start in range(0, len(pool_values), 10):
        seq.update(drawn[:, start : start + 10])
        low, high = seq.bounds()
        missed |= (low > mean + 1e-12) | (high < mean - 1e-12)
    assert missed.mean() <= alpha
    # and the pool pins it down: every sequence that never missed ends on the pool's mean
    low, high = seq.bounds()
    kept = ~missed
    assert np.allclose(low[kept], mean, atol=1e-8) and np.allclose(high[kept], mean, atol=1e-8)


def test_the_bounds_close_on_the_pools_exact_mean_when_every_value_is_seen():
    values = np.random.default_rng(3).random(37)
    seq = BettingSequence(0.05, pool=37)
    seq.update(values[:20])
    low, high = seq.bounds()
    assert low <= values.mean() <= high and high - low > 0.05
    seq.update(values[20:])
    low, high = seq.bounds()
    assert low <= values.mean() <= high
    assert high - low < 1e-8 and low == pytest.approx(values.mean(), abs=1e-8)
    with pytest.raises(ValueError, match="more values than the pool"):
        seq.update(np.array([0.5]))


def test_a_pool_whose_difference_is_exactly_zero_is_not_decided_by_rounding():
    """Symmetric pools (each pair with its swap) have a mean difference of exactly 0; summed in float
    the unit mean can land a last bit off 1/2, which used to read as 'better' or 'worse'."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        a = rng.choice([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], 100)
        b = rng.choice([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], 100)
        d = np.r_[b - a, a - b][rng.permutation(200)]
        seq = BettingSequence(0.05, pool=200, grid_points=401)
        seq.update((d + 1.0) / 2.0)
        low, high = to_points(*seq.bounds())
        assert verdict(float(low), float(high), None) is None
        assert verdict(float(low), float(high), 5.0) == "equivalent"


# -- the capital processes against plain Python ---------------------------------------------------


def _capital_by_hand(xs: list[float], m: float, alpha: float, pool: int | None) -> tuple[float, float]:
    """K+ and K- at candidate mean m after xs, written from the formulas: predictable plug-in bets
    sqrt(2 log(2/alpha) / (sigma2 * t * log(1 + t))) with sigma2 = (1/4 + sum (x_i - mu_{i-1})^2) / t,
    mu_i = (1/2 + x_1 + ... + x_i) / (i + 1); the mean of the rest of the pool
    m_t = (N m - sum of the first t-1) / (N - t + 1); bets truncated at c / m_t and c / (1 - m_t)."""
    k_up = k_down = 1.0
    total, squares, mu = 0.0, 0.25, 0.5
    for t, x in enumerate(xs, start=1):
        sigma2 = squares / t
        bet = math.sqrt(2.0 * math.log(2.0 / alpha) / (sigma2 * t * math.log(1.0 + t)))
        m_t = m if pool is None else (pool * m - total) / (pool - t + 1)
        m_t = min(max(m_t, 1e-12), 1.0 - 1e-12)
        k_up *= 1.0 + min(bet, TRUNCATION / m_t) * (x - m_t)
        k_down *= 1.0 - min(bet, TRUNCATION / (1.0 - m_t)) * (x - m_t)
        total += x
        squares += (x - mu) ** 2
        mu = (0.5 + total) / (t + 1)
    return k_up, k_down


@pytest.mark.parametrize("pool", [None, 40])
def test_the_capital_equals_a_product_computed_by_hand(pool):
    rnd = random.Random(5)
    xs = [rnd.choice([0.0, 0.5, 1.0, rnd.random()]) for _ in range(25)]
    alpha, points = 0.05, 21
    seq = BettingSequence(alpha, pool=pool, grid_points=points)
    seq.update(np.array(xs[:10]))
    seq.update(np.array(xs[10:]))  # in two updates: the capital does not depend on how values are batched
    for index in (2, 7, 10, 13, 18):
        m = index / (points - 1)
        k_up, k_down = _capital_by_hand(xs, m, alpha, pool)
        assert math.exp(seq._log_up[index]) == pytest.approx(k_up, rel=1e-9)
        assert math.exp(seq._log_down[index]) == pytest.approx(k_down, rel=1e-9)


def test_the_capital_is_monotone_in_the_candidate_mean_so_the_grid_reading_is_conservative():
    rng = np.random.default_rng(2)
    seq = BettingSequence(0.05, pool=300, batch=20, grid_points=201)
    seq.update(rng.random((20, 150)))
    assert (np.diff(seq._log_up, axis=1) <= 1e-12).all()  # K+ cannot increase in m
    assert (np.diff(seq._log_down, axis=1) >= -1e-12).all()  # K- cannot decrease


def test_a_batch_row_is_the_single_sequence_fed_the_same_values():
    rng = np.random.default_rng(4)
    values = rng.random((3, 60))
    batch = BettingSequence(0.05, pool=80, batch=3, grid_points=101)
    batch.update(values)
    for row in range(3):
        one = BettingSequence(0.05, pool=80, grid_points=101)
        one.update(values[row])
        low, high = batch.bounds()
        assert one.bounds() == (low[row], high[row])
        assert float(one.mean()) == pytest.approx(values[row].mean())


def test_the_bounds_never_widen():
    rng = np.random.default_rng(8)
    seq = BettingSequence(0.05, pool=200, grid_points=401)
    last = (0.0, 1.0)
    for _ in range(20):
        seq.update(rng.random(10) ** 2)
        now = seq.bounds()
        assert now[0] >= last[0] and now[1] <= last[1]
        last = now


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_bad_values_and_settings_are_refused():
    for alpha in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="alpha"):
            BettingSequence(alpha)
    with pytest.raises(ValueError, match="pool"):
        BettingSequence(0.05, pool=0)
    seq = BettingSequence(0.05, grid_points=11)
    for bad in ([1.5], [-0.1], [float("nan")]):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            seq.update(np.array(bad))
    assert seq.t == 0 and seq.bounds() == (0.0, 1.0) and float(seq.mean()) == 0.5


# -- points, verdicts, levels ------------------------------------------------------------------------


def test_to_points_maps_units_back_to_score_points():
    low, high = to_points(0.5, 1.0)
    assert (float(low), float(high)) == (0.0, 100.0)
    assert float(to_points(0.0, 0.25)[0]) == -100.0 and float(to_points(0.0, 0.25)[1]) == -50.0


@pytest.mark.parametrize(
    ("low", "high", "margin", "expected"),
    [
        (0.1, 3.0, 5.0, "better"),  # excludes 0 above, even inside the margin: a decided difference wins
        (-3.0, -0.1, 5.0, "worse"),
        (-4.9, 4.9, 5.0, "equivalent"),
        (-5.0, 4.0, 5.0, None),  # the margin is open: a bound on it is not inside
        (-4.0, 5.0, 5.0, None),
        (0.0, 6.0, 5.0, None),  # touching 0 does not exclude it
        (-6.0, 0.0, 5.0, None),
        (-1.0, 1.0, None, None),  # no margin: never equivalent
        (-1.0, 1.0, 0.0, None),
    ],
)
def test_verdict_cases(low, high, margin, expected):
    assert verdict(low, high, margin) == expected


def test_cell_alpha_is_bonferroni():
    assert cell_alpha(0.05, 14) == pytest.approx(0.05 / 14)
    assert cell_alpha(0.05, 1) == cell_alpha(0.05, 0) == 0.05


# -- the draw order ----------------------------------------------------------------------------------


def test_draw_order_is_a_permutation_and_a_subsets_order_is_the_wholes_restricted():
    whole = draw_order(range(500), 4096, 42)
    assert sorted(whole) == list(range(500)) and whole != list(range(500))
    subset = set(random.Random(0).sample(range(500), 137))
    assert draw_order(subset, 4096, 42) == [i for i in whole if i in subset]
    assert draw_order(range(500), 4096, 42) == whole  # deterministic
    assert draw_order(range(500), 8192, 42) != whole and draw_order(range(500), 4096, 43) != whole


def test_draw_order_puts_each_index_anywhere_alike():
    """Over 400 seeds the position of index 0 in a pool of 20 is uniform (a chi-square test at 0.1%)."""
    counts = np.bincount([draw_order(range(20), 1024, seed).index(0) for seed in range(400)], minlength=20)
    chi2 = float(((counts - 20.0) ** 2 / 20.0).sum())
    assert chi2 < 43.8  # the 99.9% point of chi-square with 19 degrees of freedom


def test_the_default_grid_steps_a_tenth_of_a_point():
    g = BettingSequence(0.05).grid
    assert len(g) == GRID_POINTS and float(to_points(g[1], g[1])[0] - to_points(g[0], g[0])[0]) == pytest.approx(0.1)
