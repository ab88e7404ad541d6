"""The cells and rounds of a sequential evaluation (harness/pipeline/sequential_cells.py), on made-up
per-sample values: which samples a round draws, when a cell stops, what results.json records."""

from __future__ import annotations

import numpy as np

from harness.core.results_schema import Sequential
from harness.core.sequential import draw_order
from harness.pipeline.sequential_cells import Comparison, Rule

L = 4096


def _run(comp: Comparison, value) -> list[dict]:
    """Rounds until no cell is open; value(task, i) is the unit of a drawn sample. The selections."""
    seen = []
    while (sel := comp.next_round()) is not None:
        seen.append(sel)
        comp.feed({(t, L): {i: value(t, i) for i in by[L]} for t, by in sel.items()})
    return seen


def test_tasks_at_a_length_draw_the_same_samples_and_stop_when_decided():
    rule = Rule(alpha=0.05, margin=None, round_size=10)
    comp = Comparison(rule, {("a", L): 200, ("b", L): 200}, {"s": ["a", "b"]})
    assert len(comp.cells) == 3 and comp.alpha_cell == 0.05 / 3
    # this run always better by one whole point on every sample (d = +1): decided in a few rounds
    sels = _run(comp, lambda t, i: 1.0)
    first = sels[0]
    assert first["a"][L] == first["b"][L] == sorted(draw_order(range(200), L, 42)[:10])
    rec = comp.record()
    for key in ("a", "b"):
        cell = rec["cells"][key][str(L)]
        assert cell["verdict"] == "better" and cell["stopped"] == "decided"
        assert cell["n"] < 200 and cell["interval"][0] > 0
    assert rec["cells"]["average"][str(L)]["tasks"] == ["a", "b"]
    assert rec["samples"]["used"] < rec["samples"]["fixed"] == 400
    Sequential.model_validate(rec)  # the block follows results.json's schema


def test_a_held_average_keeps_its_decided_tasks_drawn():
    rule = Rule(alpha=0.05, margin=None, round_size=20, hold_averages=True)
    pools = {("a", L): 100, ("b", L): 100}
    for finite in (set(), set(pools)):  # a generator's draws (i.i.d.), a dataset's items (its whole pool)
        comp = Comparison(rule, pools, {"s": ["a", "b"]}, finite=finite)
        # task a: always better (decided early); task b: worse by as much, so the average is exactly 0
        # and never decided: a keeps being drawn with b until the pool is used up
        _run(comp, lambda t, i: 1.0 if t == "a" else 0.0)
        rec = comp.record()["cells"]
        assert rec["a"][str(L)]["verdict"] == "better" and rec["b"][str(L)]["verdict"] == "worse"
        avg = rec["average"][str(L)]
        assert avg["verdict"] == "undecided" and avg["stopped"] == "pool used up" and avg["n"] == 100
        assert rec["a"][str(L)]["n"] == 100  # drawn for the average
        if finite:  # every item seen: the dataset's mean difference exactly
            assert avg["interval"] == [0.0, 0.0] and avg["form"] == "without replacement"
        else:  # the models' difference is still only known to the sequence's width
            lo, hi = avg["interval"]
            assert lo < 0 < hi and avg["form"] == "i.i.d."


def test_an_average_read_from_its_tasks_lets_them_stop():
    """The default rule: task a decided better, task b worse, the average (exactly 0) never decided;
    neither task is drawn past its own decision, and the average ends when both have stopped, its
    interval the mean of theirs (intersected with its own sequence's, which stopped with them)."""
    pools = {("a", L): 100, ("b", L): 100}
    comp = Comparison(Rule(alpha=0.05, margin=None, round_size=20), pools, {"s": ["a", "b"]})
    _run(comp, lambda t, i: 1.0 if t == "a" else 0.0)
    rec = comp.record()
    cells = rec["cells"]
    a, b, avg = cells["a"][str(L)], cells["b"][str(L)], cells["average"][str(L)]
    assert a["verdict"] == "better" and b["verdict"] == "worse" and a["n"] == b["n"] < 100
    assert avg["verdict"] == "undecided" and avg["stopped"] == "tasks stopped" and avg["n"] == a["n"]
    mean_low, mean_high = (a["interval"][0] + b["interval"][0]) / 2, (a["interval"][1] + b["interval"][1]) / 2
    assert avg["interval"][0] >= mean_low - 1e-3 and avg["interval"][1] <= mean_high + 1e-3
    assert avg["interval"][0] < 0 < avg["interval"][1]
    assert rec["averages"] == "through tasks" and rec["samples"]["used"] == 2 * a["n"]
    Sequential.model_validate(rec)


