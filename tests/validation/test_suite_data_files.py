"""The newer suites' data folders (LongBench v2, BABILong, HELMET, NoLiMa) are read through the one
data reader (tasks/data/reader.py): a FIFO or a device where a data file belongs, or bytes that are not
UTF-8, make the task unavailable with one line naming the file -- never a hang, never a traceback."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from harness.core.errors import TaskUnavailable


@pytest.fixture(autouse=True)
def _no_hang():
    """A read that blocks (the FIFO case before the shared reader) fails here in 20 s, not at the suite's timeout."""

    def boom(*_):
        raise TimeoutError("the loader blocked on its data file")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _plant(path: Path, kind: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(b'{"data": "\xff\xfe caf\xe9"}\n')
    return path


def _longbench_v2(root: Path, kind: str):
    from tasks.longbench_v2 import data

    _plant(root / data.FILE, kind)
    return lambda: data._load(str(root))


def _babilong_questions(root: Path, kind: str):
    from tasks.babilong import data

    _plant(root / data._BABI_DIRS[0] / "qa1_single-supporting-fact_test.txt", kind)
    return lambda: data._questions("qa1", str(root))


def _babilong_books(root: Path, kind: str):
    from tasks.babilong import data

    _plant(root / data._PG19_DIRS[0] / "book.txt", kind)
    return lambda: data._books(str(root))


def _helmet_records(root: Path, kind: str):
    from tasks.helmet import data

    path = _plant(root / "kv" / "test_k100.jsonl", kind)
    return lambda: data.read_records(path, ("input",))


def _helmet_prompts(root: Path, kind: str):
    from tasks.helmet import data

    path = _plant(root / "prompts" / "template.json", kind)
    return lambda: data.read_json(path)


def _nolima(root: Path, kind: str):
    from tasks.nolima import data

    _plant(root / data.NEEDLE_SET, kind)
    _plant(root / data.HAYSTACK_DIR / "rand_book_1.txt", "fifo" if kind == "fifo" else "bytes")
    return lambda: data._load(root)


LOADERS = [_longbench_v2, _babilong_questions, _babilong_books, _helmet_records, _helmet_prompts, _nolima]


@pytest.mark.parametrize("kind", ["fifo", "not-utf8"])
@pytest.mark.parametrize("loader", LOADERS, ids=lambda f: f.__name__.strip("_"))
def test_bad_data_file_is_one_unavailable_line(tmp_path, loader, kind):
    load = loader(tmp_path, kind)
    with pytest.raises(TaskUnavailable) as info:
        load()
    msg = str(info.value)
    assert "\n" not in msg and str(tmp_path) in msg, msg
    assert ("not a data file" in msg) if kind == "fifo" else ("UTF-8" in msg), msg
