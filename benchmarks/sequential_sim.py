"""The simulation behind benchmarks/sequential_validity.py: many sequential paired comparisons at once,
each on its own pool of paired scores, looked at after every round by our rule and by the naive one.

    from sequential_sim import population, draws, null_pools, shifted, units, ours, naive
    a, b = draws(*population(pairs), sims=10_000, pool=500, rng=rng)   # a generator's samples (RULER)
    a, b = null_pools(pairs, sims=10_000, pool=500, rng=rng)           # a dataset's items (LongBench)
    b = shifted(a, b, 10.0, rng)                                        # arm B 10 points better, exactly
    ours(units(a, b), alpha=0.05, round_size=25, margin=5.0, finite=False)   # first verdict and n, per row
    naive(b - a, round_size=25, resamples=400, rng=rng)   # "stop once the bootstrap interval excludes 0"

Our rule is the product's: harness.core.sequential's betting confidence sequence, its bounds read
after every round, `verdict` deciding (as harness.pipeline.sequential_cells.Comparison does), the
cell stopping at its first verdict; the i.i.d. sequence for a generator's samples (the question is
about the models) and the without-replacement one over a dataset's items (finite: the question is
about that dataset). The naive rule is the fixed-n paired percentile bootstrap of harness.core.stats
(one shared (B, n) weight matrix per round, as `sample_weights` draws it) checked after every round.

A pool is a cell's samples: pairs (score of run A, score of run B) in [0, 1]; the paired difference
d = B - A is in [-1, 1] and its unit (d + 1) / 2 in [0, 1] (so "better" means B is better). Each row
of a pool is in a uniformly random draw order, which is what the sequence's validity rests on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.core import stats
from harness.core.errors import UserError
from harness.core.sequential import GRID_POINTS, BettingSequence, to_points, verdict

DECIDED = ("better", "worse")


# -- pools ------------------------------------------------------------------------------------------


def null_pools(pairs: np.ndarray, sims: int, pool: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): `sims` pools of `pool` paired scores, each pool pool/2 pairs drawn from `pairs` (an
    empirical joint, shape (k, 2)) with replacement plus each drawn pair swapped, so every pool's mean
    difference is exactly 0 while the scores and the between-run correlation are the joint's; rows
    in a uniformly random order."""
    if pool < 2 or pool % 2:
        raise UserError(f"the pool must be an even number of samples (a pair and its swap), got {pool}")
    pick = rng.integers(0, len(pairs), size=(sims, pool // 2))
    first, second = pairs[pick, 0], pairs[pick, 1]
    a = np.concatenate([first, second], axis=1)
    b = np.concatenate([second, first], axis=1)
    order = np.argsort(rng.random((sims, pool)), axis=1)
    return np.take_along_axis(a, order, 1), np.take_along_axis(b, order, 1)


def population(pairs: np.ndarray, copies: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of a generator under the null: every pair of the joint and its swap, `copies` times (so a
    later shift moves the mean in steps of 1 / (2 k copies) of a sample); mean difference exactly 0."""
    both = np.concatenate([pairs, pairs[:, ::-1]])
    both = np.tile(both, (copies, 1))
    return both[:, 0].copy(), both[:, 1].copy()


def draws(
    a: np.ndarray, b: np.ndarray, sims: int, pool: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): `sims` pools of `pool` i.i.d. draws from a generator (a population of pairs): each index
    a fresh sample, as a RULER cell's are; a pool's mean difference scatters around the generator's."""
    pick = rng.integers(0, len(a), size=(sims, pool))
    return a[pick], b[pick]


def shifted(a: np.ndarray, b: np.ndarray, points: float, rng: np.random.Generator) -> np.ndarray:
    """Arm B's scores raised on randomly chosen samples (each to the full score, the last one by what is
    left) until every pool's mean difference B - A is exactly `points` higher than it was."""
    pool = b.shape[1]
    need = points / 100.0 * pool
    room = 1.0 - b
    short = room.sum(axis=1) < need - 1e-9
    if short.any():
        raise UserError(
            f"a pool cannot be raised by {points:g} points: arm B's headroom is {room.sum(axis=1).min() / pool * 100:.1f}"
            " points in some pools; leave that difference out (--deltas) for this joint"
        )
    order = np.argsort(rng.random(b.shape), axis=1)
    room_drawn = np.take_along_axis(room, order, 1)
    before = np.cumsum(room_drawn, axis=1) - room_drawn  # headroom of the samples raised before this one
    raise_drawn = np.clip(need - before, 0.0, room_drawn)
    raised = np.empty_like(b)
    np.put_along_axis(raised, order, raise_drawn, axis=1)
    return np.minimum(b + raised, 1.0)


def units(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(d + 1) / 2 of each paired difference d = b - a: the values the sequence sees."""
    return np.clip((b - a + 1.0) / 2.0, 0.0, 1.0)


# -- our rule -----------------------------------------------------------------------------------------


class VerdictGrid(BettingSequence):
    """The product's sequence read only on the points of its own grid that a verdict can turn on.

    Each grid point's capital depends on that point alone (the bets use the values seen, never other
    grid points), so these points carry exactly the capital they carry in the full grid. The capital
    is monotone in the candidate mean, so a bound read here falls on the same side of every threshold
    inside the band as the full grid's (0 for better/worse, -margin and +margin for equivalence), and a
    bound outside the band is outside every threshold in both: the verdicts are the full grid's
    (tests/benchmarks/test_sequential_validity.py checks it on random paths) at a fraction of its cost.
    """

    def __init__(self, alpha: float, pool: int | None, batch: int, margin: float | None) -> None:
        full = np.linspace(0.0, 1.0, GRID_POINTS)
        reach = (margin or 0.0) + 1.0  # points either side of 0 the band spans: past the margin by a point
        band = full[np.abs(2.0 * full - 1.0) * 100.0 <= reach + 1e-9]
        super().__init__(alpha, pool=pool, batch=batch, grid_points=len(band))
        self.grid = band


@dataclass
class Outcome:
    """What each simulated comparison decided first, and the samples it had drawn then."""

    verdicts: np.ndarray  # (sims,) "better" / "worse" / "equivalent" / "undecided"
    n: np.ndarray  # (sims,) samples drawn when it stopped (the whole pool when undecided)

    def rate(self, *which: str) -> int:
        return int(np.isin(self.verdicts, which).sum())


def ours(
    values: np.ndarray,
    alpha: float,
    round_size: int,
    margin: float | None,
    chunk: int = 1000,
    full_grid: bool = False,
    finite: bool = True,
) -> Outcome:
    """Our rule on every row of `values` ((sims, pool) units in draw order): after each round of
    `round_size` the bounds in points are read and `verdict` decides; a row stops at its first verdict.
    full_grid: the product's whole grid instead of VerdictGrid (slow; for checking it). finite=False:
    the sequence's i.i.d. form (pool=None), which covers the generator's mean instead of the pool's."""
    sims, pool = values.shape
    verdicts = np.full(sims, "undecided", dtype=object)
    n = np.full(sims, pool)
    size = pool if finite else None
    for lo in range(0, sims, chunk):
        part = values[lo : lo + chunk]
        if full_grid:
            seq: BettingSequence = BettingSequence(alpha, pool=size, batch=len(part))
        else:
            seq = VerdictGrid(alpha, size, len(part), margin)
        still = np.ones(len(part), dtype=bool)
        for start in range(0, pool, round_size):
            stop = min(pool, start + round_size)
            seq.update(part[:, start:stop])
            low, high = to_points(*seq.bounds())
            for j in np.flatnonzero(still):
                v = verdict(float(low[j]), float(high[j]), margin)
                if v is not None:
                    verdicts[lo + j], n[lo + j], still[j] = v, stop, False
            if not still.any():
                break
    return Outcome(verdicts, n)


# -- the naive rule ---------------------------------------------------------------------------------


def _bootstrap_sides(d: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """(excludes 0 above, excludes 0 below) of each row's paired percentile-bootstrap interval at
    stats.LEVEL, one (B, n) weight matrix shared by every row (stats.sample_weights)."""
    n = d.shape[1]
    weights = stats.sample_weights(n, rng, resamples)
    means = d @ weights.T / n  # (rows, B): each replicate's mean difference
    tail = (1.0 - stats.LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], axis=1)
    return low > 0, high < 0


def naive(d: np.ndarray, round_size: int, resamples: int, rng: np.random.Generator) -> Outcome:
    """Stop the first time the fixed-n bootstrap interval of the differences seen excludes 0, looking
    after every round (`d`: (sims, pool) differences in draw order)."""
    sims, pool = d.shape
    verdicts = np.full(sims, "undecided", dtype=object)
    n = np.full(sims, pool)
    still = np.ones(sims, dtype=bool)
    for stop in range(round_size, pool + round_size, round_size):
        stop = min(stop, pool)
        rows = np.flatnonzero(still)
        above, below = _bootstrap_sides(d[rows, :stop], rng, resamples)
        for side, name in ((above, "better"), (below, "worse")):
            verdicts[rows[side]] = name
            n[rows[side]] = stop
        still[rows[above | below]] = False
        if not still.any():
            break
    return Outcome(verdicts, n)


def fixed(d: np.ndarray, resamples: int, rng: np.random.Generator) -> Outcome:
    """The fixed protocol: one bootstrap interval over every sample of the pool."""
    above, below = _bootstrap_sides(d, rng, resamples)
    verdicts = np.where(above, "better", np.where(below, "worse", "undecided")).astype(object)
    return Outcome(verdicts, np.full(len(d), d.shape[1]))


# -- a family of cells --------------------------------------------------------------------------------


def family_values(
    joints: list[np.ndarray], lengths: int, sims: int, pool: int, rng: np.random.Generator, finite: bool
) -> dict[str, np.ndarray]:
    """Units of every cell of a suite under the null: each task (a joint) at each length its own pools
    (finite: a dataset's, symmetrised so its mean difference is exactly 0; else i.i.d. draws from the
    symmetrised generator), and per length the suite average, whose value of a sample is the mean of
    its tasks' (every task at a length draws the same indices in the same order, as
    harness.core.sequential.draw_order has them)."""
    cells: dict[str, np.ndarray] = {}
    for length in range(lengths):
        tasks = []
        for t, pairs in enumerate(joints):
            a, b = null_pools(pairs, sims, pool, rng) if finite else draws(*population(pairs), sims, pool, rng)
            cells[f"task{t}@L{length}"] = units(a, b)
            tasks.append(cells[f"task{t}@L{length}"])
        cells[f"average@L{length}"] = np.mean(tasks, axis=0)
    return cells


def family_outcomes(
    cells: dict[str, np.ndarray], alpha_cell: float, round_size: int, margin: float | None, finite: bool
) -> dict[str, Outcome]:
    """Our rule on every cell at the Bonferroni level alpha_cell."""
    return {name: ours(v, alpha_cell, round_size, margin, finite=finite) for name, v in cells.items()}


def family_errors(outcomes: dict[str, Outcome]) -> np.ndarray:
    """(sims,) whether any cell of a simulated suite reached better or worse."""
    return np.any([np.isin(o.verdicts, DECIDED) for o in outcomes.values()], axis=0)


def _members(outcomes: dict[str, Outcome], average: str) -> list[Outcome]:
    length = average.split("@", 1)[1]
    return [o for name, o in outcomes.items() if name.startswith("task") and name.endswith("@" + length)]


def through_task_errors(outcomes: dict[str, Outcome]) -> np.ndarray:
    """(sims,) an event that contains every false decision of the default rule (averages drawn
    through their tasks, harness.pipeline.sequential_cells), from each cell's own outcome:

    - a task cell decides as it does alone (its draws and sequence do not depend on the average);
    - an average's own sequence sees only the samples every task drew, so it looks at most up to its
      first task's stop: it errs only if its first verdict is better/worse at or before that;
    - the interval read from its tasks (the mean of their bounds) lies above 0 only if some task's
      low end does, which that task's own verdict has then already said (a false "better"); below
      0 likewise. Intersecting it with the average's own sequence only narrows that one, so the
      average stops no later than its own sequence would.

    So the rule's family error rate is at most this event's: showing the event below alpha shows the
    rule valid (the bound is what is simulated, not the rule's exact rate)."""
    errors = family_errors({k: v for k, v in outcomes.items() if k.startswith("task")})
    for name, avg in outcomes.items():
        if name.startswith("average"):
            first_stop = np.min([m.n for m in _members(outcomes, name)], axis=0)
            errors = errors | (np.isin(avg.verdicts, DECIDED) & (avg.n <= first_stop))
    return errors


def samples_used(outcomes: dict[str, Outcome], through_tasks: bool) -> np.ndarray:
    """(sims,) samples drawn over the task cells: each task to its own stop (through tasks), or to
    the later of its own and its length's average's stop (held)."""
    total = np.zeros(len(next(iter(outcomes.values())).n))
    for name, avg in outcomes.items():
        if name.startswith("average"):
            for m in _members(outcomes, name):
                total += m.n if through_tasks else np.maximum(m.n, avg.n)
    return total


# -- binomial intervals -----------------------------------------------------------------------------


def binomial_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float, str]:
    """(low, high, method) of a binomial proportion k/n: Clopper-Pearson (exact) through scipy, or
    Wilson's score interval where scipy is missing."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    tail = (1.0 - level) / 2
    try:
        from scipy.stats import beta  # type: ignore[import-untyped]  # scipy ships no stubs
    except ImportError:
        return (*wilson(k, n, level), "Wilson")
    low = 0.0 if k == 0 else float(beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - tail, k + 1, n - k))
    return low, high, "Clopper-Pearson"


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
