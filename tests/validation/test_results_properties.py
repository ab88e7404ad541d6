"""results.json readers on damaged files: the one schema accepts a file or says what is wrong in one
line; a file it accepts never crashes report, plan or the leaderboard, and holds no out-of-range value.

The valid file is the aggregator's own output (per-sample blocks, intervals, heatmap, throughput,
a perplexity task); hypothesis damages it (tests/validation/mutations.py) and every consumer runs.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings

from harness.core.errors import UserError
from harness.core.results_schema import validate_results
from harness.pipeline.aggregate import aggregate

from .mutations import mutated_json, one_line

STEPS = [10, 20]


def _records() -> list[dict]:
    rng = random.Random(0)
    out = []
    for step in STEPS:
        ckpt = {"path": f"runs/r/ckpt-{step}", "step": step, "fingerprint": f"fp{step}"}
        for task, L in (("niah_single_1", 1024), ("niah_single_1", 2048), ("vt", 1024), ("vt", 2048)):
            for i in range(4):
                meta: dict = {"references": ["123"], "answer_depths": [rng.uniform(0, 100)]}
                out.append(_rec(ckpt, "ruler", task, L, i, float(rng.random() < 0.6), meta))
        for i in range(3):
            nll, tokens = rng.uniform(50, 90), 40
            meta = {"nll": nll, "tokens": tokens}
            out.append(_rec(ckpt, "ppl", "ppl", 1024, i, math.exp(-nll / tokens), meta))
    return out


def _rec(ckpt, suite, task, L, i, score, meta) -> dict:
    return {
        "type": "sample",
        "run": "r",
        "checkpoint": ckpt,
        "suite": suite,
        "task": task,
        "task_version": "1",
        "length": L,
        "index": i,
        "seed": 42,
        "dataset_hash": "h",
        "prediction": "123" if score == 1.0 else "x",
        "score": score,
        "metric": "string_match_all",
        "num_tokens": L,
        "settings": {},
        "metadata": meta,
        "eval_seconds": 0.01,
    }


def _valid() -> dict:
    suites = {
        "ruler": {"tasks": ["niah_single_1", "vt"], "excluded": [], "unavailable": {}, "lengths": [1024, 2048]},
        "ppl": {"tasks": ["ppl"], "excluded": [], "unavailable": {}, "lengths": [1024]},
    }
    ckpts = [{"path": f"runs/r/ckpt-{s}", "step": s, "fingerprint": f"fp{s}", "training": None} for s in STEPS]
    run = {"name": "r", "model": "runs/r", "mode": "anchor", "checkpoints": ckpts}
    return aggregate(_records(), suites, run, {"package_version": "0", "git_hash": None, "backend": "hf"})


VALID = _valid()


def test_the_aggregators_output_is_valid():
    assert validate_results(VALID, "r.json") is VALID
    suite = VALID["suites"]["ruler"]
    assert suite["samples"]["vt"]["1024"]["scores"] and "depth_heatmap" in suite
    assert VALID["suites"]["ppl"]["samples"]["ppl"]["1024"]["nll"]


def _consume(data: dict, tmp_dir) -> None:
    """Everything that reads a results.json: the table, the threshold recomputation, plan, and the
    leaderboard (model, intervals, HTML, CSV, JSON, Markdown), alone and paired with the valid run."""
    import copy
    import json

    from harness.commands.plan import plan
    from harness.pipeline.aggregate import apply_threshold
    from harness.pipeline.table import format_table
    from leaderboards.build import build
    from leaderboards.export import to_csv, to_json, to_markdown
    from leaderboards.render import render_html

    format_table(data)
    format_table(apply_threshold(data, 50.0))
    plan(data, None, 5.0, 0.05, 0.8, None)
    plan(data, VALID, 5.0, 0.05, 0.8, 3)
    other = copy.deepcopy(VALID)
    other["run"]["name"] = "base"
    for runs, baseline in (([data], None), ([other, data], "base")):
        runs = [{**json.loads(json.dumps(r)), "sources": ["x"]} for r in runs]
        board = build(runs, baseline=baseline, threshold=None, title="t")
        render_html(board)
        for view in ("scores", "delta") if baseline else ("scores",):
            to_csv(board, view)
            to_markdown(board, view)
        to_json(board)


def _in_range(data: dict) -> None:
    """What an accepted file must hold (checked here by hand, independently of the schema)."""
    for suite in data["suites"].values():
        for by_len in (suite.get("samples") or {}).values():
            for block in by_len.values():
                n = len(block["index"])
                assert len(set(block["index"])) == n and all(isinstance(i, int) and i >= 0 for i in block["index"])
                for field in ("scores", "nll", "tokens"):
                    for values in (block.get(field) or {}).values():
                        assert len(values) == n
                        for v in values:
                            assert v is None or (not isinstance(v, bool) and math.isfinite(v) and v >= 0)
                            if field == "scores":
                                assert v is None or v <= 1
        for L in suite["lengths"]:
            assert isinstance(L, int) and not isinstance(L, bool) and L >= 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=mutated_json(VALID))
def test_damaged_results_are_refused_in_one_line_or_read_safely(doc, tmp_path_factory):
    try:
        data = validate_results(doc, "results.json")
    except UserError as exc:
        one_line(exc)
        return
    _in_range(data)
    try:
        _consume(data, None)
    except UserError as exc:  # a consumer's own check (e.g. a threshold), still one line
        one_line(exc)


@pytest.mark.parametrize("where", ["scores", "nll"])
def test_a_value_out_of_range_in_any_block_is_refused(where):
    import copy

    doc = copy.deepcopy(VALID)
    suite, task = ("ruler", "vt") if where == "scores" else ("ppl", "ppl")
    block = doc["suites"][suite]["samples"][task]["1024"]
    label = next(iter(block[where]))
    block[where][label][0] = 1.5 if where == "scores" else -1.0
    with pytest.raises(UserError, match=rf"samples\.{task}\.1024\.{where}\.{label}\.0"):
        validate_results(doc, "r.json")


@pytest.mark.parametrize(
    "value",
    ["85%", {"base_score": "high"}, {"base_score": 40.0, "base_lengths": ["1k"]}, {"base_score": 40.0, "fraction": 2}],
)
def test_a_damaged_nolima_effective_length_is_refused_in_one_line(value):
    """summary.effective_length_nolima is read by the table and the leaderboard; a damaged one (a
    hypothesis find: a string there crashed the leaderboard's columns) is refused at the boundary."""
    import copy

    doc = copy.deepcopy(VALID)
    doc["suites"]["ruler"]["summary"]["effective_length_nolima"] = value
    with pytest.raises(UserError, match=r"summary\.effective_length_nolima") as exc:
        validate_results(doc, "r.json")
    one_line(exc.value)
    good = copy.deepcopy(VALID)
    good["suites"]["ruler"]["summary"]["effective_length_nolima"] = {
        "rule": "nolima", "fraction": 0.85, "base_lengths": [1024], "base_score": 40.0,
        "threshold": 34.0, "value": 2048, "label": "2K",
    }  # fmt: skip
    assert validate_results(good, "r.json") is good


@pytest.mark.parametrize(
    ("key", "value"),
    [("max_new_tokens", 64), ("system_prompt", 7), ("endpoint", "http://x"), ("strip_thinking", "yes")],
)
def test_provenance_fields_the_table_reads_are_typed(key, value):
    """The report's controls line reads these (harness/pipeline/table.py); hand-edited to another type
    they are one line at the boundary, not a crash in the report."""
    import copy

    from harness.pipeline.table import format_table

    doc = copy.deepcopy(VALID)
    doc["provenance"][key] = value
    with pytest.raises(UserError, match=rf"provenance\.{key}") as exc:
        validate_results(doc, "r.json")
    one_line(exc.value)
    good = copy.deepcopy(VALID)
    good["provenance"].update(max_new_tokens={"*": 64}, system_prompt="Be brief.", strip_thinking=True)
    assert "max_new_tokens 64" in format_table(validate_results(good, "r.json"))
