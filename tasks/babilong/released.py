"""BABILong's released sets, read from `--babilong-data DIR` (HARNESS_BABILONG) as the hub gives them.

The "reference" protocol evaluates what the reference evaluates: the rows of the released files, in
file order, each row {"input", "question", "target"} (scripts/run_model_on_babilong.py reads
`datasets.load_dataset(dataset_name, length)[task]`). The two sets it runs on, downloaded with e.g.
`huggingface-cli download RMT-team/babilong --repo-type dataset --local-dir DIR`:

    RMT-team/babilong            (100 rows a length)   DIR/data/qaN/<length>.json
                                  one JSON array of row objects (data/create_tasks.py's json.dump);
                                  DIR may also be that data/ folder itself
    RMT-team/babilong-1k-samples (1000 rows a length)  DIR/<length>/qaN-00000-of-0000M.parquet
                                  parquet shards, read in name order (the hub's older RMT-team/babilong
                                  revisions have this layout too; the parquet converter's
                                  DIR/<length>/qaN/0000.parquet is read as well)

The layout is detected from what DIR holds; a folder holding both is refused (point DIR at one).
Lengths are the sets' labels 0k, 1k, 2k, 4k, ... 128k (up to 1M): the context of a "4k" row was cut
to 4000 - 300 GPT-2 tokens by create_tasks.py, so a label is a nominal size, not a token count in
the evaluated model. A label's record length is its value as `--lengths` parses it (4k -> 4096;
0k -> 0).

Errors are one line naming the flag, the variable and the file: a task without any file is
unavailable (TaskUnavailable); a file whose rows lack the three string columns, or a folder with
both layouts, is a UserError (exit 2: a set of the wrong layout is never half used).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.core.errors import TaskUnavailable, UserError
from tasks.data.reader import decode_json, open_binary, parse_json, read_bytes

# Every label the released sets use that `--lengths` can name (k = 1024, as harness.core.lengths parses).
LABELS: dict[str, int] = {
    "0k": 0,
    "1k": 1 << 10,
    "2k": 1 << 11,
    "4k": 1 << 12,
    "8k": 1 << 13,
    "16k": 1 << 14,
    "32k": 1 << 15,
    "64k": 1 << 16,
    "128k": 1 << 17,
    "256k": 1 << 18,
    "512k": 1 << 19,
    "1M": 1 << 20,
}
COLUMNS = ("input", "question", "target")
JSON, PARQUET = "RMT-team/babilong", "RMT-team/babilong-1k-samples"
PATTERNS = {JSON: "DIR/data/qaN/<length>.json", PARQUET: "DIR/<length>/qaN-*.parquet"}


@dataclass(frozen=True)
class Item:
    input: str  # the facts hidden in PG19 text, as released (GPT-2 decoded, stripped)
    question: str
    target: str


def label_of(length: int) -> str | None:
    """The released label of a record length (4096 -> "4k"); None when no set has it."""
    return next((k for k, v in LABELS.items() if v == length), None)


def _source():
    from tasks.data_sources import source

    return source("babilong")


def fix() -> str:
    s = _source()
    sets = " or ".join(f"{k} ({v})" for k, v in PATTERNS.items())
    return f"pass {s.flag} DIR or set {s.env}=DIR with {sets}, as the hub gives them"


def folder() -> Path | None:
    value = os.environ.get(_source().env)
    return Path(value).expanduser() if value else None


def _json_base(root: Path) -> Path:
    """Where the qaN/ folders of the JSON layout are: DIR/data, or DIR when DIR is that data/ folder."""
    return root / "data" if (root / "data").is_dir() else root


def _has_json(root: Path) -> bool:
    base = _json_base(root)
    return any(base.glob("qa*/*.json"))


def _has_parquet(root: Path) -> bool:
    return any(any(root.glob(f"{label}/qa*-*.parquet")) or any(root.glob(f"{label}/qa*/*.parquet")) for label in LABELS)


@lru_cache(maxsize=8)
def layout(root: str) -> str | None:
    """JSON or PARQUET: the released set DIR holds; None when it holds neither."""
    path = Path(root)
    found = [name for name, has in ((JSON, _has_json(path)), (PARQUET, _has_parquet(path))) if has]
    if len(found) > 1:
        raise UserError(f"{root} holds both {JSON} and {PARQUET}: point {_source().flag} at one of them")
    return found[0] if found else None


def expected_file(root: Path, task: str, label: str) -> Path:
    """The file a (task, label) is read from in DIR's layout (the first shard for parquet)."""
    if layout(str(root)) == PARQUET:
        return root / label / f"{task}-00000-of-00001.parquet"
    return _json_base(root) / task / f"{label}.json"


