"""The terminal table's sequential part (harness.pipeline.sequential_table) and the one wording of a
cell every report uses (harness.core.sequential_text): exact cell strings per verdict, the header's
rule / alpha / margin / other run / samples ratio, and the grid's shape, from hand-made blocks and
from a block written by the real writer (harness.pipeline.sequential_cells.Comparison.record)."""

from __future__ import annotations

import pytest

from harness.core.results_schema import Sequential
from harness.core.sequential_text import cell_text, n_text, points, rule_lines, status, stop_line, suite_rows
from harness.pipeline.sequential_cells import Comparison, Rule
from harness.pipeline.table import format_table


def _entry(verdict, est, iv, n, fixed=500, stopped="decided", **extra):
    return {
        "n": n,
        "seen": n,
        "pool": 500,
        "fixed_n": fixed,
        "interval": iv,
        "estimate": est,
        "verdict": verdict,
        "stopped": stopped,
        **extra,
    }


@pytest.mark.parametrize(
    ("entry", "paired", "text"),
    [
        (_entry("better", 7.2, [1.1, 13.0], 75), True, "better +7.2 [+1.1, +13.0] n=75/500"),
        (_entry("worse", -5.46, [-9.04, -2.0], 150), True, "worse -5.5 [-9.0, -2.0] n=150/500"),
        (_entry("equivalent", 0.4, [-3.1, 2.9], 50), True, "equiv n=50/500"),
        (
            _entry("undecided", 1.0, [-2.5, 4.4], 500, stopped="pool used up"),
            True,
            "undecided +1.0 [-2.5, +4.4] n=500/500",
        ),
        (_entry("undecided", 2.0, [-8.0, 12.0], 25, stopped="open"), True, "open +2.0 [-8.0, +12.0] n=25/500"),
        (
            _entry("undecided", -0.04, [-0.04, 0.03], 400, stopped="max samples"),
            True,
            "undecided 0.0 [0.0, 0.0] n=400/500",
        ),
        (_entry("undecided", None, None, 0, fixed=60, stopped="no shared samples"), True, "undecided n=0/60"),
        (_entry("within width", 96.0, [91.5, 99.5], 60), False, "within 96.0 [91.5, 99.5] n=60/500"),
        (
            _entry("undecided", 52.0, [40.0, 64.0], 500, stopped="pool used up"),
            False,
            "undecided 52.0 [40.0, 64.0] n=500/500",
        ),
        (None, True, "—"),
    ],
)
def test_cell_text_per_verdict(entry, paired, text):
    assert cell_text(entry, paired) == text


def test_average_counts_per_task():
    avg = _entry("better", 4.0, [0.5, 7.5], 30, fixed=1000, suite="ruler", tasks=["a", "b"])
    assert n_text(avg) == "n=30/500"
    assert n_text({**avg, "fixed_n": 1001}) == "n=30/500.5"  # tasks with unequal pools: the mean, not a rounding
    assert points(-0.04, True) == "0.0" and points(3.0, True) == "+3.0" and points(3.0, False) == "3.0"
    assert status({**avg, "verdict": "undecided", "stopped": "open"}) == "open"


def _block(**over):
    block = {
        "mode": "paired",
        "rule": {"name": "betting confidence sequence, without replacement"},
        "alpha": 0.05,
        "alpha_per_cell": 0.05 / 3,
        "cells_total": 3,
        "equivalence_margin": 20.0,
        "width": None,
        "round_size": 10,
        "max_samples": None,
        "rounds": 3,
        "samples": {"used": 60, "fixed": 120},
        "cells": {
            "niah_single_1": {"1024": _entry("better", 7.2, [1.1, 13.0], 30, fixed=60)},
            "vt": {"1024": _entry("undecided", 1.0, [-2.5, 4.4], 60, fixed=60, stopped="pool used up")},
            "average": {
                "1024": _entry(
                    "equivalent", 0.0, [-3.0, 3.0], 30, fixed=120, suite="custom", tasks=["niah_single_1", "vt"]
                )
            },
        },
        "against": {"name": "full", "path": "results/full", "evaluated": True},
    }
    return {**block, **over}


