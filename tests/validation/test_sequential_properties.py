"""A results.json "sequential" block damaged by hypothesis: the schema refuses it in one line, or
every report that shows it (the terminal table, the leaderboard page, its CSV / Markdown / LaTeX)
reads it without another exception.

The valid block is the real writer's (harness.pipeline.sequential_cells.Comparison.record) on the
cells of tests/validation/test_results_properties.py's aggregated run."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings

from harness.core.errors import UserError
from harness.core.results_schema import validate_results
from harness.pipeline.sequential_cells import Comparison, Rule

from .mutations import mutated_json, one_line
from .test_results_properties import VALID

TASKS = ["niah_single_1", "vt"]


def _block() -> dict:
    pools = {(t, L): 4 for t in TASKS for L in (1024, 2048)}
    # a dataset's items (finite): the without-replacement sequence closes on the pool's mean, so 4 samples decide
    comp = Comparison(Rule(alpha=0.05, margin=60.0, round_size=2), pools, {"ruler": TASKS}, finite=set(pools))
    value = {"niah_single_1": 1.0, "vt": 0.5}
    while (sel := comp.next_round()) is not None:
        comp.feed({(t, L): {i: value[t] for i in sel[t][L]} for t in TASKS for L in (1024, 2048)})
    return {**comp.record(), "against": {"name": "base", "path": "results/base", "evaluated": True}}


BLOCK = _block()


def _shown(data: dict) -> str:
    from harness.pipeline.table import format_table
    from leaderboards.build import build
    from leaderboards.export import to_markdown
    from leaderboards.latex import to_latex
    from leaderboards.render import render_html
    from leaderboards.sequential_export import sequential_csv, sequential_markdown
    from leaderboards.sequential_latex import sequential_latex

    text = format_table(data)
    board = build([{**json.loads(json.dumps(data)), "sources": ["x"]}], title="t")
    render_html(board)
    sequential_csv(board)
    to_markdown(board) + sequential_markdown(board)
    to_latex(board) + sequential_latex(board)
    return text


def test_the_writers_block_is_valid_and_shown():
    data = validate_results({**copy.deepcopy(VALID), "sequential": BLOCK}, "r.json")
    text = _shown(data)
    assert "sequential: paired against base (results/base, its missing samples evaluated too)" in text
    assert BLOCK["cells"]["niah_single_1"]["1024"]["verdict"] == "better" and "better +" in text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block=mutated_json(BLOCK))
def test_a_damaged_block_is_refused_in_one_line_or_shown(block):
    try:
        data = validate_results({**copy.deepcopy(VALID), "sequential": block}, "results.json")
    except UserError as exc:
        one_line(exc)
        return
    _shown(data)


def _with_cell(task: str, **fields) -> dict:
    cells = copy.deepcopy(BLOCK["cells"])
    cells[task]["1024"].update(fields)
    return {**BLOCK, "cells": cells}


DAMAGED = {
    "width mode without a width": {**BLOCK, "mode": "width", "width": None},
    "samples without the fixed count": {**BLOCK, "samples": {"used": 3}},
    "the other run named by a number": {**BLOCK, "against": {"name": 5, "path": ["x"], "read_only": {"a": 1}}},
    "a rule name that is a list": {**BLOCK, "rule": {"name": ["x"]}},
    "an average naming no suite": _with_cell("average", suite=None),
    "an average of no tasks": _with_cell("average", tasks=[]),
    "a formula where the stop reason goes": _with_cell("vt", stopped="=HYPERLINK(1)", verdict="undecided"),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_hand_damaged_blocks_are_refused_in_one_line_or_shown(name):
    """Shapes hypothesis rarely draws: each is refused in one line, or shown; a formula never reaches
    the CSV live."""
    from leaderboards.build import build
    from leaderboards.sequential_export import sequential_csv

    try:
        data = validate_results({**copy.deepcopy(VALID), "sequential": DAMAGED[name]}, "results.json")
    except UserError as exc:
        one_line(exc)
        return
    assert "sequential: " in _shown(data)
    csv_text = sequential_csv(build([{**json.loads(json.dumps(data)), "sources": ["x"]}], title="t"))
    assert ",=HYPERLINK" not in csv_text
    assert "formula" not in name or ",'=HYPERLINK(1)\n" in csv_text  # shown, as text


def test_a_block_of_cells_outside_every_suite_has_no_grid():
    """Found by hypothesis: the cells under names no suite of the run has (a renamed task)."""
    from leaderboards.build import build
    from leaderboards.sequential_latex import sequential_latex

    block = {**BLOCK, "cells": {"renamed": BLOCK["cells"]["vt"]}}
    data = validate_results({**copy.deepcopy(VALID), "sequential": block}, "results.json")
    assert "sequential verdicts" not in _shown(data)
    board = build([{**json.loads(json.dumps(data)), "sources": ["x"]}], title="t")
    assert board["sequential"][0]["suites"] == [] and sequential_latex(board) == ""
