"""GraphWalks' released rows (hub dataset openai/graphwalks), from a local folder or the hub.

Offline: `--graphwalks-data DIR` or HARNESS_GRAPHWALKS=DIR, a folder holding the dataset's parquet
files as the hub gives them:
    graphwalks_128k_and_shorter.parquet   the "128k" set (lm-eval's graphwalks_128k)
    graphwalks_256k_to_1mil.parquet       the "1M" set (lm-eval's graphwalks_1M, 256K-1M)
Online, with no folder given, the file is downloaded from the hub (harness.core.hub: offline, or
without a connection, it fails at once). A set whose file is absent is unavailable on its own, in
one line naming the flag. Rows are validated at the boundary: prompt (text), answer_nodes (a list
of node names), prompt_chars (its length), problem_type ("bfs" or "parents").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.core.errors import TaskUnavailable
from tasks.data.reader import open_binary, read_bytes

ENV_VAR = "HARNESS_GRAPHWALKS"
HUB_REPO = "openai/graphwalks"
# set label -> the released file (lm-eval's graphwalks_128k.yaml / graphwalks_1M.yaml data_file)
FILES = {"128k": "graphwalks_128k_and_shorter.parquet", "1m": "graphwalks_256k_to_1mil.parquet"}
PROBLEM_TYPES = ("bfs", "parents")
COLUMNS = ("prompt", "answer_nodes", "prompt_chars", "problem_type")


@dataclass(frozen=True)
class Row:
    """One released row: `row` is its place in the file (lm-eval's doc order)."""

    row: int
    prompt: str
    answer_nodes: tuple[str, ...]
    prompt_chars: int
    problem_type: str


def fix() -> str:
    from tasks.data_sources import source

    return source("graphwalks").fix()


def _parse(path: Path, data: bytes) -> tuple[Row, ...]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise TaskUnavailable(f"{path} is not a parquet file ({first}): {fix()}") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise TaskUnavailable(f"{path} lacks column(s) {', '.join(missing)} of openai/graphwalks: {fix()}")
    return tuple(_check(path, n, r) for n, r in enumerate(table.select(list(COLUMNS)).to_pylist()))


def _check(path: Path, n: int, r: dict) -> Row:
    nodes = r["answer_nodes"]
    problems = []
    if not isinstance(r["prompt"], str) or not r["prompt"]:
        problems.append("prompt is not text")
    if not isinstance(nodes, list) or not all(isinstance(x, str) for x in nodes):
        problems.append("answer_nodes is not a list of node names")
    if r["problem_type"] not in PROBLEM_TYPES:
        problems.append(f"problem_type {r['problem_type']!r} is not bfs or parents")
    if not isinstance(r["prompt_chars"], int) or isinstance(r["prompt_chars"], bool) or r["prompt_chars"] < 0:
        problems.append("prompt_chars is not a count")
    if problems:
        raise TaskUnavailable(f"{path} row {n}: {'; '.join(problems)}: {fix()}")
    return Row(n, r["prompt"], tuple(nodes), r["prompt_chars"], r["problem_type"])


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open_binary(path, fix()) as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _path(folder: str | None, label: str) -> Path:
    name = FILES[label]
    if folder:
        path = Path(folder).expanduser()
        path = path / name if path.is_dir() else path
        if not path.exists():
            raise TaskUnavailable(f"GraphWalks {label} set: {path} not found: {fix()}")
        return path
    from harness.core import hub

    try:
        return Path(hub.download(HUB_REPO, name))
    except hub.HubUnreachable as exc:
        raise TaskUnavailable(f"GraphWalks data not found ({hub.first_line(exc)}): {fix()}") from None
    except Exception as exc:  # noqa: BLE001  (any hub failure becomes one line)
        raise TaskUnavailable(
            f"GraphWalks {name} could not be loaded from the hub ({hub.first_line(exc)}): {fix()}"
        ) from None


# the 1M file holds ~0.6 GB of prompt text: one set at a time is read and kept
@lru_cache(maxsize=2)
def _load(folder: str | None, label: str) -> tuple[tuple[Row, ...], str]:
    path = _path(folder, label)
    rows = _parse(path, read_bytes(path, fix()))
    return rows, _file_digest(path)


def _folder() -> str | None:
    import os

    return os.environ.get(ENV_VAR) or None


def rows(label: str) -> tuple[Row, ...]:
    """Every row of a released set, in file order."""
    return _load(_folder(), label)[0]


def rows_of(label: str, problem_type: str) -> tuple[Row, ...]:
    return tuple(r for r in rows(label) if r.problem_type == problem_type)


def set_hash(label: str) -> str:
    """sha256 of the set's file bytes (the hub's file and a local copy hash the same)."""
    return _load(_folder(), label)[1]


def clear_cache() -> None:
    _load.cache_clear()