def test_rule_lines_name_rule_alpha_margin_other_run_and_ratio():
    first, second = rule_lines(_block())
    assert first == (
        "sequential: paired against full (results/full, its missing samples evaluated too) · "
        "samples 60 of the fixed protocol's 120 (0.50x) · 3 rounds of 10"
    )
    assert second == (
        "rule: betting confidence sequence, without replacement, anytime-valid; alpha 0.05 family-wise over 3 "
        "cells (Bonferroni: 0.017 each); equivalent = the interval inside ±20 points"
    )
    ro = _block(
        against={"name": "ext", "path": "x", "evaluated": False, "read_only": "an imported run"}, max_samples=40
    )
    assert "paired against ext (x, read-only: an imported run)" in rule_lines(ro)[0]
    assert rule_lines(ro)[0].endswith("3 rounds of 10, at most 40 a cell")
    width = rule_lines(_block(mode="width", width=10.0, equivalence_margin=None, against=None))
    assert width[0].startswith("sequential: until each cell's interval is narrower than 10 points · samples 60")
    assert "equivalent" not in width[1]


def _results(block=None, lengths=(1024,), tasks=("niah_single_1", "vt")):
    suite = {"tasks": list(tasks), "evaluated": list(tasks), "lengths": list(lengths), "per_task": {}, "per_length": {}}
    out = {"run": {"name": "anchor", "checkpoints": []}, "suites": {"custom": suite}}
    return {**out, "sequential": block} if block else out


def test_grid_has_the_scores_shape_and_the_header_lines():
    text = format_table(_results(_block(), lengths=(1024, 2048)))
    lines = text.splitlines()
    assert lines[1].startswith("sequential: paired against full") and lines[2].startswith("rule: ")
    at = next(i for i, x in enumerate(lines) if x.startswith("sequential verdicts"))
    assert "this run minus full, points" in lines[at] and "per task in the average" in lines[at]
    head, rule, r1, r2, rule2, avg, stops = lines[at + 1 : at + 8]
    assert head.split() == ["Task", "1K", "2K"] and set(rule) <= {"-", " "} and set(rule2) <= {"-", " "}
    assert r1.split("  ")[0] == "niah_single_1" and "better +7.2 [+1.1, +13.0] n=30/60" in r1 and r1.endswith("—")
    assert "undecided +1.0 [-2.5, +4.4] n=60/60" in r2
    assert avg.startswith("Average (custom)") and "equiv n=30/60" in avg
    assert stops == "stopped without a verdict: 1 x pool used up"


def test_no_block_no_lines_and_other_suites_average_left_out():
    assert not [x for x in format_table(_results()).splitlines() if x.startswith(("sequential", "rule:"))]
    block = _block()
    block["cells"]["average"]["1024"]["suite"] = "ruler"  # the average of another suite of the run
    rows = suite_rows(block, "custom", _results()["suites"]["custom"])
    assert [(t, avg) for t, avg, _ in rows] == [("niah_single_1", False), ("vt", False)]
    unrelated = _results(block, tasks=("cwe",))
    assert suite_rows(block, "custom", unrelated["suites"]["custom"]) == []
    assert "sequential verdicts" not in format_table(unrelated)
    opened = _block()
    opened["cells"]["vt"]["1024"]["stopped"] = "open"
    assert stop_line(opened) == "1 cell still open (the evaluation ended between rounds)"


def test_block_from_the_real_writer():
    """Comparison.record() as harness eval --against writes it: valid against the schema, and the table
    words each cell from its numbers."""
    tasks = ["niah_single_1", "vt", "cwe"]
    comp = Comparison(
        Rule(alpha=0.05, margin=20.0, round_size=10, max_samples=30), {(t, 1024): 60 for t in tasks}, {"custom": tasks}
    )
    value = {"niah_single_1": lambda i: 1.0, "vt": lambda i: 0.5, "cwe": lambda i: float(i % 2)}
    while (sel := comp.next_round()) is not None:
        comp.feed({(t, 1024): {i: value[t](i) for i in sel[t][1024]} for t in tasks})
    block = {**comp.record(), "against": {"name": "full", "path": "results/full", "evaluated": True}}
    Sequential.model_validate(block)
    cells = block["cells"]
    assert cells["niah_single_1"]["1024"]["verdict"] == "better" and cells["vt"]["1024"]["verdict"] == "equivalent"
    assert cells["cwe"]["1024"]["verdict"] == "undecided" and cells["cwe"]["1024"]["stopped"] == "max samples"
    text = format_table(_results(block, tasks=tasks))
    for task in tasks:
        e = cells[task]["1024"]
        assert f"{task}  " in text and f"n={e['n']}/60" in text
    better = cells["niah_single_1"]["1024"]
    lo, hi = better["interval"]
    assert f"better {better['estimate']:+.1f} [{lo:+.1f}, {hi:+.1f}] n={better['n']}/60" in text
    assert "equiv n=" in text and "stopped without a verdict: 1 x max samples" in text
    used, fixed = block["samples"]["used"], block["samples"]["fixed"]
    assert f"samples {used} of the fixed protocol's {fixed} ({used / fixed:.2f}x)" in text
