"""What harness eval writes for HELMET under "reference" is never reported as contradicting itself
(harness/pipeline/record_checks.py): its lengths are HELMET's config lengths, its prompts cut to
the length less the tokens to generate."""

from __future__ import annotations

from pathlib import Path

from harness.cli import main
from harness.pipeline.reaggregate import results_from_store
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.store import read_store
from tasks.registry import all_suites

HERE = Path(__file__).parent


def test_helmet_reference_records_are_consistent(tiny_llama_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HELMET", str(HERE / "fixtures"))
    out = tmp_path / "out"
    argv = ["eval", "--ckpts", str(tiny_llama_dir), "--tasks", "helmet_nq,helmet_niah_mv", "--samples", "1"]
    argv += ["--max-new-tokens", "4", "--lengths", "8k", "--no-progress", "--cache-dir", "none", "--out", str(out)]
    assert main([*argv, "--helmet-data", str(HERE / "fixtures")]) == 0
    _, records = read_store(out / "samples.jsonl")
    assert {(r["length"], r["settings"]["protocol"]) for r in records} == {(8192, "reference")}
    assert split_inconsistent(records) == (records, None)
    assert "inconsistent_records" not in results_from_store(out / "samples.jsonl", suite_tasks=all_suites())
