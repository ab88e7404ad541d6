"""Statistics over checkpoints, the arithmetic every average of results.json shares.

A value is first computed within each checkpoint (a cell, a mean over tasks, a weighted mean over
lengths), then summarised over the checkpoints: mean, sample std (ddof=1; 0.0 with one checkpoint),
min, max, and the 95% bootstrap interval of the mean (harness/core/stats.py) from the replicates
that resample the samples and the checkpoints. The steps are the module docstring of
harness.pipeline.aggregate; this module is their arithmetic.
"""

from __future__ import annotations

import math

import numpy as np

from harness.core import stats as bootstrap
from harness.core.paired import mean_of


def stats_over_checkpoints(per_ckpt: dict[str, float], ckpts: list[dict], labels: dict[str, str]) -> dict:
    """Statistics over checkpoints; per_ckpt maps fingerprint -> value (run order kept)."""
    order = [c for c in ckpts if c["fingerprint"] in per_ckpt]
    vals = [per_ckpt[c["fingerprint"]] for c in order]
    n = len(vals)
    assert n > 0
    mean = sum(vals) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else 0.0
    return {
        "mean": mean,
        "std": std,
        "min": min(vals),
        "max": max(vals),
        "n": n,
        "steps": [c.get("step") for c in order],
        "per_step": {labels[c["fingerprint"]]: per_ckpt[c["fingerprint"]] for c in order},
    }


def weighted_mean(values: list[float], weights: list[int]) -> float:
    return sum(w * v for w, v in zip(weights, values)) / sum(weights)


def group_average(
    tasks: list[str], cell: dict, lengths: list[int], ckpt_fps: list[str], counts: dict | None = None
) -> dict[int, tuple[list[str], dict[str, float]]]:
    """For each length: (tasks covered, {fingerprint: mean over those tasks}) for complete checkpoints.
    counts: weight each task by its number of samples (a "weighting": "samples" suite), else equally."""
    out = {}
    for L in lengths:
        covered = [t for t in tasks if any((t, L, fp) in cell for fp in ckpt_fps)]
        if not covered:
            continue

        def weight(t: str, fp: str, L: int = L) -> float:
            return float(counts[(t, L, fp)]) if counts is not None else 1.0

        per_ckpt = {
            fp: sum(cell[(t, L, fp)] * weight(t, fp) for t in covered) / sum(weight(t, fp) for t in covered)
            for fp in ckpt_fps
            if all((t, L, fp) in cell for t in covered)
        }
        if per_ckpt:
            out[L] = (covered, per_ckpt)
    return out


def length_summaries(
    per_len: dict[int, dict[str, float]], lengths: list[int], ckpts, labels, reps: dict | None = None, key=()
) -> dict:
    """avg / wavg_inc / wavg_dec over all `lengths`, within each checkpoint then over checkpoints.

    reps: {length: (B, K) replicates} to give each summary its interval (the same weights per replicate)."""
    if not lengths or any(L not in per_len for L in lengths):
        return {}
    fps = [c["fingerprint"] for c in ckpts if all(c["fingerprint"] in per_len[L] for L in lengths)]
    if not fps:
        return {}
    n = len(lengths)
    inc, dec = list(range(1, n + 1)), list(range(n, 0, -1))
    out = {}
    for name, weights in (("avg", [1] * n), ("wavg_inc", inc), ("wavg_dec", dec)):
        per_ckpt = {fp: weighted_mean([per_len[L][fp] for L in lengths], weights) for fp in fps}
        out[name] = stats_over_checkpoints(per_ckpt, ckpts, labels)
        if reps is not None and all(L in reps for L in lengths):
            combined = mean_of([reps[L] for L in lengths], weights)
            out[name].update(checkpoint_interval(combined, ckpts, fps, (*key, name)))
    return out


def checkpoint_interval(reps: np.ndarray, ckpts: list[dict], fps, key: tuple) -> dict:
    """{"ci_low", "ci_high"} of the mean over the checkpoints `fps` (columns of reps in run order)."""
    cols = [i for i, c in enumerate(ckpts) if c["fingerprint"] in set(fps)]
    iv = bootstrap.interval(bootstrap.over_checkpoints(reps[:, cols], bootstrap.rng_for(*key, "checkpoints")))
    return {} if iv is None else {"ci_low": iv[0], "ci_high": iv[1]}


def group_replicates(tasks: list[str], L: int, reps: dict, weights: dict | None = None) -> np.ndarray | None:
    """Replicates of the within-checkpoint mean over tasks at one length (None if a task has none);
    weights {task: samples} for a sample-weighted suite."""
    mats = [m for t in tasks if (m := reps.get((t, L))) is not None]
    if len(mats) < len(tasks):
        return None
    return mean_of(mats, [weights[t] for t in tasks] if weights is not None else None)


def sample_weights(tasks: list[str], L: int, counts: dict, per_ckpt: dict) -> dict[str, int]:
    """{task: samples} at L, from the first checkpoint of the average (checkpoints score the same samples)."""
    fp = next(iter(per_ckpt))
    return {t: counts[(t, L, fp)] for t in tasks}
