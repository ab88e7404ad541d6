"""Per-sample scores in results.json ("samples" blocks) and the bootstrap replicates built from them.

    from harness.core.paired import cell_replicates, shared_indices, paired_replicates
    R = cell_replicates("niah_single_1", 4096, block, labels)     # (B, K) per checkpoint, scores x100
    idx = shared_indices(block_a, block_b)                         # samples both runs scored
    Ra, Rb = paired_replicates("niah_single_1", 4096, block_a, la, block_b, lb, idx)

A block is one (task, length) of one run (docs/contracts.md, "Per-sample scores"):
    {"task_version": "1", "dataset_hash": "...", "seed": 42, "index": [0, 1, ...],
     "scores": {"<checkpoint label>": [score 0..1 or null, ...]},          # aligned with "index"
     "nll": {...}, "tokens": {...}}                                         # perplexity tasks only
Two runs share a sample when task version, dataset hash, seed, length and index agree: samples are
generated per index from those, so both runs saw the same prompt and the difference can be paired.

The sample-index draws are seeded from the cell's key and its index set, not from the run, so two
runs evaluated on the same samples draw the same indices (the pairing) and every interval is
reproducible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from harness.core import stats


def _key(task: str, length: int, block: dict, index: list[int]) -> tuple:
    digest = hashlib.sha256(np.asarray(index, dtype=np.int64).tobytes()).hexdigest()[:16]
    return (task, block.get("task_version"), int(length), block.get("dataset_hash"), block.get("seed"), digest)


def is_perplexity(block: dict) -> bool:
    return "nll" in block and "tokens" in block


def _matrix(block: dict, field: str, labels: list[str], positions: np.ndarray) -> np.ndarray:
    """(K, len(positions)) values of one field, NaN where a checkpoint has no value."""
    rows = []
    for label in labels:
        vals = block[field].get(label)
        if vals is None:
            rows.append(np.full(len(positions), np.nan))
            continue
        arr = np.array([np.nan if v is None else float(v) for v in vals], dtype=np.float64)
        rows.append(arr[positions])
    return np.vstack(rows) if rows else np.zeros((0, len(positions)))


def replicates_at(block: dict, labels: list[str], positions: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(B, K) per-checkpoint values for given sample weights: score mean x100, or corpus perplexity."""
    if is_perplexity(block):
        nll = _matrix(block, "nll", labels, positions)
        tokens = _matrix(block, "tokens", labels, positions)
        tokens = np.where(np.isnan(nll), np.nan, tokens)
        with np.errstate(over="ignore"):
            return np.exp(stats.checkpoint_replicates(nll, weights, den=tokens))
    return 100.0 * stats.checkpoint_replicates(_matrix(block, "scores", labels, positions), weights)


def cell_replicates(task: str, length: int, block: dict, labels: list[str]) -> np.ndarray:
    """(B, K) bootstrap replicates of each checkpoint's cell value over the block's own samples."""
    index = list(block["index"])
    weights = stats.sample_weights(len(index), stats.rng_for(*_key(task, length, block, index)))
    return replicates_at(block, labels, np.arange(len(index)), weights)


def shares_samples(a: dict, b: dict) -> bool:
    """Whether two blocks come from the same sample generator (then equal indices are equal samples)."""
    return all(a.get(k) == b.get(k) for k in ("task_version", "dataset_hash", "seed"))


def shared_indices(a: dict, b: dict) -> list[int]:
    """Sample indices both blocks scored (every checkpoint of both), [] when they cannot be paired."""
    if not shares_samples(a, b):
        return []

    def complete(block: dict) -> set[int]:
        field = "nll" if is_perplexity(block) else "scores"
        ok = set(block["index"])
        for vals in block[field].values():
            ok &= {i for i, v in zip(block["index"], vals) if v is not None}
        return ok

    return sorted(complete(a) & complete(b))


def paired_replicates(
    task: str, length: int, a: dict, labels_a: list[str], b: dict, labels_b: list[str], index: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Per-checkpoint replicates of both runs over the shared samples `index`, one draw for both."""
    weights = stats.sample_weights(len(index), stats.rng_for(*_key(task, length, a, index)))
    pos_a = {i: p for p, i in enumerate(a["index"])}
    pos_b = {i: p for p, i in enumerate(b["index"])}
    ra = replicates_at(a, labels_a, np.array([pos_a[i] for i in index], dtype=np.int64), weights)
    rb = replicates_at(b, labels_b, np.array([pos_b[i] for i in index], dtype=np.int64), weights)
    return ra, rb


def normal_replicates(cell: dict, *key: object) -> np.ndarray | None:
    """(B, 1) replicates of a cell known only by its mean and a standard error (an imported aggregate:
    `stderr`, x100), drawn from that normal; None without an error. The draws are seeded from `key`."""
    se = cell.get("stderr")
    if isinstance(se, bool) or not isinstance(se, (int, float)) or not isinstance(cell.get("mean"), (int, float)):
        return None
    rng = stats.rng_for(*key, "normal")
    return (float(cell["mean"]) + float(se) * rng.standard_normal(stats.RESAMPLES)).reshape(-1, 1)


def mean_of(matrices: list[np.ndarray], weights: Sequence[float] | None = None) -> np.ndarray:
    """Elementwise (weighted) mean of equally shaped replicate matrices: averages over tasks or lengths."""
    w = np.ones(len(matrices)) if weights is None else np.asarray(weights, dtype=np.float64)
    return np.tensordot(w / w.sum(), np.stack(matrices), axes=1)


def difference_interval(
    ra: np.ndarray, rb: np.ndarray, seed_key: tuple
) -> tuple[tuple[float, float] | None, np.ndarray]:
    """Interval of (mean over run A's checkpoints) - (mean over run B's), checkpoints resampled per run."""
    da = stats.over_checkpoints(ra, stats.rng_for(*seed_key, "a"))
    db = stats.over_checkpoints(rb, stats.rng_for(*seed_key, "b"))
    diff = da - db
    return stats.interval(diff), diff
