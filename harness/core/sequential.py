"""Anytime-valid confidence sequences for the mean of bounded values, and the verdicts they decide.

    from harness.core.sequential import BettingSequence, verdict
    cs = BettingSequence(alpha=0.001, pool=500)        # a cell's 500 samples, drawn in random order
    cs.update(np.array([0.5, 1.0, 0.5]))               # values in [0, 1], in the order drawn
    low, high = cs.bounds()                            # covers the pool's mean at every step at once
    verdict(*to_points(low, high), margin=5.0)         # "better" / "worse" / "equivalent" / None

Why a confidence sequence: a comparison that looks at its interval after every round and stops once
it excludes 0 needs an interval that holds at every sample size at once. A fixed-n interval checked
that way is crossed by chance far more often than its level says (benchmarks/sequential_validity.py
measures it); a confidence sequence is not: P(the mean ever leaves it) <= alpha.

The sequence is the betting one of Waudby-Smith & Ramdas (2024, "Estimating means of bounded random
variables by betting", JRSS-B), in its without-replacement form (Waudby-Smith & Ramdas 2020,
"Confidence sequences for sampling without replacement"): for each candidate mean m on a grid, two
capital processes bet that the next value is above (K+) or below (K-) the mean the rest of the pool
must have if the pool's mean is m,

    m_t = (N m - sum of the t-1 values seen) / (N - t + 1)            (m itself when the pool is infinite)
    K+_t(m) = prod_i (1 + l+_i (x_i - m_i)),   K-_t(m) = prod_i (1 - l-_i (x_i - m_i)),

with predictable bets (the "predictable plug-in" size sqrt(2 log(2/alpha) / (var_{t-1} t log(1+t))),
truncated at c/m_t and c/(1-m_t) so no factor reaches 0). Under "the pool's mean is m" each process is
a nonnegative martingale starting at 1, so by Ville's inequality it ever reaches 2/alpha with
probability at most alpha/2: m is rejected once K+ or K- does (and stays rejected: the running
intersection). K+ cannot increase in m and K- cannot decrease (each factor is monotone in m), so the
lower bound is the largest grid point K+ rejects and the upper the smallest K- rejects: reading them
off the grid widens the sequence, never narrows it. The pool also bounds the mean outright: at least
(sum seen) / N, at most (sum seen + N - t) / N, so the sequence closes on the pool's mean when every
sample is seen.

Values here are in [0, 1]. A paired difference d in [-1, 1] (the score of run A minus run B, each
averaged over its checkpoints) enters as (d + 1) / 2; `to_points` maps the bounds back to score
points (x100).
"""

from __future__ import annotations

import math

import numpy as np

# Bet truncation c (Waudby-Smith & Ramdas use 1/2 or 3/4): a factor is never below 1 - c. A larger c
# decides a cell whose values never vary (both runs at 100) sooner; its cost on noisy cells is small.
TRUNCATION = 0.75
# Candidate means: 0.0005 apart in [0, 1], i.e. 0.1 points on a paired difference in [-100, 100].
GRID_POINTS = 2001
# The running sum carries rounding error (about t * 2^-53 of it), so the pool's own bounds are widened
# by far more than that: a pool whose paired difference is exactly 0 (its mean exactly 1/2) is then not
# read as "better" or "worse" by a last-bit error once every value is seen (it was, in two of three
# symmetric pools of graded scores; benchmarks/sequential_validity.py). 1e-9 is 2e-7 points.
ROUNDING_SLACK = 1e-9

RULE = {
    "name": "betting confidence sequence: i.i.d. for a generator's samples, without replacement over a dataset's items",
    "references": [
        "Waudby-Smith & Ramdas (2024), Estimating means of bounded random variables by betting, JRSS-B",
        "Waudby-Smith & Ramdas (2020), Confidence sequences for sampling without replacement, NeurIPS",
    ],
    "bets": f"predictable plug-in, truncated at {TRUNCATION}",
    "sides": "two one-sided capital processes, alpha/2 each (Ville's inequality)",
    "family": "Bonferroni: each cell at alpha / (number of cells)",
}


