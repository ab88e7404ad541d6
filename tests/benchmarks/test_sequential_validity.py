"""benchmarks/sequential_validity.py in small: under the null, with the score distributions of our stored
runs and a look after every round, our rule's false-decision rate stays at or below alpha (its
binomial 95% interval reaches alpha or lower) and the naive rule's lies above it; the simulation's
pieces agree with the product's (the full grid, the Comparison class); the pools are what they claim."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import sequential_sim as sim
import sequential_validity as validity

from harness.core.errors import UserError
from harness.core.sequential import cell_alpha, draw_order
from harness.pipeline.sequential_cells import Comparison, Rule

ALPHA, POOL, ROUND = 0.05, 500, 25
SIMS = 2000


@pytest.fixture(scope="module")
def joints():
    _, found = validity.load_joints(validity.DATA)
    return found


def _pick(joints, kind):
    return next(j for j in joints.values() if j.kind == kind)


# -- the pools --------------------------------------------------------------------------------------


def test_a_generators_draws_come_from_the_symmetrised_joint(joints):
    pairs = _pick(joints, "binary").pairs
    a, b = sim.population(pairs, copies=3)
    assert len(a) == 6 * len(pairs) and (b - a).mean() == 0.0
    da, db = sim.draws(a, b, 400, 50, np.random.default_rng(9))
    means = (db - da).mean(axis=1)
    assert abs(means.mean()) < 0.02 and means.std() > 0.01  # pools scatter around the generator's 0


def test_null_pools_have_a_difference_of_exactly_zero_and_the_joints_scores(joints):
    pairs = _pick(joints, "graded").pairs
    a, b = sim.null_pools(pairs, 50, 40, np.random.default_rng(0))
    assert a.shape == b.shape == (50, 40)
    assert np.abs((b - a).mean(axis=1)).max() < 1e-12
    seen = {tuple(p) for p in pairs.tolist()} | {(y, x) for x, y in pairs.tolist()}
    assert {(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist())} <= seen
    with pytest.raises(UserError, match="even"):
        sim.null_pools(pairs, 2, 41, np.random.default_rng(0))


def test_a_shifted_pool_is_better_by_exactly_the_target_and_only_b_moves_up(joints):
    pairs = _pick(joints, "graded").pairs
    rng = np.random.default_rng(1)
    a, b = sim.null_pools(pairs, 30, POOL, rng)
    raised = sim.shifted(a, b, 10.0, rng)
    assert np.allclose((raised - a).mean(axis=1) * 100, 10.0, atol=1e-9)
    assert (raised >= b).all() and raised.max() <= 1.0
    assert ((raised > b).sum(axis=1) < POOL).all()  # some samples, not all
    full = np.ones((1, 10))
    with pytest.raises(UserError, match="cannot be raised"):
        sim.shifted(full, full.copy(), 5.0, rng)


# -- the simulation is the product's rule --------------------------------------------------------------


@pytest.mark.parametrize("finite", [False, True])
@pytest.mark.parametrize("margin", [None, 5.0])
def test_the_verdict_grid_decides_as_the_full_grid(joints, margin, finite):
    rng = np.random.default_rng(2)
    pairs = _pick(joints, "graded").pairs
    a, b = sim.null_pools(pairs, 40, 200, rng)
    stops = set()
    for bb in (b, sim.shifted(a, b, 6.0, rng)):
        values = sim.units(a, bb)
        fast = sim.ours(values, ALPHA, ROUND, margin, finite=finite)
        full = sim.ours(values, ALPHA, ROUND, margin, full_grid=True, finite=finite)
        assert (fast.verdicts == full.verdicts).all() and (fast.n == full.n).all()
        stops |= set(fast.n.tolist())
    assert len(stops) > 2  # different stopping points were compared


@pytest.mark.parametrize("finite", [False, True])
@pytest.mark.parametrize("margin", [None, 5.0])
def test_the_family_simulation_decides_as_the_comparison_class(joints, margin, finite):
    """A suite of 3 tasks x 2 lengths + 2 averages, some tasks 15 points apart: the batched
    simulation and harness.pipeline.sequential_cells.Comparison give every cell the same verdict
    after the same number of samples."""
    rng = np.random.default_rng(3)
    tasks, lengths, pool, sims = ["t0", "t1", "t2"], [1024, 2048], 100, 3
    pairs = [_pick(joints, "graded").pairs, _pick(joints, "binary").pairs, _pick(joints, "graded").pairs]
    cells = {}
    for L in lengths:
        for k, task in enumerate(tasks):
            a, b = sim.null_pools(pairs[k], sims, pool, rng)
            cells[(task, L)] = sim.units(a, sim.shifted(a, b, 15.0, rng) if k == 0 else b)
        cells[("s", L)] = np.mean([cells[(t, L)] for t in tasks], axis=0)
    per_cell = cell_alpha(ALPHA, len(cells))
    batched = {key: sim.ours(v, per_cell, ROUND, margin, finite=finite) for key, v in cells.items()}
    for row in range(sims):
        comp = Comparison(
            Rule(alpha=ALPHA, margin=margin, round_size=ROUND, hold_averages=True),
            {(t, L): pool for t in tasks for L in lengths},
            {"s": tasks},
            finite={(t, L) for t in tasks for L in lengths} if finite else None,
        )
        assert comp.alpha_cell == per_cell
        units = {}
        for L in lengths:
            order = draw_order(range(pool), L, 42)
            for t in tasks:  # the k-th sample drawn is the simulation's k-th value
                units[(t, L)] = {order[k]: float(cells[(t, L)][row, k]) for k in range(pool)}
        while comp.next_round() is not None:
            comp.feed(units)
        for (kind, name, L), cell in comp.cells.items():
            got = batched[(name, L)]
            assert (cell.verdict or "undecided", cell.requested) == (got.verdicts[row], got.n[row]), (name, L)
    decided = [v for o in batched.values() for v in o.verdicts]
    assert "better" in decided  # the shifted task is found


# -- validity, shown ------------------------------------------------------------------------------------


def _interval(outcome, *which):
    low, high, _ = sim.binomial_interval(outcome.rate(*which), len(outcome.verdicts))
    return low, high


@pytest.mark.parametrize("finite", [False, True])
@pytest.mark.parametrize("kind", ["binary", "graded"])
def test_under_the_null_our_rate_stays_at_alpha_and_the_naive_rate_lies_above(joints, kind, finite):
    """finite=False: a generator's samples (RULER), the models' difference 0, the i.i.d. sequence;
    finite=True: a dataset's items, the pool's difference exactly 0, the without-replacement one."""
    rng = np.random.default_rng(4)
    pairs = _pick(joints, kind).pairs
    a, b = sim.null_pools(pairs, SIMS, POOL, rng) if finite else sim.draws(*sim.population(pairs), SIMS, POOL, rng)
    ours = sim.ours(sim.units(a, b), ALPHA, ROUND, None, finite=finite)  # no margin: every look is made
    naive = sim.naive(b - a, ROUND, 300, rng)
    low, _ = _interval(ours, *sim.DECIDED)
    assert low <= ALPHA, f"our false-decision rate {ours.rate(*sim.DECIDED) / SIMS:.2%} is above alpha"
    naive_low, _ = _interval(naive, *sim.DECIDED)
    assert naive_low > ALPHA, f"the naive rule's rate {naive.rate(*sim.DECIDED) / SIMS:.2%} is not above alpha"


def test_at_the_equivalence_boundary_equivalent_is_rare(joints):
    rng = np.random.default_rng(5)
    a, b = sim.population(_pick(joints, "graded").pairs)
    b = sim.shifted(a[None], b[None], 5.0, rng)[0]  # the generator's difference is the margin, exactly
    assert (b - a).mean() * 100 == pytest.approx(5.0)
    a, b = sim.draws(a, b, SIMS, POOL, rng)
    out = sim.ours(sim.units(a, b), ALPHA, ROUND, 5.0, finite=False)
    low, _ = _interval(out, "equivalent")
    assert low <= ALPHA and out.rate("worse") <= out.rate("better")
    # the without-replacement form, whose sequence closes on the pool: equivalent would be wrong there too
    a, b = sim.null_pools(_pick(joints, "graded").pairs, SIMS, POOL, rng)
    out = sim.ours(sim.units(a, sim.shifted(a, b, 5.0, rng)), ALPHA, ROUND, 5.0, finite=True)
    low, _ = _interval(out, "equivalent")
    assert low <= ALPHA


def test_the_family_rate_stays_at_alpha_with_bonferroni(joints):
    rng = np.random.default_rng(6)
    tasks = [list(joints.values())[t % len(joints)].pairs for t in range(validity.FAMILY_TASKS)]
    cells = sim.family_values(tasks, validity.FAMILY_LENGTHS, 600, POOL, rng, finite=False)
    assert len(cells) == 14
    corrected = sim.family_errors(sim.family_outcomes(cells, cell_alpha(ALPHA, len(cells)), ROUND, None, False))
    low, _, _ = sim.binomial_interval(int(corrected.sum()), len(corrected))
    assert low <= ALPHA
    uncorrected = sim.family_errors(sim.family_outcomes(cells, ALPHA, ROUND, None, False))
    assert uncorrected.sum() > corrected.sum()
    outcomes = sim.family_outcomes(cells, cell_alpha(ALPHA, len(cells)), ROUND, None, False)
    through = sim.through_task_errors(outcomes)
    low, _, _ = sim.binomial_interval(int(through.sum()), len(through))
    assert low <= ALPHA
    # averages drawn through their tasks never draw more than held ones
    assert (sim.samples_used(outcomes, True) <= sim.samples_used(outcomes, False)).all()


@pytest.mark.parametrize("margin", [None, 5.0])
def test_the_through_task_bound_contains_every_false_decision_of_the_rule(joints, margin):
    """The default rule (averages drawn through their tasks) run by Comparison on simulated null
    suites at a loose alpha, so that false decisions happen: every row where it reaches a false
    verdict anywhere is a row of sequential_sim.through_task_errors' event, and that event is not
    empty (the check can fail)."""
    rng = np.random.default_rng(8)
    alpha, tasks, lengths, pool, sims = 0.45, ["t0", "t1", "t2"], [1024, 2048], 100, 40
    pairs = [_pick(joints, "graded").pairs, _pick(joints, "binary").pairs, _pick(joints, "graded").pairs]
    cells = sim.family_values(pairs, len(lengths), sims, pool, rng, finite=False)
    names = {f"task{k}@L{j}": (t, L) for j, L in enumerate(lengths) for k, t in enumerate(tasks)}
    names.update({f"average@L{j}": ("s", L) for j, L in enumerate(lengths)})
    per_cell = cell_alpha(alpha, len(cells))
    bound = sim.through_task_errors({n: sim.ours(v, per_cell, ROUND, margin, finite=False) for n, v in cells.items()})
    made = []
    for row in range(sims):
        comp = Comparison(
            Rule(alpha=alpha, margin=margin, round_size=ROUND),
            {(t, L): pool for t in tasks for L in lengths},
            {"s": tasks},
        )
        units = {}
        for j, L in enumerate(lengths):
            order = draw_order(range(pool), L, 42)
            for k, t in enumerate(tasks):
                units[(t, L)] = {order[i]: float(cells[f"task{k}@L{j}"][row, i]) for i in range(pool)}
        while comp.next_round() is not None:
            comp.feed(units)
        made.append(any(c.verdict in sim.DECIDED for c in comp.cells.values()))
    made = np.array(made)
    assert bound.any() and made.any() and not bound.all()
    assert not (made & ~bound).any(), "a false decision of the rule outside the simulated bound"


# -- intervals, the joints file, the command --------------------------------------------------------------


def test_binomial_intervals_against_known_values():
    low, high, method = sim.binomial_interval(0, 100)
    assert method == "Clopper-Pearson" and low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 100))
    low, high, _ = sim.binomial_interval(5, 100)
    assert (low, high) == pytest.approx((0.016431, 0.112835), abs=1e-6)
    assert sim.wilson(5, 100) == pytest.approx((0.021544, 0.111750), abs=1e-6)
    with pytest.raises(ValueError):
        sim.binomial_interval(3, 2)


def test_the_stored_joints_come_from_real_runs_with_their_commands(joints):
    commands, _ = validity.load_joints(validity.DATA)
    assert any("harness eval --ckpts" in c for c in commands)
    assert {j.kind for j in joints.values()} >= {"binary", "graded"}
    for j in joints.values():
        assert len(j.pairs) >= 10 and j.source


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "cannot be read"),
        ('{"joints": {}}', "no 'joints'"),
        ('{"joints": {"x": {"pairs": [[0.5, 2.0], [0, 0]]}}}', r"\[0, 1\]"),
        ('{"joints": {"x": {"pairs": [[0.5]]}}}', "two or more"),
        ('{"joints": {"x": {}}}', "no 'pairs'"),
    ],
)
def test_a_bad_joints_file_is_one_line_naming_the_fix(tmp_path, capsys, text, problem):
    path = tmp_path / "j.json"
    path.write_text(text)
    with pytest.raises(UserError, match=problem):
        validity.load_joints(path)
    assert validity.main(["--data", str(path), "--sims", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "--extract" in err


def test_extract_writes_the_joints_of_two_runs_with_the_commands(tiny_llama_dir, tmp_path):
    from harness.cli import main

    run = tmp_path / "run"
    cmd = ["eval", "--ckpts", str(tiny_llama_dir), "--tasks", "vt", "--lengths", "1k", "--samples", "4"]
    assert main([*cmd, "--out", str(run), "--no-progress"]) == 0
    data = tmp_path / "joints.json"
    made_with = "harness " + " ".join(cmd)
    assert validity.main(["--extract", str(run), str(run), "--data", str(data), "--made-with", made_with]) == 0
    commands, found = validity.load_joints(data)
    assert commands[0] == made_with and commands[1].startswith("python benchmarks/sequential_validity.py --extract")
    assert list(found) == ["vt@1K"] and len(found["vt@1K"].pairs) == 4
    assert (found["vt@1K"].pairs[:, 0] == found["vt@1K"].pairs[:, 1]).all()  # a run against itself
    # a second extraction, pooled, adds to the file
    assert validity.main(["--extract", str(run), str(run), "--data", str(data), "--merge", "pooled"]) == 0
    commands, again = validity.load_joints(data)
    assert set(again) == {"vt@1K", "pooled"} and len(again["pooled"].pairs) == 4
    assert commands[-1].endswith("--merge pooled")
