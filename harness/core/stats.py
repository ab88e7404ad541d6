"""Uncertainty of the harness's numbers: bootstrap intervals, paired differences, sample sizes.

    from harness.core import stats
    W = stats.sample_weights(n, stats.rng_for("niah_single_1", 4096))      # (B, n) resample counts
    R = stats.checkpoint_replicates(scores, W)                           # (B, K): one value per checkpoint
    low, high = stats.interval(stats.over_checkpoints(R, stats.rng_for("ckpts")))

The design is crossed, not nested: every checkpoint of a run scores the same samples (they are
seeded per index), so one bootstrap draw of sample indices is shared by all checkpoints (and, for
a paired difference, by both runs), and the checkpoints are resampled on top of it. Resampling the
samples independently within each checkpoint would treat one hard sample as several independent
ones and understate the sample-level uncertainty of a checkpoint average.

Both levels are resampled with replacement: B draws of n sample indices (as counts per sample,
so a checkpoint's replicate is a weighted mean: one matrix product for all B at once), then, per
replicate, K checkpoints out of K. The interval is the percentile interval of the B replicates of
the statistic (the mean over the drawn checkpoints). Everything is seeded from the cell's key, so
the same results give the same intervals on every machine.
"""

from __future__ import annotations

import hashlib
import math
from statistics import NormalDist

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000
METHOD = {
    "method": "percentile bootstrap",
    "level": LEVEL,
    "resamples": RESAMPLES,
    "design": "sample indices resampled once per replicate and shared by all checkpoints (and by both runs of a "
    "paired difference), then checkpoints resampled with replacement",
}


def rng_for(*key: object) -> np.random.Generator:
    """A generator seeded from a cell's key (task, version, length, ...): stable across processes."""
    digest = hashlib.sha256(repr(tuple(str(k) for k in key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def sample_weights(n: int, rng: np.random.Generator, resamples: int = RESAMPLES) -> np.ndarray:
    """(resamples, n) counts: how often each of n samples is drawn in each bootstrap replicate."""
    if n == 0:
        return np.zeros((resamples, 0))
    # n uniform index draws per replicate, counted: the multinomial(n, 1/n) counts, 4x faster than
    # Generator.multinomial at n = 500
    draws = rng.integers(0, n, size=(resamples, n)) + (np.arange(resamples) * n)[:, None]
    return np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n).astype(np.float64)


def checkpoint_replicates(num: np.ndarray, weights: np.ndarray, den: np.ndarray | None = None) -> np.ndarray:
    """(B, K) per-checkpoint replicates of sum(w * num) / sum(w * den) (den 1: the weighted mean).

    num, den: (K, n) with NaN where a checkpoint has no score for a sample (it is left out of that
    checkpoint's mean). A replicate that drew none of a checkpoint's samples is NaN.
    """
    num = np.atleast_2d(np.asarray(num, dtype=np.float64))
    mask = ~np.isnan(num)
    d = np.ones_like(num) if den is None else np.atleast_2d(np.asarray(den, dtype=np.float64))
    top = weights @ np.where(mask, num, 0.0).T
    bottom = weights @ np.where(mask, d, 0.0).T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)


def over_checkpoints(replicates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(B,) the mean over K checkpoints drawn with replacement from each replicate's row."""
    B, K = replicates.shape
    if K == 1:
        return replicates[:, 0].copy()
    pick = rng.integers(0, K, size=(B, K))
    drawn = np.take_along_axis(replicates, pick, axis=1)
    with np.errstate(invalid="ignore"):
        valid = ~np.isnan(drawn)
        total = np.where(valid, drawn, 0.0).sum(axis=1)
        count = valid.sum(axis=1)
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def interval(replicates: np.ndarray, level: float = LEVEL) -> tuple[float, float] | None:
    """The percentile interval of the replicates; None when there are none (all NaN)."""
    r = replicates[~np.isnan(replicates)]
    if r.size == 0:
        return None
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(r, [tail, 100 - tail])
    return float(low), float(high)


def significant(low: float, high: float) -> bool:
    """A difference is significant at the interval's level when the interval excludes 0."""
    return low > 0 or high < 0


# ----------------------------------------------------------------------------------------------
# Sample-size planning (normal approximation, two-sided test at alpha with the given power)


def z_sum(alpha: float, power: float) -> float:
    """z_{1-alpha/2} + z_{power}: the standard normal quantiles of a two-sided test."""
    nd = NormalDist()
    return nd.inv_cdf(1 - alpha / 2) + nd.inv_cdf(power)


def samples_needed(variance: float, delta: float, alpha: float = 0.05, power: float = 0.8, paired: bool = True) -> int:
    """Samples per run to detect a mean difference `delta` (same units as the variance's root).

    paired: variance is that of the per-sample difference, n = (z_a + z_b)^2 var / delta^2;
    unpaired: variance is one run's per-sample variance (assumed equal in both runs),
    n = 2 (z_a + z_b)^2 var / delta^2 per run.
    """
    factor = 1.0 if paired else 2.0
    n = factor * z_sum(alpha, power) ** 2 * variance / delta**2
    return max(2, math.ceil(n - 1e-9))
