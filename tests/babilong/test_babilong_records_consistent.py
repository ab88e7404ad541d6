"""What harness eval writes for BABILong is never reported as contradicting itself
(harness/pipeline/record_checks.py): the released sets' lengths under "reference", 0 for the 0K
tasks, budgets the prompt fits under "exact-length"."""

from __future__ import annotations

from harness.cli import main
from harness.pipeline.reaggregate import results_from_store
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.store import read_store
from tasks.babilong import data, released
from tasks.registry import all_suites

from .helpers import RELEASED, write_babi, write_pg19


def _eval(ckpt, out, *extra: str) -> list[dict]:
    argv = ["eval", "--ckpts", str(ckpt), "--out", str(out), "--no-progress", "--samples", "1", *extra]
    try:
        assert main(argv) == 0
    finally:
        data.clear_caches()
        released.clear_caches()
    _, records = read_store(out / "samples.jsonl")
    assert split_inconsistent(records) == (records, None)
    assert "inconsistent_records" not in results_from_store(out / "samples.jsonl", suite_tasks=all_suites())
    return records


def test_babilong_records_are_consistent(tiny_llama_dir, tmp_path):
    records = _eval(
        tiny_llama_dir, tmp_path / "ref", "--suite", "babilong", "--babilong-data", str(RELEASED / "babilong")
    )
    assert {r["length"] for r in records} == {0, 1024, 2048}
    src = tmp_path / "data"
    write_babi(src)
    write_pg19(src)
    exact = ["--protocol", "exact-length", "--babilong-data", str(src)]
    records = _eval(
        tiny_llama_dir, tmp_path / "exact", "--tasks", "babilong_qa1,babilong_qa2", "--lengths", "1k", *exact
    )
    assert {r["length"] for r in records} == {1024}
    records = _eval(tiny_llama_dir, tmp_path / "zero", "--suite", "babilong-0k", *exact)
    assert {r["length"] for r in records} == {0}
