"""Where LongBench records come from: a local folder of the reference's jsonl files, or the hub.

Offline (the usual case on evaluation machines) point HARNESS_LONGBENCH at a folder holding the
reference's files, `<name>.jsonl` and `<name>_e.jsonl` (THUDM/LongBench's data.zip unpacks them
into `data/`; either the folder or its `data/` subfolder works):

    export HARNESS_LONGBENCH=/data/longbench        # or tasks.longbench.data.set_data_dir(path)

Online, with no folder set, records come from the hub dataset THUDM/LongBench through `datasets`
(config `<name>`, split test); when the hub offers only its data.zip, that file is downloaded and
read the same way as a local folder. Missing data raises TaskUnavailable naming the fix, so the
task is reported as unavailable, never scored 0.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field

from harness.core.errors import TaskUnavailable
from tasks.data.reader import Row, read_jsonl

ENV_VAR = "HARNESS_LONGBENCH"
HUB_REPO = "THUDM/LongBench"
FIELDS = ("input", "context", "answers", "length", "dataset", "language", "all_classes", "_id")

_data_dir: Path | None = None


def set_data_dir(path: str | os.PathLike | None) -> None:
    """Use this folder of jsonl files (the CLI's --longbench flag); None goes back to the env/hub."""
    global _data_dir
    if path is not None and not Path(path).is_dir():
        raise TaskUnavailable(
            f"LongBench folder {path} does not exist: pass a folder holding the reference's <task>.jsonl files"
        )
    _data_dir = Path(path) if path is not None else None
    _load.cache_clear()


def data_dir() -> Path | None:
    if _data_dir is not None:
        return _data_dir
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else None


def _find_local(folder: Path, name: str) -> Path | None:
    for cand in (folder / f"{name}.jsonl", folder / "data" / f"{name}.jsonl"):
        if cand.exists():  # not only a regular file: the reader refuses a FIFO or folder by name
            return cand
    return None


class LongBenchRecord(Row):
    """A line of the reference's <name>.jsonl (the fields the prompts, metrics and buckets use)."""

    input: str
    context: str
    answers: list[str]
    length: int = Field(ge=0)
    all_classes: list[str] | None = None
    language: str | None = None
    dataset: str | None = None


_FIX = "re-extract the reference's LongBench data (THUDM/LongBench data.zip)"


def _read_jsonl(path: Path) -> list[dict]:
    return read_jsonl(path, _FIX, row=LongBenchRecord)


def _from_hub(name: str) -> list[dict]:
    """The hub's copy: the dataset config `name`, else the raw data.zip (script-based hub repos fail
    on datasets>=4). Every hub request goes through harness.core.hub: offline, it fails at once."""
    from harness.core import hub

    errors = []
    try:
        return [dict(r) for r in hub.load_dataset(HUB_REPO, name, split="test")]
    except hub.HubUnreachable as exc:
        raise TaskUnavailable(f"LongBench {name} not found ({hub.first_line(exc)}): {_fix()}") from None
    except Exception as exc:  # noqa: BLE001  (any other hub failure: try the raw files)
        errors.append(hub.first_line(exc))
    try:
        import zipfile

        archive = Path(hub.download(HUB_REPO, "data.zip"))
        out = archive.parent / "extracted"
        if not (out / "data" / f"{name}.jsonl").is_file():
            with zipfile.ZipFile(archive) as z:
                z.extractall(out)
        found = _find_local(out, name)
        if found:
            return _read_jsonl(found)
        errors.append(f"data.zip has no {name}.jsonl")
    except Exception as exc:  # every hub failure is collected into one TaskUnavailable line  # noqa: BLE001
        errors.append(hub.first_line(exc))
    raise TaskUnavailable(f"LongBench {name} could not be loaded from the hub ({'; '.join(errors)[:200]}): {_fix()}")


def _fix() -> str:
    from tasks.data_sources import source

    return source("longbench").fix()


@lru_cache(maxsize=64)
def _load(name: str, folder: Path | None) -> tuple[tuple[dict, ...], str]:
    if folder is not None:
        path = _find_local(folder, name)
        if path is None:
            raise TaskUnavailable(
                f"LongBench file {name}.jsonl not found in {folder}: unzip THUDM/LongBench's data.zip there "
                f"or point {ENV_VAR} at the folder that holds it"
            )
        records = _read_jsonl(path)
    else:
        records = _from_hub(name)
    if not records:
        raise TaskUnavailable(f"LongBench {name} has no records: re-extract the reference's data")
    digest = hashlib.sha256()
    for r in records:  # hash the content, so a local folder and the hub copy hash the same
        digest.update(json.dumps({k: r.get(k) for k in FIELDS}, sort_keys=True, ensure_ascii=False).encode())
        digest.update(b"\n")
    return tuple(records), digest.hexdigest()[:16]


def load_records(name: str) -> tuple[dict, ...]:
    """The records of LongBench dataset `name` (e.g. "trec" or "trec_e"), in file order."""
    return _load(name, data_dir())[0]


def records_hash(name: str) -> str:
    return _load(name, data_dir())[1]


load_records.cache_clear = _load.cache_clear  # type: ignore[attr-defined]
