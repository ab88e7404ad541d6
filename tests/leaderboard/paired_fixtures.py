"""Schema-2 results built by the aggregator from constructed per-sample records: runs that share
their samples, so the delta view can pair them, and niah records with needle depths.

    full    scores drawn per sample (p = 0.4), two checkpoints that agree on about 95% of them
    anchor  full's scores with 30% of the wrong answers turned right: a known positive shift
    same    full's scores under another name: a difference of exactly 0
"""

from __future__ import annotations

import random

import pytest

from harness.core.results_file import write_results
from harness.pipeline.aggregate import aggregate

TASKS = ["niah_single_1", "vt"]
LENGTHS = [1024, 2048]
N = 60
STEPS = [90, 100]


def _records(name: str, scores: dict, depths: dict) -> tuple[list[dict], list[dict]]:
    ckpts = [
        {"path": f"runs/{name}/ckpt-{s}", "step": s, "fingerprint": f"{name}-{s}", "training": None} for s in STEPS
    ]
    out = []
    for (task, L, k), values in scores.items():
        c = ckpts[k]
        for i, v in enumerate(values):
            meta: dict = {"references": ["1234567"]}
            if task.startswith("niah"):
                meta["answer_depths"] = [depths[(L, i)]]
            out.append(
                {
                    "type": "sample",
                    "run": name,
                    "checkpoint": {"path": c["path"], "step": c["step"], "fingerprint": c["fingerprint"]},
                    "suite": "ruler",
                    "task": task,
                    "task_version": "1",
                    "length": L,
                    "index": i,
                    "seed": 42,
                    "dataset_hash": f"hash-{task}",
                    "prediction": "1234567" if v else "nothing",
                    "score": float(v),
                    "metric": "string_match_all",
                    "num_tokens": L,
                    "settings": {},
                    "metadata": meta,
                    "eval_seconds": 0.01 * L / 1024,
                }
            )
    return out, ckpts


def paired_scores(seed: int = 0) -> dict[str, dict]:
    rng = random.Random(seed)
    full = {}
    for t in TASKS:
        for L in LENGTHS:
            first = [int(rng.random() < 0.4) for _ in range(N)]
            # neighbouring checkpoints agree on most samples (as they do in training)
            full[(t, L, 0)], full[(t, L, 1)] = first, [1 - v if rng.random() < 0.05 else v for v in first]
    anchor = {}
    for key, vals in full.items():
        anchor[key] = [1 if (v == 0 and rng.random() < 0.3) else v for v in vals]
    return {"full": full, "anchor": anchor, "same": {k: list(v) for k, v in full.items()}}


def depths() -> dict[tuple[int, int], float]:
    rng = random.Random(7)
    return {(L, i): round(rng.uniform(0, 100), 2) for L in LENGTHS for i in range(N)}


def write_paired(root) -> dict[str, object]:
    suites = {"ruler": {"tasks": TASKS, "excluded": [], "unavailable": {}, "lengths": LENGTHS}}
    paths = {}
    d = depths()
    for name, scores in paired_scores().items():
        records, ckpts = _records(name, scores, d)
        res = aggregate(
            records, suites, {"name": name, "model": f"runs/{name}", "mode": name, "checkpoints": ckpts}, {}
        )
        paths[name] = root / name / "results.json"
        write_results(paths[name], res)
    return paths


@pytest.fixture(scope="session")
def paired_dir(tmp_path_factory):
    return write_paired(tmp_path_factory.mktemp("paired"))


@pytest.fixture(scope="session")
def paired_board(paired_dir):
    from leaderboards.build import build, load_runs

    return build(load_runs([paired_dir[n] for n in ("full", "anchor", "same")]), baseline="full")


@pytest.fixture(scope="session")
def paired_site(tmp_path_factory, paired_dir):
    from harness.cli import main

    out = tmp_path_factory.mktemp("paired-site")
    argv = ["leaderboard", *(str(paired_dir[n]) for n in ("full", "anchor", "same")), "--out", str(out)]
    assert main([*argv, "--baseline", "full", "--title", "Paired leaderboard"]) == 0
    return out
