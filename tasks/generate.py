"""Generating samples, with an on-disk cache keyed by content.

A cached set is reused only when everything that shapes its bytes is the same: task name and
version, length, seed, tokenizer fingerprint and the data sources' hash. Samples are stored per
index, so any subset or order regenerates the same bytes and fills the cache incrementally.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Literal

from harness.models.tokenization import tokenizer_fingerprint
from tasks.base import Sample, Task

DEFAULT_SEED = 42


def default_cache_dir() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "longctx-harness")) / "samples"


def cache_key(task: Task, length: int, seed: int, tokenizer, nominal: int | None = None) -> str:
    parts = {
        "task": task.name,
        "version": task.version,
        "length": length,
        "seed": seed,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "data": task.dataset_hash(),
    }
    if task.protocols:  # the input protocol shapes the samples (keys of one-protocol tasks unchanged)
        parts["protocol"] = task.protocol
    if nominal is not None:  # fitted below the nominal length (keys of unfitted samples unchanged)
        parts["nominal"] = nominal
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _cache_path(cache_dir: Path, task: Task, length: int, key: str) -> Path:
    return cache_dir / task.name / str(length) / f"{key}.jsonl"


def _read_cache(path: Path) -> dict[int, Sample]:
    from harness.core.paths import read_regular

    out: dict[int, Sample] = {}
    if not path.exists():
        return out
    try:
        text = read_regular(path).decode("utf-8")  # a FIFO planted in the cache: rebuilt, never a hang
    except (OSError, UnicodeDecodeError):
        return {}  # unreadable or binary garbage: rebuilt like a torn file
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            s = Sample.from_dict(json.loads(line))
        except (ValueError, TypeError, KeyError, AttributeError):
            return {}  # a torn or foreign cache file is rebuilt, never trusted
        out[s.index] = s
    return out


def _write_cache(path: Path, samples: dict[int, Sample]) -> None:
    from harness.core.atomic import atomic_write

    # atomic: concurrent writers never leave a torn file; a full disk leaves no temp file
    atomic_write(path, "".join(samples[i].to_json() + "\n" for i in sorted(samples)))


def generate_samples(
    task: Task,
    length: int,
    indices: list[int] | range,
    tokenizer,
    seed: int = DEFAULT_SEED,
    cache_dir: Path | Literal[False] | None = None,
    progress=None,
    nominal: int | None = None,
) -> list[Sample]:
    """Samples `indices` of `task` at `length`, from the cache where present.

    `progress`, when given, is called with the number of samples finished so far.
    `cache_dir=None` uses the default cache; pass `False` to disable caching.
    `nominal`: the length the run asked for when `length` is that less a chat template's tokens
    (Task.sample_fitted: a reference may pick its inputs by the nominal length).
    """
    task.check_available()
    indices = list(indices)
    fitted_from = nominal if nominal is not None and nominal != length else None
    key = cache_key(task, length, seed, tokenizer, fitted_from)
    path = (
        _cache_path(Path(cache_dir) if cache_dir else default_cache_dir(), task, length, key)
        if cache_dir is not False
        else None
    )
    cached = _read_cache(path) if path else {}
    new: dict[int, Sample] = {}
    for n, i in enumerate(indices):
        if i not in cached and i not in new:
            new[i] = (
                task.sample(length, i, seed, tokenizer)
                if fitted_from is None
                else task.sample_fitted(fitted_from, length, i, seed, tokenizer)
            )
        if progress:
            progress(n + 1)
    if path and new:
        cached = {**_read_cache(path), **new}
        _write_cache(path, cached)
    merged = {**cached, **new}
    return [merged[i] for i in indices]
