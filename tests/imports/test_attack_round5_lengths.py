"""One length rule for every reader (issue 49): `harness import`, the records `harness eval` and
`harness report` read, and the results.json `harness report` and `harness leaderboard` read. A
length-controlled task's length is one --lengths takes (250..1m); another task's is 0 or a token
budget (at most 2**24). Before, import accepted RULER at 0 and at 10^20 (a length-0 cell moved a
RULER average from 87.5 to 75.0), a HELMET file named _in99999999999999999999_ and a RULER
"Nulls 0/0" row (a score from no samples), all with exit 0; report and leaderboard averaged an
absurd per-task key in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.cli import main

from .formats import write_helmet, write_lm_eval, write_ruler

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from attack5_data import results, write_run


def _lm_eval_with(tmp_path, key: str) -> Path:
    path = write_lm_eval(tmp_path / "lm")
    data = json.loads(path.read_text())
    data["results"]["niah_single_1"][f"{key},none"] = 0.0
    bad = tmp_path / "lm-bad.json"
    bad.write_text(json.dumps(data))
    return bad


@pytest.mark.parametrize("key", ["0", "100000000000000000000", "100"])
def test_import_refuses_an_lm_eval_length_eval_would_not_run(key, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["import", str(_lm_eval_with(tmp_path, key)), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0, err
    assert f"niah_single_1: length {key} is outside 250..1048576" in err
    assert not out.exists()


def test_import_refuses_a_helmet_file_named_at_an_impossible_length(tmp_path, capsys):
    src = write_helmet(tmp_path / "helmet")[0]
    bad = src.with_name(src.name.replace("_in131072_", "_in99999999999999999999_"))
    src.rename(bad)
    assert main(["import", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "helmet_json_kv: length 99999999999999999999 is outside" in err and err.count("\n") == 0


def test_import_refuses_a_ruler_score_of_no_samples(tmp_path, capsys):
    path = write_ruler(tmp_path / "ruler")[0]
    path.write_text(path.read_text().replace("0/500", "0/0", 1))
    assert main(["import", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "'0/0': a score of no samples" in err and err.count("\n") == 0


def test_the_files_as_their_harnesses_write_them_still_import(tmp_path, capsys):
    for i, files in enumerate(
        ([write_lm_eval(tmp_path / "lm")], write_ruler(tmp_path / "ruler"), write_helmet(tmp_path / "helmet"))
    ):
        assert main(["import", *map(str, files), "--out", str(tmp_path / f"out{i}")]) == 0, capsys.readouterr().err


def _with_cell(length: str):
    def edit(d):
        s = d["suites"]["ruler"]
        s["per_task"]["vt"][length] = s["per_task"]["vt"]["4096"]
        s["lengths"] = sorted({*s["lengths"], int(length)})

    return edit


@pytest.mark.parametrize("length", ["0", "100", "99999999999999999999"])
@pytest.mark.parametrize("command", ["report", "report-latex", "leaderboard"])
def test_report_and_leaderboard_refuse_a_cell_no_task_can_have(length, command, tmp_path, capsys):
    run = write_run(tmp_path / "run", results("bad", _with_cell(length)))
    argv = {
        "report": ["report", str(run)],
        "report-latex": ["report", str(run), "--format", "latex"],
        "leaderboard": ["leaderboard", str(run), "--out", str(tmp_path / "site")],
    }[command]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0, err
    assert length in err and captured.out == ""
    assert not (tmp_path / "site").exists()


def test_a_short_task_at_length_0_is_still_read(tmp_path, capsys):
    """0 is the length of prompts with no context to fit (MMLU): allowed where the task is not
    length-controlled."""

    def mmlu(d):
        d["suites"]["short"] = json.loads(json.dumps(d["suites"]["ruler"]))
        s = d["suites"]["short"]
        s.update(tasks=["mmlu"], evaluated=["mmlu"], lengths=[0])
        s["per_task"] = {"mmlu": {"0": s["per_task"]["vt"]["4096"]}}
        s["per_length"] = {"0": s["per_length"]["4096"]}

    run = write_run(tmp_path / "run", results("short", mmlu))
    assert main(["report", str(run)]) == 0, capsys.readouterr().err


def test_records_at_such_lengths_are_left_out_by_eval_and_report():
    """The store's reader applies the same rule (harness.pipeline.record_checks)."""
    from harness.pipeline.record_checks import split_inconsistent

    base = {"task": "vt", "metric": "string_match_all", "suite": "ruler", "num_tokens": 10, "settings": {}}
    kept, report = split_inconsistent([dict(base, length=4096), dict(base, length=0), dict(base, length=10**20)])
    assert [r["length"] for r in kept] == [4096]
    assert report is not None and report["count"] == 2
    assert any("length 0 is outside 250..1048576" in reason for reason in report["reasons"])


def test_the_rule():
    from harness.core.lengths import length_problem

    assert length_problem(4096, True) is None and length_problem(0, False) is None
    assert length_problem(2**24, False) is None and "outside" in length_problem(2**24 + 1, False)
    assert "outside 250..1048576" in length_problem(249, True) and "outside" in length_problem(2**20 + 1, True)
    assert "whole number" in length_problem(True, False)
