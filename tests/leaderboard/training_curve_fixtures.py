"""A training run's results.json as `harness eval` aggregates it: five checkpoints that learn to hold
longer contexts, each recording its training tokens (harness_training.json's tokens_per_step)."""

from __future__ import annotations

import random

STEPS = [100, 200, 300, 400, 500]
LENGTHS = [1024, 2048, 4096]
TASKS = ["niah_single_1", "niah_multikey_1"]
TOKENS_PER_STEP = 4096
SAMPLES = 40
# Share of samples right per (step, length): the run learns 2K by step 300 and 4K by step 500.
RIGHT = {
    100: {1024: 0.97, 2048: 0.5, 4096: 0.1},
    200: {1024: 1.0, 2048: 0.8, 4096: 0.3},
    300: {1024: 1.0, 2048: 0.97, 4096: 0.5},
    400: {1024: 1.0, 2048: 1.0, 4096: 0.8},
    500: {1024: 1.0, 2048: 1.0, 4096: 0.97},
}


def _records(name: str) -> tuple[list[dict], list[dict]]:
    rng = random.Random(7)
    ckpts, recs = [], []
    for step in STEPS:
        fp = f"{step:016x}"
        path = f"runs/{name}/ckpt-{step}"
        ckpts.append(
            {
                "path": path,
                "step": step,
                "fingerprint": fp,
                "training": {"mode": "anchor", "tokens_per_step": TOKENS_PER_STEP},
            }
        )
        for task in TASKS:
            for L in LENGTHS:
                for i in range(SAMPLES):
                    right = rng.random() < RIGHT[step][L]
                    recs.append(
                        {
                            "type": "sample",
                            "run": name,
                            "checkpoint": {"path": path, "step": step, "fingerprint": fp},
                            "suite": "ruler",
                            "task": task,
                            "task_version": "1",
                            "length": L,
                            "index": i,
                            "seed": 42,
                            "dataset_hash": "",
                            "prediction": "42" if right else "7",
                            "score": 1.0 if right else 0.0,
                            "metric": "string_match_all",
                            "num_tokens": L - 20,
                            "settings": {"backend": "hf"},
                            "metadata": {"max_new_tokens": 30},
                        }
                    )
    return ckpts, recs


def training_results(name: str = "anchor", tokens: bool = True) -> dict:
    from harness.pipeline.aggregate import aggregate

    ckpts, recs = _records(name)
    if not tokens:
        for c in ckpts:
            c["training"] = {"mode": "anchor"}
    suites = {
        "ruler": {"tasks": TASKS, "excluded": [], "unavailable": {}, "lengths": LENGTHS, "length_controlled": True}
    }
    run = {"name": name, "model": f"runs/{name}", "mode": "anchor", "checkpoints": ckpts}
    return aggregate(recs, suites, run, {"seed": 42, "backend": "hf"}, threshold=85.6)
