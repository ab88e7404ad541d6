"""`--suite X --tasks T` (issue 49, open since earlier rounds): the suite was dropped in silence (an
unknown X accepted; T outside X filed as "custom"; T inside X filed as all of X, an average over T
shown as X's). Now T must be tasks of a known X, and the run is X with its other tasks excluded:
its table counts k of X's N tasks."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from tasks.registry import all_suites


def _eval(model, out, *flags):
    return main(["eval", "--ckpts", str(model), *flags, "--lengths", "1k", "--samples", "1", "--out", str(out),
                 "--no-progress"])  # fmt: skip


def test_tasks_of_the_suite_are_the_suite_with_the_rest_excluded(tiny_llama_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert _eval(tiny_llama_dir, out, "--suite", "ruler", "--tasks", "vt") == 0
    suites = json.loads((out / "results.json").read_text())["suites"]
    assert list(suites) == ["ruler"]
    ruler = suites["ruler"]
    assert ruler["tasks"] == all_suites()["ruler"] and ruler["evaluated"] == ["vt"]
    assert sorted(ruler["excluded"]) == sorted(t for t in all_suites()["ruler"] if t != "vt")
    assert ruler["summary"]["tasks_covered"] == 1 and ruler["summary"]["tasks_total"] == 13
    assert "Average (1/13)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (["--suite", "ruler", "--tasks", "vt,mmlu"], "--tasks names 'mmlu', which is not in --suite ruler"),
        (["--suite", "no_such_suite", "--tasks", "vt"], "unknown suite 'no_such_suite'"),
        (["--suite", "ruler", "--tasks", "vt,vt"], "names 'vt' twice"),
    ],
)
def test_a_suite_that_does_not_hold_the_tasks_is_one_line(flags, phrase, tiny_llama_dir, tmp_path, capsys):
    assert _eval(tiny_llama_dir, tmp_path / "out", *flags) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and phrase in err and err.count("\n") == 0, err
    assert not (tmp_path / "out").exists()


def test_narrow_suite_keeps_the_other_forms():
    from tasks.registry import narrow_suite

    assert narrow_suite("ruler", [], ["vt"]) == ("ruler", [], ["vt"])
    assert narrow_suite(None, ["vt"], []) == (None, ["vt"], [])
    suite, tasks, exclude = narrow_suite("ruler", ["vt", "cwe"], ["qa_1"])
    assert (suite, tasks) == ("ruler", []) and exclude[0] == "qa_1" and "vt" not in exclude and "cwe" not in exclude
    assert len(exclude) == 11
