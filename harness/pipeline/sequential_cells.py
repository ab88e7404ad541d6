"""The cells of a sequential evaluation: which samples each round draws, the confidence sequence of
each cell, its verdict, and the "sequential" block of results.json.

    from harness.pipeline.sequential_cells import Rule, Comparison
    comp = Comparison(rule, pools, suites, arm_pools)   # pools: (task, length) -> samples of a plain run
    while (selection := comp.next_round()) is not None:
        ...evaluate the selection on both runs...
        comp.feed(units)                                  # (task, length) -> {index: value in [0, 1]}
    results["sequential"] = comp.record()

Cells are every (task, length) and, for a suite of two or more tasks, its average at each length.
A paired cell's value of sample i is (d_i + 1) / 2 with d_i = score of this run - score of the other,
each averaged over the run's checkpoints; an average's is the mean of its tasks' d_i (so every task
at a length draws the same indices: harness.core.sequential.draw_order). A single run's value is its
score. Each cell has its own confidence sequence at alpha / (number of cells) (Bonferroni): the i.i.d.
one for a generator's samples (RULER: the question is about the models, and each index is a fresh
draw), the without-replacement one over a dataset's items (LongBench: the question is about that
dataset, and its sequence closes on the dataset's mean). The pool bounds how many samples a cell may
draw (the samples a plain run takes there). A round draws `round_size` more
samples for every open cell. An average is drawn through its tasks: its own sequence sees the
samples every one of its tasks drew, so it runs until the first of them stops, and its interval is
that sequence's intersected with the one its tasks' intervals give (their mean: on the event that
every task's sequence covers its mean, which the Bonferroni family already pays for, the mean of the
bounds covers the mean of the means). A decided task is then never drawn for its average's sake.
With `hold_averages` (the earlier rule) a task whose length's average is open keeps being drawn, and
the average's interval is its own sequence's alone: more samples, and it can decide an average whose
tasks are each undecided after their tasks decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.core import sequential
from harness.core.sequential import BettingSequence, draw_order, to_points

AVERAGE = "average"


@dataclass(frozen=True)
class Rule:
    """The stopping rule: a paired comparison (against) or a single run's width (width)."""

    alpha: float = 0.05
    margin: float | None = 5.0  # points: "equivalent" inside (-margin, +margin); None: never equivalent
    width: float | None = None  # points: a single run's cell stops once its interval is narrower
    round_size: int = 25
    max_samples: int | None = None
    seed: int = 42
    # True: a task is drawn while its length's suite average is open (the average's own sequence
    # alone decides it); False: averages are drawn through their tasks and also read from them
    hold_averages: bool = False

    @property
    def paired(self) -> bool:
        return self.width is None


@dataclass
class Cell:
    """One (task, length) or one suite average at a length."""

    task: str  # the task, or the suite's name for an average
    length: int
    order: list[int]  # the pool, in draw order
    fixed: int  # samples a plain (fixed-n) run takes here
    members: tuple[str, ...] = ()  # an average's tasks
    # True: the pool is the whole population asked about (a dataset's items), so the sequence is the
    # without-replacement one and closes on the pool's mean; False: the samples are i.i.d. draws from
    # a generator (RULER), the question is about the models, and the i.i.d. sequence is used
    finite: bool = False
    requested: int = 0  # how many of `order` have been drawn
    fed: int = 0  # how many of them the sequence has seen
    seq: BettingSequence | None = None
    verdict: str | None = None
    stop: str | None = None  # why no more samples are drawn for it
    # an average read from its tasks: its interval when it stopped (its tasks' go on narrowing)
    final: tuple[float, float] | None = None

    @property
    def is_average(self) -> bool:
        return bool(self.members)

    @property
    def name(self) -> str:
        return f"{self.task} average" if self.is_average else self.task


