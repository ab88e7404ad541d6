"""What harness eval writes for LongBench v2 is never reported as contradicting itself
(harness/pipeline/record_checks.py): the no-context variant at length 0, the others at the budget
the run chose."""

from __future__ import annotations

from harness.cli import main
from harness.pipeline.reaggregate import results_from_store
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.store import read_store
from tasks.longbench_v2 import data
from tasks.registry import all_suites

from .helpers import write_data


def test_lbv2_records_are_consistent(tiny_llama_dir, tmp_path):
    folder = tmp_path / "lbv2"
    folder.mkdir()
    write_data(folder)
    out = tmp_path / "out"
    argv = ["eval", "--ckpts", str(tiny_llama_dir), "--out", str(out), "--no-progress", "--cache-dir", "none"]
    argv += ["--samples", "1", "--max-new-tokens", "4", "--longbench-v2-data", str(folder)]
    data.clear_cache()
    try:
        assert main([*argv, "--suite", "longbench-v2-nocontext"]) == 0
        assert main([*argv, "--suite", "longbench-v2", "--max-length", "300"]) == 0
    finally:
        data.clear_cache()
    _, records = read_store(out / "samples.jsonl")
    assert {(r["suite"], r["length"]) for r in records} == {("longbench-v2-nocontext", 0), ("longbench-v2", 300)}
    assert split_inconsistent(records) == (records, None)
    assert "inconsistent_records" not in results_from_store(out / "samples.jsonl", suite_tasks=all_suites())
