"""Changed data never reuses old predictions: the dataset hash is part of a record's identity
(harness/core/identity.py), so a data file whose content changed between two runs on one --out is
recomputed, and a re-aggregation never averages records of two contents into one cell."""

from __future__ import annotations

import json

from harness.cli import main

ESSAY = "The grass grows in the valley and the river runs to the sea. " * 400


def _eval(root, out, essays):
    return main(
        ["eval", "--ckpts", f"{root}/ckpt-10", "--tasks", "niah_single_2", "--lengths", "1k", "--samples", "2",
         "--essays", str(essays), "--out", str(out), "--no-progress", "--cache-dir", "none"]
    )  # fmt: skip


def _records(out):
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]


def test_changed_essays_are_recomputed_and_never_mixed(ckpt_series, tmp_path, monkeypatch):
    # --essays sets HARNESS_ESSAYS in this process: setenv first so monkeypatch restores it (unset)
    # afterwards, or every later essay task of the session would read this tiny corpus
    monkeypatch.setenv("HARNESS_ESSAYS", "unset")
    monkeypatch.delenv("HARNESS_ESSAYS")
    essays = tmp_path / "essays"
    essays.mkdir()
    (essays / "a.txt").write_text(ESSAY)
    out = tmp_path / "out"
    assert _eval(ckpt_series, out, essays) == 0
    first = _records(out)
    assert len(first) == 2
    assert _eval(ckpt_series, out, essays) == 0 and len(_records(out)) == 2  # same data: nothing new

    (essays / "a.txt").write_text(ESSAY.replace("river", "stream"))
    assert _eval(ckpt_series, out, essays) == 0
    records = _records(out)
    assert len(records) == 4  # both samples recomputed on the new content
    old, new = {r["dataset_hash"] for r in first}, {r["dataset_hash"] for r in records[2:]}
    assert len(old) == len(new) == 1 and old != new
    results = json.loads((out / "results.json").read_text())
    assert results["provenance"]["dataset_hashes"]["niah_single_2"] == new.pop()
    cell = results["suites"]["custom"]["per_task"]["niah_single_2"]["1024"]
    assert cell["num_samples"] == 2  # the new content's two records, not four

    # re-aggregating the store takes the latest content only
    from harness.pipeline.reaggregate import results_from_store

    again = results_from_store(out / "samples.jsonl")
    block = again["suites"]["custom"]["samples"]["niah_single_2"]["1024"]
    assert block["dataset_hash"] == records[-1]["dataset_hash"] and len(block["index"]) == 2