class Comparison:
    """Every cell of a sequential evaluation and the rounds that feed them."""

    def __init__(
        self,
        rule: Rule,
        pools: dict[tuple[str, int], int],
        suites: dict[str, list[str]],
        arm_pools: dict[tuple[str, int], set[int]] | None = None,
        finite: set[tuple[str, int]] | None = None,
    ) -> None:
        finite = finite or set()
        self.rule = rule
        self.rounds = 0
        self.cells: dict[tuple[str, str, int], Cell] = {}
        for (task, L), n in sorted(pools.items()):
            pool = range(n) if arm_pools is None else sorted(i for i in arm_pools.get((task, L), ()) if i < n)
            self.cells[("task", task, L)] = Cell(task, L, draw_order(pool, L, rule.seed), n, finite=(task, L) in finite)
        for suite, tasks in sorted(suites.items()):
            for L in sorted({L for (t, L) in pools if t in tasks}):
                members = tuple(t for t in tasks if ("task", t, L) in self.cells)
                if len(members) < 2:
                    continue
                common = set.intersection(*(set(self.cells[("task", t, L)].order) for t in members))
                fixed = sum(self.cells[("task", t, L)].fixed for t in members)
                whole = all((t, L) in finite for t in members)
                self.cells[(AVERAGE, suite, L)] = Cell(
                    suite, L, draw_order(common, L, rule.seed), fixed, members, finite=whole
                )
        self.alpha_cell = sequential.cell_alpha(rule.alpha, len(self.cells))
        for cell in self.cells.values():
            if cell.order:
                cell.seq = BettingSequence(self.alpha_cell, pool=len(cell.order) if cell.finite else None)
            elif not self._through_tasks(cell):  # an average read from its tasks needs none
                cell.stop = "no shared samples"

    # -- rounds --------------------------------------------------------------------------------

    def next_round(self) -> dict[str, dict[int, list[int]]] | None:
        """Draw `round_size` more samples for every open cell; the selection of every sample drawn so
        far ({task: {length: [index, ...]}}), or None when no cell is open."""
        cap = self.rule.max_samples
        grew = False
        for cell in self.cells.values():
            if cell.stop is not None:
                continue
            if self._through_tasks(cell):  # drawn by its tasks; closed in _decide once they all stop
                continue
            limit = len(cell.order) if cap is None else min(len(cell.order), cap)
            if cell.requested >= limit:
                cell.stop = "max samples" if cap is not None and limit < len(cell.order) else "pool used up"
                continue
            cell.requested = min(limit, cell.requested + self.rule.round_size)
            grew = True
        if not grew:
            return None
        self.rounds += 1
        return self.selection()

    def selection(self) -> dict[str, dict[int, list[int]]]:
        out: dict[str, dict[int, set[int]]] = {}
        for cell in self.cells.values():
            drawn = cell.order[: cell.requested]
            for task in cell.members or (cell.task,):
                out.setdefault(task, {}).setdefault(cell.length, set()).update(drawn)
        return {t: {L: sorted(ix) for L, ix in by.items()} for t, by in out.items()}

    def feed(self, units: dict[tuple[str, int], dict[int, float]]) -> None:
        """Give each cell's sequence the values of its drawn samples, in draw order, up to the first
        one not scored yet; then decide."""
        for cell in self.cells.values():
            if self._through_tasks(cell) and cell.stop is None:
                cell.requested = self._drawn_by_every_task(cell)
            if cell.seq is None:
                if self._through_tasks(cell) and cell.stop is None:
                    self._decide(cell)
                continue
            values = []
            for i in cell.order[cell.fed : cell.requested]:
                v = self._value(cell, i, units)
                if v is None:
                    break
                values.append(v)
            if values:
                cell.seq.update(np.array(values))
                cell.fed += len(values)
            self._decide(cell)
            if cell.stop is None and cell.requested > cell.fed and not values:
                cell.stop = "scores missing"  # drawn, evaluated, and still unscored: no progress possible

    def _value(self, cell: Cell, i: int, units: dict) -> float | None:
        if not cell.is_average:
            return units.get((cell.task, cell.length), {}).get(i)
        got = [units.get((t, cell.length), {}).get(i) for t in cell.members]
        return None if any(v is None for v in got) else float(np.mean(got))

    def _through_tasks(self, cell: Cell) -> bool:
        """An average drawn through its tasks (not holding them in the pool)."""
        return cell.is_average and not self.rule.hold_averages

    def _drawn_by_every_task(self, cell: Cell) -> int:
        """How many of the average's indices, in its draw order, every one of its tasks has drawn."""
        drawn = [set(m.order[: m.requested]) for m in self._members(cell)]
        k = 0
        while k < len(cell.order) and all(cell.order[k] in d for d in drawn):
            k += 1
        return k

    def _members(self, cell: Cell) -> list[Cell]:
        return [self.cells[("task", t, cell.length)] for t in cell.members]

    def _decide(self, cell: Cell) -> None:
        through = self._through_tasks(cell)
        if (cell.fed == 0 and not through) or (through and cell.stop is not None):
            return
        low, high = self.interval(cell)
        if self.rule.paired:
            cell.verdict = sequential.verdict(low, high, self.rule.margin)
        elif high - low < self.rule.width:  # type: ignore[operator]
            cell.verdict = "within width"
        if cell.verdict is not None and cell.stop is None:
            cell.stop = "decided"
        if cell.stop is None and through and all(m.stop is not None for m in self._members(cell)):
            cell.stop = "tasks stopped"
        if through and cell.stop is not None:
            cell.final = (low, high)
        if cell.stop is None and not through and cell.fed >= len(cell.order):
            cell.stop = "pool used up"

    def interval(self, cell: Cell) -> tuple[float, float]:
        """The cell's interval in points: the mean difference (paired) or the mean score (one run).
        An average drawn through its tasks: its own sequence's intersected with its tasks' mean."""
        if cell.final is not None:
            return cell.final
        low, high = self._sequence_interval(cell)
        if self._through_tasks(cell):
            bounds = [self._sequence_interval(m) for m in self._members(cell)]
            low = max(low, float(np.mean([b[0] for b in bounds])))
            high = min(high, float(np.mean([b[1] for b in bounds])))
        return low, high

    def _sequence_interval(self, cell: Cell) -> tuple[float, float]:
        """The cell's own sequence in points; the whole range before it has seen a sample."""
        if cell.seq is None or cell.fed == 0:
            return (-100.0, 100.0) if self.rule.paired else (0.0, 100.0)
        low, high = cell.seq.bounds()
        if self.rule.paired:
            lo, hi = to_points(low, high)
            return float(lo), float(hi)
        return 100.0 * low, 100.0 * high

    def estimate(self, cell: Cell) -> float | None:
        if self._through_tasks(cell):  # the mean of its tasks' estimates, as its interval is read
            got = [self.estimate(m) for m in self._members(cell)]
            return None if any(g is None for g in got) else float(np.mean(got))  # type: ignore[arg-type]
        if cell.seq is None or cell.fed == 0:
            return None
        m = float(cell.seq.mean())
        return (2.0 * m - 1.0) * 100.0 if self.rule.paired else 100.0 * m

    # -- what it says --------------------------------------------------------------------------

    def open_cells(self) -> list[Cell]:
        return [c for c in self.cells.values() if c.stop is None]

    def used(self) -> tuple[int, int]:
        """(samples drawn, samples a plain run takes) over the (task, length) cells."""
        sel = self.selection()
        drawn = sum(len(ix) for by in sel.values() for ix in by.values())
        fixed = sum(c.fixed for c in self.cells.values() if not c.is_average)
        return drawn, fixed

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cells.values():
            key = c.verdict or ("open" if c.stop is None else "undecided")
            out[key] = out.get(key, 0) + 1
        return out

    def progress_line(self) -> str:
        drawn, fixed = self.used()
        counts = self.counts()
        decided = sum(v for k, v in counts.items() if k not in ("open", "undecided"))
        parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("open", "undecided"))
        opened = self.open_cells()
        shown = ", ".join(f"{c.name}@{_length(c.length)}" for c in opened[:4]) + (" ..." if len(opened) > 4 else "")
        saved = 1.0 - drawn / fixed if fixed else 0.0
        return (
            f"round {self.rounds}: decided {decided}/{len(self.cells)} cells ({parts or 'none yet'}); "
            f"open {len(opened)}{': ' + shown if opened else ''}; samples {drawn} of the fixed protocol's "
            f"{fixed} ({saved:.0%} saved)"
        )

    def record(self) -> dict:
        """The results.json "sequential" block (docs/sequential.md)."""
        drawn, fixed = self.used()
        sel = self.selection()
        cells: dict = {}
        # one suite's averages under "average"; several suites' (a suite spanning families) each under
        # "average:<suite>" -- every average entry names its suite and tasks
        avg_suites = {c.task for c in self.cells.values() if c.is_average}
        for c in self.cells.values():
            read = self._through_tasks(c) and all(m.fed for m in self._members(c))
            shown = (c.seq is not None and c.fed) or read
            low, high = self.interval(c) if shown else (None, None)
            used = len(c.order[: c.requested]) if c.is_average else len(sel.get(c.task, {}).get(c.length, []))
            key = c.task if not c.is_average else AVERAGE if len(avg_suites) == 1 else f"{AVERAGE}:{c.task}"
            entry: dict[str, Any] = {
                "n": used,
                "seen": c.fed,
                "pool": len(c.order),
                "fixed_n": c.fixed,
                "interval": [_round(low), _round(high)] if low is not None else None,
                "estimate": _round(self.estimate(c)),
                "verdict": c.verdict or "undecided",
                "stopped": c.stop or "open",
                "form": "without replacement" if c.finite else "i.i.d.",
            }
            if c.is_average:
                entry["suite"] = c.task
                entry["tasks"] = list(c.members)
            cells.setdefault(key, {})[str(c.length)] = entry
        return {
            "mode": "paired" if self.rule.paired else "width",
            "rule": dict(sequential.RULE),
            "alpha": self.rule.alpha,
            "alpha_per_cell": self.alpha_cell,
            "cells_total": len(self.cells),
            "equivalence_margin": self.rule.margin if self.rule.paired else None,
            "width": self.rule.width,
            "round_size": self.rule.round_size,
            "max_samples": self.rule.max_samples,
            "averages": "held" if self.rule.hold_averages else "through tasks",
            "rounds": self.rounds,
            "order": "one seeded shuffle of each length's sample indices, shared by every task and both runs",
            "samples": {"used": drawn, "fixed": fixed},
            "cells": cells,
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def _length(L: int) -> str:
    from harness.core.lengths import format_length

    return format_length(L)


def run_scores(results: dict) -> dict[tuple[str, int], tuple[dict, dict[int, float]]]:
    """(task, length) -> (the samples block, {index: score in [0, 1] averaged over the run's checkpoints})
    for every scored sample every checkpoint scored; perplexity blocks are left out (not bounded)."""
    from harness.core.paired import is_perplexity

    out = {}
    for suite in results.get("suites", {}).values():
        for task, by_len in (suite.get("samples") or {}).items():
            for L, block in by_len.items():
                if is_perplexity(block):
                    continue
                columns = list(block["scores"].values())
                scores = {}
                for pos, i in enumerate(block["index"]):
                    vals = [col[pos] for col in columns]
                    if columns and all(v is not None for v in vals):
                        scores[int(i)] = float(np.mean(vals))
                out[(task, int(L))] = (block, scores)
    return out


def paired_units(ours: dict, theirs: dict) -> dict[tuple[str, int], dict[int, float]]:
    """(d + 1) / 2 of each sample both runs scored, d = ours - theirs (blocks from the same generator)."""
    from harness.core.paired import shares_samples

    a, b = run_scores(ours), run_scores(theirs)
    out = {}
    for key, (block_a, sa) in a.items():
        if key not in b or not shares_samples(block_a, b[key][0]):
            continue
        sb = b[key][1]
        out[key] = {i: (sa[i] - sb[i] + 1.0) / 2.0 for i in sa if i in sb}
    return out


def single_units(results: dict) -> dict[tuple[str, int], dict[int, float]]:
    return {key: scores for key, (_, scores) in run_scores(results).items()}