def files(root: Path, task: str, label: str) -> tuple[Path, ...]:
    """The files holding (task, label) in DIR's layout, in read order; () when there are none."""
    if layout(str(root)) == PARQUET:
        shards = sorted((root / label).glob(f"{task}-*.parquet")) or sorted((root / label / task).glob("*.parquet"))
        return tuple(shards)
    path = _json_base(root) / task / f"{label}.json"
    return (path,) if path.exists() else ()


def require_root() -> Path:
    root = folder()
    if root is None:
        raise TaskUnavailable(f"BABILong's released sets are read from a local folder: {fix()}")
    if not root.is_dir():
        raise TaskUnavailable(f"{root} is not a folder: {fix()}")
    if layout(str(root)) is None:
        raise TaskUnavailable(f"{root} holds no BABILong released set: {fix()}")
    return root


def labels(task: str) -> list[str]:
    """The labels DIR holds a file of `task` for, shortest first."""
    return list(_labels(str(require_root()), task))


@lru_cache(maxsize=64)
def _labels(root: str, task: str) -> tuple[str, ...]:
    return tuple(label for label in LABELS if files(Path(root), task, label))


def missing(task: str, label: str) -> str:
    """The one line for a (task, label) DIR has no file for."""
    root, s = require_root(), _source()
    return (
        f"BABILong {task} at {label}: no {expected_file(root, task, label)} in the {layout(str(root))} set there: "
        f"pass {s.flag} DIR or set {s.env}=DIR with a released set that has it"
    )


def _rows_from_json(path: Path, data: bytes) -> list:
    rows = parse_json(decode_json(data, path, fix()), path, fix())
    if not isinstance(rows, list):
        raise UserError(f"{path} is not a JSON array of rows ({JSON}'s layout): {fix()}")
    return rows


def _rows_from_parquet(path: Path, data: bytes) -> list:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise TaskUnavailable(
            f"{path} is not a parquet file ({(str(exc).splitlines() or [type(exc).__name__])[0][:120]}): {fix()}"
        ) from None
    names = set(table.column_names)
    if not set(COLUMNS) <= names:
        raise UserError(f"{path} has columns {sorted(names)}, not {', '.join(COLUMNS)} ({PARQUET}'s layout): {fix()}")
    return table.select(list(COLUMNS)).to_pylist()


def _check_row(path: Path, n: int, row) -> Item:
    if not isinstance(row, dict) or not all(isinstance(row.get(c), str) for c in COLUMNS):
        what = sorted(row) if isinstance(row, dict) else type(row).__name__
        raise UserError(
            f"{path} row {n} is {what}, not string fields {', '.join(COLUMNS)} (the released layout): {fix()}"
        )
    return Item(row["input"], row["question"], row["target"])


@lru_cache(maxsize=4)  # the loop reads one (task, label) after another; a 128k file holds ~0.5 GB of text
def _read(paths: tuple[Path, ...]) -> tuple[Item, ...]:
    items: list[Item] = []
    for path in paths:
        data = read_bytes(path, fix())  # a regular file (never a FIFO that blocks the read)
        rows = _rows_from_parquet(path, data) if path.suffix == ".parquet" else _rows_from_json(path, data)
        items += (_check_row(path, n, row) for n, row in enumerate(rows))
    return tuple(items)


@lru_cache(maxsize=256)
def _file_hash(path: Path, size: int, mtime: int) -> str:
    """sha256 of a file's bytes, read in blocks (hashing a set never holds its 128k files in memory)."""
    digest = hashlib.sha256()
    with open_binary(path, fix()) as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def files_hash(paths: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        st = path.stat()
        digest.update(path.name.encode() + b"\0" + _file_hash(path, st.st_size, st.st_mtime_ns).encode())
    return digest.hexdigest()[:16]


def _paths(task: str, label: str) -> tuple[Path, ...]:
    paths = files(require_root(), task, label)
    if not paths:
        raise UserError(missing(task, label))
    return paths


def items(task: str, label: str) -> tuple[Item, ...]:
    """The rows of `task` at `label`, in file order. A UserError when DIR has no file for it (the
    length was asked for) or its rows are not the released layout."""
    return _read(_paths(task, label))


def task_hash(task: str, task_labels: list[str]) -> str:
    """Hash of the bytes of every file a task reads (each label's), for results and the sample cache."""
    return files_hash(tuple(p for label in task_labels for p in _paths(task, label)))


def clear_caches() -> None:
    layout.cache_clear()
    _labels.cache_clear()
    _read.cache_clear()
    _file_hash.cache_clear()
