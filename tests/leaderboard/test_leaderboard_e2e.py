"""From per-sample records through the project's aggregator (harness.pipeline.aggregate) to the leaderboard.

The expected numbers are recomputed here by brute force from the sample scores.
"""

from __future__ import annotations

import csv
import io
import random
import statistics

import pytest

import harness.pipeline.aggregate as aggregate_mod
from harness.cli import main
from harness.core.results_file import write_results

RULER = ["niah_single_1", "vt", "cwe", "qa_1"]
LB = {"LongBench ICL": ["trec", "samsum"], "Code": ["lcc"]}


def _records(ckpts, rng):
    recs = []
    for c in ckpts:
        for task, lengths in [
            *((t, [4096, 8192]) for t in RULER if t != "qa_1"),
            *((t, [0]) for ts in LB.values() for t in ts),
        ]:
            for L in lengths:
                for i in range(4):
                    recs.append(
                        {
                            "type": "sample",
                            "run": "x",
                            "checkpoint": c,
                            "task": task,
                            "task_version": 1,
                            "length": L,
                            "index": i,
                            "seed": 0,
                            "score": rng.choice([0.0, 0.5, 1.0]),
                            "metric": "m",
                        }
                    )
    return recs


def _write(tmp_path, name, ckpts, seed):
    recs = _records(ckpts, random.Random(seed))
    suites = {
        "ruler": {
            "tasks": RULER,
            "excluded": [],
            "unavailable": {"qa_1": "SQuAD v2 dev not found: pass --squad PATH"},
            "lengths": [4096, 8192],
        },
        "longbench": {
            "tasks": [t for ts in LB.values() for t in ts],
            "excluded": [],
            "unavailable": {},
            "lengths": [0],
            "categories": LB,
        },
    }
    run = {
        "name": name,
        "model": [f"runs/{name}", "other"] if name == "hub" else f"runs/{name}",
        "mode": None,
        "checkpoints": ckpts,
    }
    prov = {"package_version": "0.1.0", "backend": "hf", "dtype": "float32", "tensor_parallel_size": 1}
    results = aggregate_mod.aggregate(recs, suites, run, prov)
    path = tmp_path / name / "results.json"
    write_results(path, results)
    return recs, path


def _brute(recs, tasks, L):
    """Mean over checkpoints of (mean over tasks of the task's mean sample score) x 100."""
    per_ckpt = {}
    for fp in dict.fromkeys(r["checkpoint"]["fingerprint"] for r in recs):
        means = [
            statistics.fmean(
                r["score"] for r in recs if r["checkpoint"]["fingerprint"] == fp and r["task"] == t and r["length"] == L
            )
            for t in tasks
        ]
        per_ckpt[fp] = 100 * statistics.fmean(means)
    return statistics.fmean(per_ckpt.values()), statistics.stdev(per_ckpt.values())


def test_aggregator_output_renders_with_brute_force_numbers(tmp_path, capsys):
    ckpts = [{"path": f"runs/a/ckpt-{s}", "step": s, "fingerprint": f"fa{s}", "training": None} for s in (10, 20, 30)]
    recs_a, path_a = _write(tmp_path, "anchor", ckpts, 1)
    hub = [
        {"path": "hub/model", "step": None, "fingerprint": "fh1", "training": None},
        {"path": "hub/model-2", "step": None, "fingerprint": "fh2", "training": None},
    ]
    _, path_h = _write(tmp_path, "hub", hub, 2)
    out = tmp_path / "site"
    assert main(["leaderboard", str(path_a), str(path_h.parent), "--out", str(out), "--baseline", "hub"]) == 0
    rows = list(csv.reader(io.StringIO((out / "leaderboard.csv").read_text())))
    rec = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    evaluated = ["niah_single_1", "vt", "cwe"]
    for L, label in ((4096, "4K"), (8192, "8K")):
        mean, std = _brute(recs_a, evaluated, L)
        assert float(rec["anchor"][f"RULER {label}"]) == pytest.approx(mean, abs=0.005)
        assert float(rec["anchor"][f"RULER {label} std"]) == pytest.approx(std, abs=0.005)
    assert rec["anchor"]["RULER Tasks"] == "3/4"
    icl, _ = _brute(recs_a, LB["LongBench ICL"], 0)
    assert float(rec["anchor"]["LongBench ICL"]) == pytest.approx(icl, abs=0.005)
    assert rec["hub"]["Model"] == "runs/hub, other" and rec["hub"]["Mode"] == "—"
    html = (out / "index.html").read_text()
    assert "tensor_parallel_size" in html  # provenance fields beyond the contract are shown too
    assert (
        "anchor: RULER score vs checkpoint step" in html and "hub: RULER score vs checkpoint step" not in html
    )  # no steps, no Figure 4
    assert "0K" not in html and "0M" not in html  # length 0 (not length-controlled) is never labelled as a size
