"""MRCR's token counts, kept on disk beside the sample cache: counting 2400 conversations of up to 5M
characters takes minutes, and every run of the suite needs the card's bin of each item and the
model's tokens of each item it may run.

    counts = cached_counts({"what": "bins", "data": h, "counter": "o200k_base"}, 800, lambda: count...)

A file is keyed by everything that shapes its numbers (the data's hash, the counter or the
tokenizer's fingerprint, the chat template, the protocol, the bin) and holds {"key": ..., "counts":
[...]}; it is read back only when it is a regular file of valid JSON whose key is the one asked and
whose counts are that many non-negative integers, else it is counted again and replaced (atomic).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path


def cache_dir() -> Path:
    from tasks.generate import default_cache_dir

    return default_cache_dir().parent / "mrcr-counts"


def _read(path: Path, key: dict, n: int) -> tuple[int, ...] | None:
    from harness.core.paths import read_regular

    try:
        doc = json.loads(read_regular(path).decode("utf-8"))
    except (OSError, ValueError):  # absent, not a regular file, torn or foreign: counted again
        return None
    counts = doc.get("counts") if isinstance(doc, dict) and doc.get("key") == key else None
    if not isinstance(counts, list) or len(counts) != n:
        return None
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        return None
    return tuple(counts)


def cached_counts(key: dict, n: int, count: Callable[[], list[int]]) -> tuple[int, ...]:
    """The n counts stored under `key`, else count() (stored for the next run)."""
    from harness.core.atomic import atomic_write

    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    path = cache_dir() / f"{name}.json"
    found = _read(path, key, n)
    if found is not None:
        return found
    counts = count()
    try:
        atomic_write(path, json.dumps({"key": key, "counts": counts}))
    except OSError:  # a read-only or full cache only costs the next run the count
        pass
    return tuple(counts)