def test_an_average_decides_before_its_tasks_on_its_own_sequence():
    """Same-signed gains that alternate between the tasks: each task's d is +1 or -1/2 by turns (a
    noisy +1/4), the average's always +1/4, so the average's own sequence decides it first."""
    comp = Comparison(Rule(alpha=0.05, margin=None, round_size=10), {("a", L): 300, ("b", L): 300}, {"s": ["a", "b"]})
    order = draw_order(range(300), L, 42)
    rank = {i: k for k, i in enumerate(order)}
    comp.next_round()
    while True:
        sel = comp.selection()
        comp.feed(
            {(t, L): {i: (1.0 if (rank[i] + (t == "b")) % 2 == 0 else 0.25) for i in sel[t][L]} for t in ("a", "b")}
        )
        avg = comp.cells[("average", "s", L)]
        if avg.stop is not None or comp.next_round() is None:
            break
    assert avg.verdict == "better" and avg.stop == "decided" and avg.requested < 100
    assert comp.cells[("task", "a", L)].stop is None and comp.cells[("task", "b", L)].stop is None


def test_equivalence_stops_a_cell_whose_runs_never_differ():
    comp = Comparison(Rule(alpha=0.05, margin=10.0, round_size=25), {("a", L): 500}, {})
    _run(comp, lambda t, i: 0.5)  # d = 0 on every sample
    cell = comp.record()["cells"]["a"][str(L)]
    assert cell["verdict"] == "equivalent" and cell["n"] < 250
    assert -10 < cell["interval"][0] <= 0 <= cell["interval"][1] < 10


def test_max_samples_and_a_read_only_arm_bound_what_is_drawn():
    comp = Comparison(Rule(margin=None, round_size=7, max_samples=30), {("a", L): 500}, {})
    rng = np.random.default_rng(0)
    _run(comp, lambda t, i: float(rng.integers(0, 3)) / 2)  # noise around 0: undecided
    cell = comp.record()["cells"]["a"][str(L)]
    assert cell["n"] == 30 and cell["verdict"] == "undecided" and cell["stopped"] == "max samples"
    # the other run scored only some samples: the pool is those, in the shared order
    arm = {("a", L): {3, 5, 8, 13, 600}}
    comp = Comparison(Rule(round_size=2), {("a", L): 500}, {}, arm_pools=arm)
    assert comp.cells[("task", "a", L)].order == draw_order([3, 5, 8, 13], L, 42)
    sel = comp.next_round()
    assert set(sel["a"][L]) <= {3, 5, 8, 13} and len(sel["a"][L]) == 2


def test_no_shared_samples_is_said_not_evaluated():
    comp = Comparison(Rule(), {("a", L): 50}, {}, arm_pools={})
    assert comp.next_round() is None
    assert comp.record()["cells"]["a"][str(L)]["stopped"] == "no shared samples"


def test_a_sample_never_scored_stops_its_cell_instead_of_looping():
    comp = Comparison(Rule(round_size=5), {("a", L): 50}, {})
    while (sel := comp.next_round()) is not None:
        comp.feed({("a", L): {i: 0.5 for i in sel["a"][L][:-1]}})  # one drawn sample never scores
    cell = comp.record()["cells"]["a"][str(L)]
    assert cell["stopped"] == "scores missing" and cell["seen"] < cell["n"]


def test_width_mode_stops_once_the_interval_is_narrow():
    comp = Comparison(Rule(width=20.0, round_size=25), {("a", L): 500}, {})
    rng = np.random.default_rng(1)
    _run(comp, lambda t, i: float(rng.random() < 0.7))
    cell = comp.record()["cells"]["a"][str(L)]
    lo, hi = cell["interval"]
    assert cell["verdict"] == "within width" and hi - lo < 20 and lo <= cell["estimate"] <= hi
    assert cell["n"] < 500
