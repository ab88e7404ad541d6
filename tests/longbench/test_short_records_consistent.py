"""What harness eval writes for the short suite (MMLU, HellaSwag through lm-eval) is never reported
as contradicting itself (harness/pipeline/record_checks.py): a loglikelihood prompt runs at length 0."""

from __future__ import annotations

from harness.cli import main
from harness.pipeline.reaggregate import results_from_store
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.store import read_store
from tasks.registry import all_suites


def test_short_records_are_consistent(tiny_llama_dir, short_dirs, tmp_path):
    out = tmp_path / "out"
    argv = ["eval", "--ckpts", str(tiny_llama_dir), "--out", str(out), "--no-progress", "--cache-dir", "none"]
    assert main([*argv, "--suite", "short", "--samples", "2"]) == 0
    _, records = read_store(out / "samples.jsonl")
    assert {(r["task"], r["length"]) for r in records} == {("mmlu", 0), ("hellaswag", 0)}
    assert split_inconsistent(records) == (records, None)
    assert "inconsistent_records" not in results_from_store(out / "samples.jsonl", suite_tasks=all_suites())
