"""The terminal table (harness/pipeline/table.py) and `harness report` (harness/commands/report.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_aggregate import PROV, RUN, SUITES, make_records

from harness.cli import main
from harness.core.results_file import write_results
from harness.pipeline.aggregate import aggregate
from harness.pipeline.store import ResultStore
from harness.pipeline.table import format_table


def stats(mean, std, n=2, **extra):
    return {
        "mean": mean,
        "std": std,
        "min": mean - std,
        "max": mean + std,
        "n": n,
        "steps": [1990, 2000][:n],
        "per_step": {},
        **extra,
    }


# A hand-written results.json: one task missing at 8K, one partial cell, one unavailable task.
RESULTS = {
    "schema_version": 1,
    "run": {
        "name": "anchor",
        "model": "runs/anchor",
        "mode": "anchor",
        "checkpoints": [
            {"path": "runs/anchor/ckpt-1990", "step": 1990, "fingerprint": "a", "training": None},
            {"path": "runs/anchor/ckpt-2000", "step": 2000, "fingerprint": "b", "training": None},
        ],
    },
    "provenance": {
        "package_version": "0.1.0",
        "git_hash": "0123456789abcdef0123",
        "backend": "hf",
        "dtype": "float32",
        "batch_size": 8,
        "max_model_len": 8192,
        "rope_theta": None,
        "template": "none",
        "created": "2026-01-02T03:04:05Z",
    },
    "suites": {
        "ruler": {
            "tasks": ["niah_single_1", "vt", "qa_1"],
            "evaluated": ["niah_single_1", "vt"],
            "excluded": [],
            "unavailable": {"qa_1": "SQuAD v2 dev not found: pass --squad PATH"},
            "lengths": [4096, 8192],
            "per_task": {
                "niah_single_1": {"4096": stats(97.25, 1.125), "8192": stats(90.0, 0.0, n=1)},
                "vt": {"4096": stats(80.0, 2.0)},
            },
            "per_length": {
                "4096": stats(88.625, 0.5, tasks_covered=2, tasks_total=3),
                "8192": stats(90.0, 0.0, n=1, tasks_covered=1, tasks_total=3),
            },
            "summary": {
                "effective_length": {"threshold": 85.6, "value": 8192, "label": "8K"},
                "tasks_covered": 1,
                "tasks_total": 3,
                "lengths_covered": 2,
                "lengths_total": 2,
            },
        }
    },
}

EXPECTED = """\
run anchor · model runs/anchor · mode anchor · 2 checkpoints (steps 1990, 2000)
backend hf · dtype float32 · batch 8 · max_model_len 8192 · template none · harness 0.1.0 (0123456789ab) · created 2026-01-02T03:04:05Z

