"""LongBench v2 records: the released data.json, from a local folder or the hub.

Offline: `--longbench-v2-data DIR` or HARNESS_LONGBENCH_V2=DIR, a folder holding data.json (the
file of the hub dataset THUDM/LongBench-v2, 503 items). Online, with no folder given, the same file
is downloaded from the hub (harness.core.hub: offline, or without a connection, it fails at once).
Records are validated at the boundary: every field pred.py reads must be there with a known value.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from harness.core.errors import TaskUnavailable
from tasks.data.reader import read_json

ENV_VAR = "HARNESS_LONGBENCH_V2"
HUB_REPO = "THUDM/LongBench-v2"
FILE = "data.json"
FIELDS: tuple[str, ...] = ("_id", "domain", "sub_domain", "difficulty", "length", "question")
FIELDS += ("choice_A", "choice_B", "choice_C", "choice_D", "answer", "context")


def _fix() -> str:
    from tasks.data_sources import source

    return source("longbench_v2").fix()


def _validate(items, where: str) -> tuple[dict, ...]:
    from tasks.longbench_v2.prompts import DIFFICULTIES, LENGTHS

    if not isinstance(items, list) or not items:
        raise TaskUnavailable(f"{where} is not a non-empty JSON list of LongBench v2 items: {_fix()}")
    out = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise TaskUnavailable(f"{where} item {n} is not an object: {_fix()}")
        missing = [f for f in FIELDS if not isinstance(item.get(f), str)]
        if missing:
            raise TaskUnavailable(f"{where} item {n} lacks text field(s) {', '.join(missing)}: {_fix()}")
        bad = (
            ("difficulty", item["difficulty"], DIFFICULTIES),
            ("length", item["length"], LENGTHS),
            ("answer", item["answer"], ("A", "B", "C", "D")),
        )
        for field, value, allowed in bad:
            if value not in allowed:
                raise TaskUnavailable(f"{where} item {n}: {field} {value!r} is not one of {', '.join(allowed)}")
        out.append({f: item[f] for f in FIELDS})
    return tuple(out)


def _read(path: Path) -> tuple[dict, ...]:
    # a regular file, UTF-8 JSON (a FIFO or device never blocks the read): the shared data reader
    return _validate(read_json(path, _fix()), str(path))


@lru_cache(maxsize=4)
def _load(folder: str | None) -> tuple[tuple[dict, ...], str]:
    if folder:
        path = Path(folder).expanduser()
        if path.is_dir():
            path = path / FILE
        if not path.exists():  # anything else there (a FIFO, a device) the reader names
            raise TaskUnavailable(f"LongBench v2 file {path} not found: {_fix()}")
        items = _read(path)
    else:
        from harness.core import hub

        try:
            items = _read(Path(hub.download(HUB_REPO, FILE)))
        except hub.HubUnreachable as exc:
            raise TaskUnavailable(f"LongBench v2 data not found ({hub.first_line(exc)}): {_fix()}") from None
        except TaskUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001  (any hub failure becomes one line)
            raise TaskUnavailable(
                f"LongBench v2 could not be loaded from the hub ({hub.first_line(exc)}): {_fix()}"
            ) from None
    digest = hashlib.sha256()
    for r in items:  # the content, so a local copy and the hub's hash the same
        digest.update(json.dumps(r, sort_keys=True, ensure_ascii=False).encode() + b"\n")
    return items, digest.hexdigest()[:16]


def load_items() -> tuple[dict, ...]:
    """The 503 items in file order (pred.py's order)."""
    return _load(os.environ.get(ENV_VAR))[0]


def items_hash() -> str:
    return _load(os.environ.get(ENV_VAR))[1]


def clear_cache() -> None:
    _load.cache_clear()