class BettingSequence:
    """The confidence sequence of one mean (or `batch` independent means at once, for simulation).

    `pool`: the number of values the mean is over, drawn without replacement in random order
    (None: an unbounded i.i.d. stream). Values are updated in the order they were drawn.
    """

    def __init__(
        self, alpha: float, pool: int | None = None, batch: int | None = None, grid_points: int = GRID_POINTS
    ) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        if pool is not None and pool < 1:
            raise ValueError(f"pool must be positive, got {pool}")
        self.alpha = alpha
        self.pool = pool
        self.grid = np.linspace(0.0, 1.0, grid_points)
        shape = (grid_points,) if batch is None else (batch, grid_points)
        lead = () if batch is None else (batch,)
        self._log_up = np.zeros(shape)  # log K+ on the grid
        self._log_down = np.zeros(shape)  # log K- on the grid
        self._threshold = math.log(2.0 / alpha)
        self.t = 0
        self._sum = np.zeros(lead)
        self._mean_hat = np.full(lead, 0.5)  # (1/2 + sum) / (t + 1): the regularised running mean
        self._sq = np.full(lead, 0.25)  # 1/4 + sum of (x_i - mean_hat_i)^2
        self._low = np.zeros(lead)
        self._high = np.ones(lead)

    def update(self, values: np.ndarray) -> None:
        """Feed the next values in draw order: shape (k,) for one sequence, (batch, k) for a batch."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim == self._sum.ndim:  # one value per sequence
            values = values[..., None]
        if values.size and (np.isnan(values).any() or values.min() < 0.0 or values.max() > 1.0):
            raise ValueError("values must lie in [0, 1]")
        for j in range(values.shape[-1]):
            self._step(values[..., j])
        self._read_bounds()

    def _step(self, x: np.ndarray) -> None:
        t = self.t + 1  # the index of this value
        if self.pool is not None and t > self.pool:
            raise ValueError(f"more values than the pool of {self.pool}")
        var = self._sq / t  # variance estimate from the t - 1 values before this one
        bet = np.sqrt(2.0 * self._threshold / (var * t * math.log(1.0 + t)))[..., None]
        if self.pool is None:
            m_t = np.broadcast_to(self.grid, self._log_up.shape)
        else:  # the mean the unseen rest of the pool must have if the pool's mean is m
            m_t = (self.pool * self.grid - self._sum[..., None]) / (self.pool - t + 1)
        # candidates the pool already rules out (m_t outside [0, 1]) are excluded by bounds(); clipping
        # keeps their factors finite and positive
        m_t = np.clip(m_t, 1e-12, 1.0 - 1e-12)
        xc = x[..., None] - m_t
        up = np.minimum(bet, TRUNCATION / m_t)
        down = np.minimum(bet, TRUNCATION / (1.0 - m_t))
        self._log_up += np.log1p(up * xc)
        self._log_down += np.log1p(-down * xc)
        self._sum = self._sum + x
        self._sq = self._sq + (x - self._mean_hat) ** 2
        self.t = t
        self._mean_hat = (0.5 + self._sum) / (t + 1)

    def _read_bounds(self) -> None:
        # K+ rejects the candidates below the mean (a down-set of the grid), K- those above (an up-set)
        rejected_low = self._log_up >= self._threshold
        rejected_high = self._log_down >= self._threshold
        g = self.grid
        # lower bound: the largest grid point K+ rejects (every m below it is rejected too)
        low = np.where(rejected_low.any(-1), g[np.maximum(_last_true(rejected_low), 0)], 0.0)
        high = np.where(rejected_high.any(-1), g[_first_true(rejected_high)], 1.0)
        if self.pool is not None:  # the pool itself: the unseen values lie in [0, 1]
            low = np.maximum(low, self._sum / self.pool - ROUNDING_SLACK)
            high = np.minimum(high, (self._sum + self.pool - self.t) / self.pool + ROUNDING_SLACK)
        self._low = np.maximum(self._low, low)  # running intersection
        self._high = np.minimum(self._high, high)

    def bounds(self) -> tuple:
        """(low, high) of the mean in [0, 1]: floats for one sequence, arrays for a batch."""
        if self._low.ndim == 0:
            return float(self._low), float(self._high)
        return self._low.copy(), self._high.copy()

    def mean(self):
        """The mean of the values seen (0.5 before any)."""
        return self._sum / self.t if self.t else self._sum + 0.5


def _last_true(mask: np.ndarray) -> np.ndarray:
    """Index of the last True along the last axis (-1 when none)."""
    n = mask.shape[-1]
    return n - 1 - np.argmax(mask[..., ::-1], axis=-1) - (~mask.any(-1)) * n


def _first_true(mask: np.ndarray) -> np.ndarray:
    return np.argmax(mask, axis=-1)


def to_points(low, high):
    """Bounds of a mean of (d + 1) / 2 in [0, 1] -> bounds of the mean difference d in points (x100)."""
    return (2.0 * np.asarray(low) - 1.0) * 100.0, (2.0 * np.asarray(high) - 1.0) * 100.0


def verdict(low: float, high: float, margin: float | None) -> str | None:
    """What a paired difference's sequence decides (bounds in points): "better" (it excludes 0 above),
    "worse", "equivalent" (it lies inside (-margin, +margin)), or None (not yet)."""
    if low > 0.0:
        return "better"
    if high < 0.0:
        return "worse"
    if margin is not None and margin > 0.0 and -margin < low and high < margin:
        return "equivalent"
    return None


def cell_alpha(alpha: float, cells: int) -> float:
    """The level of each of `cells` sequences so that all hold together with probability 1 - alpha."""
    return alpha / max(1, cells)


def draw_order(indices, length: int, seed: int) -> list[int]:
    """`indices` in the order a sequential run draws them: sorted by a hash of (seed, length, index),
    a uniformly shuffled order that does not depend on the task or the run. Both runs of a comparison
    and every task at one length draw the same indices first, and the order of a subset is the order
    of the whole with the rest left out (a smaller pool draws its samples in the same relative order)."""
    import hashlib

    def key(i: int) -> bytes:
        return hashlib.sha256(f"sequential-order/{seed}/{length}/{i}".encode()).digest()

    return sorted((int(i) for i in indices), key=key)
