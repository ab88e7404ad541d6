"""OpenAI-MRCR records: the released parquet files, from a local folder or the hub.

Offline: `--mrcr-data DIR` or HARNESS_MRCR=DIR, a folder holding the hub dataset openai/mrcr's files
as released: 2needle.parquet, 4needle.parquet and 8needle.parquet (800 rows each, the files openbench
and lm-eval's MRCR task read); the sharded layout of the same files,
2needle/2needle_0.parquet, 2needle/2needle_1.parquet, ..., is read too (shards in name order).
Online, with no folder given, <n>needle.parquet is downloaded from the hub (harness.core.hub:
offline, or without a connection, it fails at once, in one line).

A row's columns, as released: prompt (a JSON string: the list of chat messages {role, content}),
answer, random_string_to_prepend, n_needles, desired_msg_index, total_messages, n_chars. Rows are
validated at the boundary: every column there with its type, the prompt a non-empty list of
system/user/assistant messages ending with the user's request, the row's n_needles its file's.
Only the file of the needle count asked is read (a file holds ~0.7 GB of text).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.core.errors import TaskUnavailable
from tasks.data.reader import read_bytes

ENV_VAR = "HARNESS_MRCR"
HUB_REPO = "openai/mrcr"
NEEDLES = (2, 4, 8)
INT_COLUMNS = ("n_needles", "desired_msg_index", "total_messages", "n_chars")
STR_COLUMNS = ("prompt", "answer", "random_string_to_prepend")
COLUMNS = STR_COLUMNS + INT_COLUMNS
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Item:
    """One released row: its messages parsed from the prompt column, the other columns as released."""

    row: int  # the row's place in its file (shards in name order)
    messages: tuple[dict, ...]
    answer: str
    random_string_to_prepend: str
    n_needles: int
    desired_msg_index: int
    total_messages: int
    n_chars: int


def file_name(needles: int) -> str:
    return f"{needles}needle.parquet"


def _fix() -> str:
    from tasks.data_sources import source

    return source("mrcr").fix()


def _messages(text: str, where: str) -> tuple[dict, ...]:
    try:
        messages = json.loads(text)
    except ValueError as exc:
        raise TaskUnavailable(f"{where}: prompt is not JSON ({str(exc)[:80]}): {_fix()}") from None
    if not isinstance(messages, list) or not messages:
        raise TaskUnavailable(f"{where}: prompt is not a non-empty JSON list of messages: {_fix()}")
    for m in messages:
        if not (isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str)):
            raise TaskUnavailable(
                f"{where}: a prompt message is not {{role: system|user|assistant, content}}: {_fix()}"
            )
    if messages[-1]["role"] != "user":
        raise TaskUnavailable(f"{where}: the prompt's last message is not the user's request: {_fix()}")
    return tuple({"role": m["role"], "content": m["content"]} for m in messages)


def _rows(path: Path) -> list[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(read_bytes(path, _fix())))
    except (pa.ArrowException, OSError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise TaskUnavailable(f"{path} is not a parquet file ({first}): {_fix()}") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise TaskUnavailable(f"{path} lacks column(s) {', '.join(missing)} (openai/mrcr's layout): {_fix()}")
    return table.select(list(COLUMNS)).to_pylist()


def _item(row: dict, n: int, needles: int, where: str) -> Item:
    bad = [c for c in STR_COLUMNS if not isinstance(row[c], str)]
    bad += [c for c in INT_COLUMNS if not isinstance(row[c], int) or isinstance(row[c], bool)]
    if bad:
        raise TaskUnavailable(f"{where}: column(s) {', '.join(bad)} empty or of another type: {_fix()}")
    if row["n_needles"] != needles:
        raise TaskUnavailable(f"{where}: n_needles {row['n_needles']} in the {needles}-needle file: {_fix()}")
    if not row["random_string_to_prepend"]:
        raise TaskUnavailable(f"{where}: random_string_to_prepend is empty: {_fix()}")
    return Item(
        n,
        _messages(row["prompt"], where),
        row["answer"],
        row["random_string_to_prepend"],
        *(int(row[c]) for c in INT_COLUMNS),
    )


def local_files(folder: Path, needles: int) -> tuple[Path, ...]:
    """The released file of a needle count in `folder`: <n>needle.parquet, else its shards."""
    whole = folder / file_name(needles)
    if whole.exists():
        return (whole,)
    shards = sorted((folder / f"{needles}needle").glob(f"{needles}needle_*.parquet"))
    if shards:
        return tuple(shards)
    raise TaskUnavailable(f"MRCR file {whole} not found: {_fix()}")


def _hub_files(needles: int) -> tuple[Path, ...]:
    from harness.core import hub

    try:
        return (Path(hub.download(HUB_REPO, file_name(needles))),)
    except hub.HubUnreachable as exc:
        raise TaskUnavailable(f"MRCR data not found ({hub.first_line(exc)}): {_fix()}") from None
    except Exception as exc:  # noqa: BLE001  (any hub failure becomes one line)
        raise TaskUnavailable(f"MRCR could not be loaded from the hub ({hub.first_line(exc)}): {_fix()}") from None


@lru_cache(maxsize=3)
def _load(folder: str | None, needles: int) -> tuple[tuple[Item, ...], str]:
    paths = local_files(Path(folder).expanduser(), needles) if folder else _hub_files(needles)
    items: list[Item] = []
    digest = hashlib.sha256()
    for path in paths:
        rows, first = _rows(path), len(items)
        items += [_item(r, first + k, needles, f"{path} row {k}") for k, r in enumerate(rows)]
        for r in rows:  # the content, so a local copy and the hub's hash the same
            digest.update(json.dumps(r, sort_keys=True, ensure_ascii=False).encode() + b"\n")
    if not items:
        raise TaskUnavailable(f"MRCR {file_name(needles)} has no rows: {_fix()}")
    return tuple(items), digest.hexdigest()[:16]


def load_items(needles: int) -> tuple[Item, ...]:
    """The rows of the needle count's file, in file order."""
    return _load(os.environ.get(ENV_VAR), needles)[0]


def items_hash(needles: int) -> str:
    return _load(os.environ.get(ENV_VAR), needles)[1]


def clear_cache() -> None:
    _load.cache_clear()
