"""A record of a task this harness does not know (issue 49, open since earlier rounds): filed under
a registry suite that lacks it ("ruler"), it was reported as one of that suite's tasks and moved the
suite's headline; now it contradicts its suite and is left out and counted, as a known task would
be. Filed as "custom" (a task registered at run time through the Python API, a renamed task), it
has nothing to contradict and is read as stored."""

from __future__ import annotations

from harness.cli import main
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.store import ResultStore


def _record(task: str, suite: str, score: float, index: int = 0) -> dict:
    return {
        "type": "sample",
        "run": "r",
        "checkpoint": {"path": "runs/r/ckpt-10", "step": 10, "fingerprint": "fp10", "training": None},
        "suite": suite,
        "task": task,
        "task_version": "1",
        "length": 4096,
        "index": index,
        "seed": 42,
        "dataset_hash": "h",
        "prediction": "an answer",
        "score": score,
        "metric": "string_match_all",
        "num_tokens": 3900,
        "settings": {},
        "metadata": {},
    }


def test_an_unknown_task_under_a_registry_suite_contradicts_it():
    from tasks.registry import get_task

    vt = dict(_record("vt", "ruler", 0.0), task_version=get_task("vt").version)
    stray = _record("zz_not_a_task", "ruler", 1.0, index=1)
    kept, report = split_inconsistent([vt, stray])
    assert kept == [vt]
    assert report == {"count": 1, "reasons": {"suite 'ruler' does not hold task 'zz_not_a_task'": 1}}


def test_report_leaves_it_out_of_the_suite_and_says_so(tmp_path, capsys):
    from tasks.registry import get_task

    path = tmp_path / "samples.jsonl"
    version = get_task("vt").version
    ResultStore(path).append(
        [dict(_record("vt", "ruler", 0.0, i), task_version=version) for i in range(2)]
        + [_record("zz_not_a_task", "ruler", 1.0, i) for i in range(2)]
    )
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "zz_not_a_task" not in [line.split(" ")[0] for line in out.splitlines()]  # no row of it
    assert "2 record(s) contradict themselves" in out and "suite 'ruler' does not hold task 'zz_not_a_task'" in out
    assert main(["report", str(path), "--format", "latex"]) == 0  # and the exports carry the warning
    assert "contradict themselves" in capsys.readouterr().out


def test_an_unknown_task_filed_as_custom_is_read_as_stored(tmp_path, capsys):
    path = tmp_path / "samples.jsonl"
    ResultStore(path).append([_record("zz_registered_elsewhere", "custom", 1.0, i) for i in range(2)])
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("zz_registered_elsewhere") for line in out.splitlines())
    assert "contradict" not in out
