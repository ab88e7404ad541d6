"""What harness eval writes for NoLiMa is never reported as contradicting itself
(harness/pipeline/record_checks.py): under "reference" a length is a haystack size of the reference's
grid and the prompt is longer than it; under "exact-length" the length is the whole budget."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.pipeline.reaggregate import results_from_store
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.store import read_store
from tasks.nolima import data
from tasks.registry import all_suites

from .fixtures import write_nolima


@pytest.mark.parametrize("protocol", ["reference", "exact-length"])
def test_nolima_records_are_consistent(protocol, tiny_llama_dir, tmp_path):
    folder = write_nolima(tmp_path / "nolima")
    out = tmp_path / "out"
    argv = ["eval", "--ckpts", str(tiny_llama_dir), "--suite", "nolima", "--lengths", "512,1k", "--samples", "1"]
    argv += ["--nolima-data", str(folder), "--out", str(out), "--no-progress", "--cache-dir", "none"]
    try:
        assert main([*argv, "--protocol", protocol]) == 0
    finally:
        data.set_data_dir(None)
    _, records = read_store(out / "samples.jsonl")
    assert {r["length"] for r in records} == ({500, 1000} if protocol == "reference" else {512, 1024})
    assert split_inconsistent(records) == (records, None)
    assert "inconsistent_records" not in results_from_store(out / "samples.jsonl", suite_tasks=all_suites())
