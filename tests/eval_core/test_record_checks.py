"""Records whose fields contradict themselves (harness/pipeline/record_checks.py), read back from a
hand-edited samples.jsonl: each contradiction is reported with its reason and left out of every
average, exactly as if its line were deleted; a valid store reports none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.errors import UserError
from harness.core.results_schema import validate_results
from harness.pipeline.reaggregate import results_from_store
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.store import ResultStore
from tasks.registry import all_suites, get_task

CKPTS = [{"path": f"runs/r/ckpt-{s}", "step": s, "fingerprint": f"fp{s}"} for s in (10, 20)]
# (suite, task, protocol or None, length, num_tokens): what eval writes for each family (a
# NoLiMa reference length is the haystack alone, so its prompt is longer; a 0K prompt has tokens
# at length 0; LongBench's reference length is a prompt budget, any value).
CELLS = [
    ("ruler", "vt", None, 4096, 3900),
    ("nolima", "nolima", "reference", 1000, 1310),
    ("nolima", "nolima", "exact-length", 1024, 800),
    ("babilong", "babilong_qa1", "reference", 2048, 1800),
    ("babilong", "babilong_qa1", "exact-length", 1536, 1500),
    ("babilong-0k", "babilong_0k_qa1", "reference", 0, 120),
    ("helmet", "helmet_json_kv", "reference", 8192, 8000),
    ("short", "mmlu", None, 0, 700),
    ("longbench-v2-nocontext", "longbench_v2_nocontext_easy_short", "reference", 0, 300),
    ("longbench", "trec", "reference", 3500, 3400),
]


def _records() -> list[dict]:
    out = []
    for suite, task, protocol, length, num_tokens in CELLS:
        for ckpt in CKPTS:
            for index, score in enumerate((1.0, 0.0)):
                out.append(
                    {
                        "type": "sample",
                        "run": "r",
                        "checkpoint": ckpt,
                        "suite": suite,
                        "task": task,
                        "task_version": get_task(task).version,
                        "length": length,
                        "index": index,
                        "seed": 42,
                        "dataset_hash": "h",
                        "prediction": "an answer",
                        "score": score,
                        "metric": get_task(task).metric,
                        "num_tokens": num_tokens,
                        "settings": {"protocol": protocol} if protocol else {},
                        "metadata": {},
                    }
                )
    return out


def _store(folder: Path, records: list[dict]) -> Path:
    path = folder / "samples.jsonl"
    ResultStore(path).append(records)
    return path


def _hand_edit(path: Path, line_no: int, edit) -> None:
    """Rewrite line `line_no` (1 = the header) of the store with `edit` applied to its record."""
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[line_no - 1])
    edit(record)
    lines[line_no - 1] = json.dumps(record) + "\n"
    path.write_text("".join(lines))


def _delete_line(path: Path, line_no: int) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: line_no - 1] + lines[line_no:]))


def _line_of(records: list[dict], task: str, protocol: str | None = None) -> int:
    """The store line of the first record of `task` (under `protocol`), header counted."""
    for i, r in enumerate(records):
        if r["task"] == task and r["settings"].get("protocol") == protocol:
            return i + 2
    raise AssertionError(task)


def _set(field: str, value):
    def edit(r: dict) -> None:
        r[field] = value

    return edit


def _set_protocol(value: str):
    def edit(r: dict) -> None:
        r["settings"]["protocol"] = value

    return edit


def _without(results: dict) -> dict:
    """The results but for what names the store (its path, the time its header was written: the two
    stores compared are written one after the other, a second apart on a loaded machine) and the
    report itself."""
    out = {k: v for k, v in results.items() if k != "inconsistent_records"}
    out["provenance"] = {k: v for k, v in results["provenance"].items() if k not in ("source", "created")}
    return out


def test_a_valid_store_reports_none(tmp_path):
    records = _records()
    assert split_inconsistent(records) == (records, None)
    results = results_from_store(_store(tmp_path, records), suite_tasks=all_suites())
    assert "inconsistent_records" not in results
    assert set(results["suites"]) == {suite for suite, *_ in CELLS}


PLANTED = [
    ("vt", None, _set("suite", "longbench"), "suite 'longbench' does not hold task 'vt'"),
    ("vt", None, _set("metric", "acc"), "metric 'acc' is not vt's ('string_match_all')"),
    (
        "nolima",
        "reference",
        _set_protocol("exact"),
        "protocol 'exact' is not one nolima offers (reference, exact-length)",
    ),
    (
        "mmlu",
        None,
        _set("length", 4096),
        "length 4096 is not one mmlu can have (0 only: its prompts have no context to fit)",
    ),
    (
        "longbench_v2_nocontext_easy_short",
        "reference",
        _set("length", 8192),
        (
            "length 8192 is not one longbench_v2_nocontext_easy_short can have under protocol 'reference' "
            "(0 only: its prompts have no context to fit)"
        ),
    ),
    (
        "nolima",
        "reference",
        _set("length", 1024),
        (
            "length 1024 is not one nolima can have under protocol 'reference' "
            "(NoLiMa's haystack sizes: multiples of 250 tokens)"
        ),
    ),
    (
        "helmet_json_kv",
        "reference",
        _set("length", 12000),
        (
            "length 12000 is not one helmet_json_kv can have under protocol 'reference' "
            "(HELMET's config lengths: 8192, 16384, 32768, 65536, 131072)"
        ),
    ),
    (
        "babilong_qa1",
        "reference",
        _set("length", 3000),
        (
            "length 3000 is not one babilong_qa1 can have under protocol 'reference' (the released sets' lengths: "
            "0, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)"
        ),
    ),
    (
        "vt",
        None,
        _set("num_tokens", 4097),
        "num_tokens 4097 exceeds length 4096, vt's whole budget (prompt + generation)",
    ),
    (
        "babilong_qa1",
        "exact-length",
        _set("num_tokens", 2000),
        (
            "num_tokens 2000 exceeds length 1536, babilong_qa1's whole budget (prompt + generation) "
            "under protocol 'exact-length'"
        ),
    ),
]


@pytest.mark.parametrize(("task", "protocol", "edit", "reason"), PLANTED, ids=[p[3][:40] for p in PLANTED])
def test_a_planted_contradiction_is_reported_and_left_out(tmp_path, task, protocol, edit, reason):
    records = _records()
    line = _line_of(records, task, protocol)
    edited = _store(tmp_path / "edited", records)
    _hand_edit(edited, line, edit)
    deleted = _store(tmp_path / "deleted", records)
    _delete_line(deleted, line)

    results = results_from_store(edited, suite_tasks=all_suites())
    assert results["inconsistent_records"] == {"count": 1, "reasons": {reason: 1}}
    # left out of every average, the suites and the provenance: as if the line were not there
    assert _without(results) == _without(results_from_store(deleted, suite_tasks=all_suites()))
    validate_results(json.loads(json.dumps(results)), "the re-aggregated store")


def test_reasons_are_counted(tmp_path):
    records = _records()
    path = _store(tmp_path, records)
    for r in range(2):  # both samples of checkpoint 10's vt cell
        _hand_edit(path, _line_of(records, "vt") + r, _set("metric", "acc"))
    _hand_edit(path, _line_of(records, "mmlu"), _set("length", 1024))
    report = results_from_store(path)["inconsistent_records"]
    assert report["count"] == 3
    assert list(report["reasons"].values()) == [2, 1]


def test_a_store_of_contradictions_only_is_one_line(tmp_path):
    records = [r for r in _records() if r["task"] == "mmlu"]
    for r in records:
        r["length"] = 2048
    with pytest.raises(UserError) as err:
        results_from_store(_store(tmp_path, records))
    message = str(err.value)
    assert "every record contradicts itself" in message and "length 2048 is not one mmlu" in message
    assert "\n" not in message


def test_what_cannot_be_checked_is_not_reported():
    """A task the registry does not know (renamed, or registered at run time: filed as "custom") and
    a protocol-less record of a task with protocols (written before protocols existed) have nothing
    to contradict. (Under a registry suite that lacks it, an unknown task is a contradiction:
    tests/eval_core/test_attack_round5_unknown_task.py.)"""
    records = _records()
    unknown = dict(records[0], task="a_task_of_another_harness", metric="whatever", length=7, suite="custom")
    older = dict(next(r for r in records if r["task"] == "nolima"), settings={}, length=1024)
    assert split_inconsistent([unknown, older]) == ([unknown, older], None)


def test_the_terminal_table_names_them(tmp_path):
    """`harness report` (and eval's table) says how many records were left out, and why."""
    from harness.pipeline.table import format_table

    records = _records()
    path = _store(tmp_path, records)
    _hand_edit(path, _line_of(records, "vt"), _set("metric", "acc"))
    text = format_table(results_from_store(path))
    (warning,) = [line for line in text.splitlines() if "contradict themselves" in line]
    assert warning.startswith("warning: 1 record(s)") and "left out of every average" in warning
    clean = format_table(results_from_store(_store(tmp_path / "clean", records)))
    assert "contradict themselves" not in clean


@pytest.mark.parametrize(
    ("suite", "tasks", "label"),
    [("ruler", ["vt"], "ruler"), (None, ["vt"], "custom"), ("ruler", [], "ruler")],
)
def test_eval_labels_records_with_a_suite_only_when_it_holds_their_tasks(suite, tasks, label):
    """Records carry --suite's name only when every task is in it (`--suite X --tasks T` with T
    outside X is refused: tests/cli/test_attack_round5_suite_tasks.py): never a record its own suite
    check would flag."""
    from harness.pipeline.eval_config import EvalConfig
    from harness.pipeline.planning import _resolve_tasks

    got, _, _, _ = _resolve_tasks(EvalConfig(ckpts="unused", suite=suite, tasks=tasks))
    assert got == label
