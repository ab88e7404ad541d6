"""A non-RULER, length-controlled selection for the export and chart tests: HELMET-like task names
in a `custom` suite at four lengths, three checkpoints, schema-2 intervals on the averages."""

from __future__ import annotations

import json
import random

import pytest

from .conftest import make_run, suite_from_raw

HELMET_TASKS = ["json_kv", "rag_nq", "rerank_msmarco", "icl_trec_coarse"]
HELMET_LENGTHS = [8192, 16384, 32768, 65536]
HELMET_STEPS = [100, 200, 300]


def helmet_run(name: str, seed: int, base: float) -> dict:
    """One run's results.json: the custom suite only, each per-length average with a 95% interval."""
    rng = random.Random(seed)
    raw = {
        t: {L: {s: max(0.0, min(100.0, base - 9 * i + rng.uniform(-4, 4))) for s in HELMET_STEPS} for i, L in
            enumerate(HELMET_LENGTHS)}
        for t in HELMET_TASKS
    }  # fmt: skip
    data, _ = make_run(name, seed, base, lengths=HELMET_LENGTHS, steps=HELMET_STEPS, longbench=False, short=False)
    suite = suite_from_raw(raw, HELMET_TASKS, HELMET_TASKS, HELMET_LENGTHS, HELMET_STEPS)
    for stats in list(suite["per_length"].values()) + [suite["summary"]["avg"]]:
        half = 1.5 + rng.uniform(0, 2)
        stats.update(ci_low=stats["mean"] - half, ci_high=stats["mean"] + half)
    data["suites"] = {"custom": suite}
    data["provenance"]["dataset_hashes"] = {t: f"h-{t}" for t in HELMET_TASKS}
    return data


@pytest.fixture(scope="module")
def helmet_dirs(tmp_path_factory) -> dict:
    """name -> run directory holding results.json, for two runs."""
    root = tmp_path_factory.mktemp("helmet")
    dirs = {}
    for name, seed, base in (("helmet-full", 11, 82.0), ("helmet-anchor", 12, 88.0)):
        d = root / name
        d.mkdir()
        (d / "results.json").write_text(json.dumps(helmet_run(name, seed, base)), encoding="utf-8")
        dirs[name] = d
    return dirs