ruler · tasks 2/3 · effective length 8K (threshold 85.6)
unavailable: qa_1 (SQuAD v2 dev not found: pass --squad PATH)
Task                  4K              8K  Avg  wAvg(inc)  wAvg(dec)
-------------  ---------  --------------  ---  ---------  ---------
niah_single_1  97.2 ±1.1        90.0 n=1    —          —          —
vt             80.0 ±2.0               —    —          —          —
-------------  ---------  --------------  ---  ---------  ---------
Average (2/3)  88.6 ±0.5  90.0 n=1 [1/3]    —          —          —"""


def test_format_table_reference_string():
    out = format_table(RESULTS)
    assert out == EXPECTED, out


def test_format_table_shows_dashes_never_zero():
    res = aggregate(make_records({("A", 4096): (100, 50, 75)}), SUITES, RUN, PROV)
    out = format_table(res)
    assert "A  " in out and "75.0 ±25.0" in out and "tasks 1/4" in out
    assert "excluded: C" in out and "unavailable: D (data not found: pass --d PATH)" in out
    row = next(line for line in out.splitlines() if line.startswith("A "))
    # (its 95% interval reaches 100: the cell is marked at its ceiling)
    assert row.split()[3] == "(ceiling)" and row.split()[4:] == ["—", "—", "—", "—"] and " 0.0" not in out


def test_report_prints_results_json_and_run_dir(tmp_path, capsys):
    path = tmp_path / "anchor" / "results.json"
    write_results(path, RESULTS)
    assert main(["report", str(path)]) == 0
    assert capsys.readouterr().out == format_table(RESULTS) + "\n"
    assert main(["report", str(path.parent), str(path)]) == 0
    assert capsys.readouterr().out == format_table(RESULTS) + "\n\n" + format_table(RESULTS) + "\n"
    assert main(["report", str(path), "--threshold", "95"]) == 0
    assert "effective length below the first length (threshold 95)" in capsys.readouterr().out


def test_report_reaggregates_a_store(tmp_path, capsys):
    store = ResultStore(tmp_path / "r" / "samples.jsonl")
    store.append(make_records())
    assert main(["report", str(tmp_path / "r")]) == 0  # no results.json: the store is read
    out = capsys.readouterr().out
    expected = aggregate(make_records(), {"handmade": {"tasks": ["A", "B"], "lengths": [4096, 8192]}}, RUN, PROV)
    row = lambda text: next(line for line in text.splitlines() if line.startswith("Average"))
    assert row(out) == row(format_table(expected))
    assert "3 checkpoints (steps 10, 20, 30)" in out
    assert main(["report", str(tmp_path / "r" / "samples.jsonl"), "--threshold", "70"]) == 0
    assert "effective length 4K (threshold 70)" in capsys.readouterr().out


def test_report_names_a_plain_model_folder_not_its_parent(tmp_path, capsys):
    """A base model whose name ends in digits (SmolLM2's GGUF folder ends in "Q4_1") is the model
    itself, not "step 1" of a run named after the folder it sits in; a run's ckpt-N stays a step."""
    base = {"path": "runs/demo/models/SmolLM2-135M-Instruct.Q4_1", "step": 1, "fingerprint": "fpb"}  # as stored before
    store = ResultStore(tmp_path / "b" / "samples.jsonl")
    store.append(make_records(ckpts=[base]))
    assert main(["report", str(tmp_path / "b")]) == 0
    assert "model runs/demo/models/SmolLM2-135M-Instruct.Q4_1 ·" in capsys.readouterr().out
    store = ResultStore(tmp_path / "r" / "samples.jsonl")
    store.append(make_records())
    assert main(["report", str(tmp_path / "r")]) == 0
    assert "model runs/r ·" in capsys.readouterr().out


def test_report_names_the_model_as_eval_did(tmp_path, capsys):
    """A re-aggregated store names the model the records name (eval's run.model), and a hub name whose
    revision reads like a step (pythia's @step143000) is the model, not step 143000 of its org."""
    hub = {
        "path": "EleutherAI/pythia-160m@step143000",
        "step": None,
        "fingerprint": "hub:EleutherAI/pythia-160m@step143000",
    }
    store = ResultStore(tmp_path / "h" / "samples.jsonl")
    store.append(make_records(ckpts=[hub]))
    assert main(["report", str(tmp_path / "h")]) == 0
    out = capsys.readouterr().out
    assert "model EleutherAI/pythia-160m@step143000 ·" in out and "step 143000" not in out
    packaged = {"path": "/cache/SmolLM2-135M-Instruct.Q4_1.gguf", "step": None, "fingerprint": "fpg"}
    records = make_records(ckpts=[packaged])
    for r in records:  # as eval stores them (Checkpoint.ref): the packaged name, not the file
        r["checkpoint"]["model"] = "smollm2-135m-instruct"
    store = ResultStore(tmp_path / "g" / "samples.jsonl")
    store.append(records)
    assert main(["report", str(tmp_path / "g")]) == 0
    assert "model smollm2-135m-instruct ·" in capsys.readouterr().out


def test_report_drops_a_step_older_stores_gave_a_model_folder(tmp_path, capsys):
    base = {"path": "runs/demo/models/SmolLM2-135M-Instruct.Q4_1", "step": 1, "fingerprint": "fpb"}  # as stored before
    store = ResultStore(tmp_path / "b" / "samples.jsonl")
    store.append(make_records(ckpts=[base]))
    assert main(["report", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "(steps 1)" not in out and "1 checkpoint" in out


@pytest.mark.parametrize("content", [None, "not json at all", '{"hello": 1}', '{"schema_version": 7, "suites": {}}'])
def test_report_unreadable_file_exits_2_with_one_line(tmp_path, capsys, content):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "results.json" in err


def test_report_bad_dir_and_corrupt_store_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "neither results.json nor samples.jsonl" in capsys.readouterr().err
    store = tmp_path / "samples.jsonl"
    ResultStore(store).append(make_records()[:2])
    with open(store, "a") as f:
        f.write("garbage\n" + json.dumps(make_records()[2]) + "\n")
    assert main(["report", str(tmp_path)]) == 2
    assert "line 4 is corrupt" in capsys.readouterr().err


def test_format_table_shows_the_intervals():
    res = aggregate(make_records({("A", 4096): (100, 50, 75)}), SUITES, RUN, PROV)
    cell = res["suites"]["handmade"]["per_task"]["A"]["4096"]
    out = format_table(res)
    interval = f"[{cell['ci_low']:.1f}, {cell['ci_high']:.1f}]"
    rows = [line for line in out.splitlines() if line.startswith("A ")]
    assert rows[0].split()[1:3] == ["75.0", "±25.0"] and interval in rows[1]
    assert rows[1].split()[3:] == ["—", "—", "—", "—"]
    assert "intervals: 95% percentile bootstrap of each mean (2000 resamples" in out
    assert cell["ci_low"] < 75 < cell["ci_high"]
