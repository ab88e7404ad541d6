"""Every reader of task data files (tasks/data/reader.py and the loaders on it) on damaged files.

For each format a valid file is built, hypothesis damages it (bytes or JSON values, see
mutations.py), and the loader must either return data that is in range (checked here by hand) or
raise one UserError line (a TaskUnavailable naming file, line and fix): never another exception,
never a silently wrong value. FIFOs, devices and folders in place of files are refused at once.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.errors import UserError

from .mutations import dumps, mutated_bytes, mutated_json, one_line

ESSAY = " ".join(f"Word{i} of the essay goes on." for i in range(60)) + "\n"
SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "T",
            "paragraphs": [
                {
                    "context": "The sky is blue.",
                    "qas": [
                        {"question": "What colour?", "id": "1", "is_impossible": False, "answers": [{"text": "blue"}]},
                        {"question": "Who?", "id": "2", "is_impossible": True, "answers": []},
                    ],
                },
                {
                    "context": "Grass is green.",
                    "qas": [{"question": "Grass?", "id": "3", "is_impossible": False, "answers": [{"text": "green"}]}],
                },
            ],
        }
    ],
}
HOTPOT = [
    {"question": f"Q{i}?", "answer": f"A{i}", "context": [[f"T{i}", ["one. ", "two."]], ["U", ["three."]]]}
    for i in range(3)
]
LONGBENCH = [
    {
        "input": f"q{i}",
        "context": f"context {i}",
        "answers": [f"a{i}"],
        "length": 10 + i,
        "all_classes": None,
        "_id": str(i),
    }
    for i in range(3)
]
ICL = [{"text": f"text {i}", "label": i % 2} for i in range(4)]
MMLU = [
    {"question": f"q{i}?", "subject": "anatomy", "choices": ["a", "b", "c", "d"], "answer": i % 4} for i in range(5)
]
HELLASWAG = [
    {
        "ind": i,
        "activity_label": "x",
        "ctx_a": "a",
        "ctx_b": "b",
        "ctx": "a b",
        "endings": ["1", "2", "3", "4"],
        "label": str(i % 4),
    }
    for i in range(3)
]
PPL = [{"text": f"document {i} " * 20} for i in range(3)]


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


# ---------------------------------------------------------------- loaders and what a result must hold


def _essays(path: str):
    from tasks.data import essays

    essays._load.cache_clear()
    e = essays.load_essays(path)
    assert e.words and all(isinstance(w, str) and w and " " not in w for w in e.words)
    assert all(0 <= s < len(e.words) for s in e.starts)


def _qa(name: str):
    def load(path: str):
        from tasks.data import qa

        qa._load.cache_clear()
        d = qa.load_qa(name, path)
        assert d.qas and all(isinstance(x, str) for x in d.docs)
        for q in d.qas:
            assert isinstance(q["query"], str) and all(isinstance(o, str) for o in q["outputs"])
            assert all(0 <= i < len(d.docs) for i in q["context"] + q["more_context"])

    return load


def _longbench(folder: str):
    from tasks.longbench import data

    data.set_data_dir(folder)
    try:
        for r in data.load_records("trec"):
            assert isinstance(r["input"], str) and isinstance(r["context"], str)
            assert all(isinstance(a, str) for a in r["answers"]) and isinstance(r["length"], int) and r["length"] >= 0
    finally:
        data.set_data_dir(None)


def _icl(folder: str):
    from tasks.icl import data

    data._load.cache_clear()
    os.environ[data.ENV_VAR] = folder
    try:
        d = data.load("trec_coarse")
        assert all(isinstance(lab, str) for lab in d.labels)
        for text, label in d.train + d.test:
            assert isinstance(text, str) and isinstance(label, int) and 0 <= label < len(d.labels)
    finally:
        del os.environ[data.ENV_VAR]


def _short(kind: str):
    def load(folder: str):
        from tasks.short import data

        data.clear_caches()
        env = data.MMLU_ENV if kind == "mmlu" else data.HELLASWAG_ENV
        os.environ[env] = folder
        try:
            if kind == "mmlu":
                files, _order, _ = data.mmlu_files()
                for split in files.values():
                    for path in split.values():
                        for row in map(json.loads, _lines(Path(path))):
                            assert 0 <= row["answer"] < len(row["choices"])
            else:
                path, _order, _ = data.hellaswag_file()
                for row in map(json.loads, _lines(Path(path))):
                    assert 0 <= int(row["label"]) < len(row["endings"])
        finally:
            del os.environ[env]

    return load


def _lines(path: Path) -> list[str]:
    """A JSONL file's lines as JSONL readers split them: at "\n" only (str.splitlines would also
    split inside a value holding U+0085 or U+2028, which JSON writes unescaped)."""
    return [line for line in path.read_text().split("\n") if line.strip()]


def _ppl(path: str):
    from tasks import ppl

    ppl._documents.cache_clear()
    os.environ[ppl.ENV_VAR] = path
    try:
        docs, _digest, _ = ppl.documents()
        assert docs and all(isinstance(d, str) and d.strip() for d in docs)
    finally:
        del os.environ[ppl.ENV_VAR]


# (name, files {relative path: valid bytes}, file to damage, loader taking the file or its folder, pass the folder)
FORMATS: list[tuple[str, dict[str, bytes], str, Callable[[str], None], bool]] = [
    ("essays-txt", {"e.txt": (ESSAY * 3).encode()}, "e.txt", _essays, False),
    ("essays-json", {"e.json": json.dumps({"text": ESSAY * 3}).encode()}, "e.json", _essays, False),
    ("essays-dir", {"a.txt": ESSAY.encode(), "b.txt": (ESSAY * 2).encode()}, "b.txt", _essays, True),
    ("squad", {"dev.json": json.dumps(SQUAD).encode()}, "dev.json", _qa("squad"), False),
    ("hotpotqa", {"dev.json": json.dumps(HOTPOT).encode()}, "dev.json", _qa("hotpotqa"), False),
    ("longbench", {"trec.jsonl": _jsonl(LONGBENCH)}, "trec.jsonl", _longbench, True),
    (
        "icl",
        {
            "trec_coarse/train.jsonl": _jsonl(ICL),
            "trec_coarse/test.jsonl": _jsonl(ICL),
            "trec_coarse/labels.json": json.dumps(["A", "B"]).encode(),
        },
        "trec_coarse/train.jsonl",
        _icl,
        True,
    ),
    (
        "icl-labels",
        {
            "trec_coarse/train.jsonl": _jsonl(ICL),
            "trec_coarse/test.jsonl": _jsonl(ICL),
            "trec_coarse/labels.json": json.dumps(["A", "B"]).encode(),
        },
        "trec_coarse/labels.json",
        _icl,
        True,
    ),
    ("mmlu", {"test.jsonl": _jsonl(MMLU), "dev.jsonl": _jsonl(MMLU)}, "test.jsonl", _short("mmlu"), True),
    ("hellaswag", {"validation.jsonl": _jsonl(HELLASWAG)}, "validation.jsonl", _short("hellaswag"), True),
    ("ppl-jsonl", {"docs.jsonl": _jsonl(PPL)}, "docs.jsonl", _ppl, False),
    ("ppl-txt", {"doc.txt": (ESSAY * 2).encode()}, "doc.txt", _ppl, False),
]
IDS = [f[0] for f in FORMATS]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))


@contextmanager
def _deadline(seconds: int = 20):
    """A reader that blocks (a FIFO) fails the test instead of hanging it."""

    def stop(signum, frame):
        raise TimeoutError(f"the reader blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _write(files: dict[str, bytes], damaged: str | None = None, data: bytes | None = None) -> Path:
    root = Path(tempfile.mkdtemp())
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if rel == damaged and data is not None else content)
    return root


def _load(fmt, root: Path) -> None:
    _, _, target, loader, folder = fmt
    with _deadline():
        try:
            loader(str(root if folder else root / target))
        except UserError as exc:
            one_line(exc)


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_the_valid_file_loads(fmt):
    _name, files, target, loader, folder = fmt
    root = _write(files)
    loader(str(root if folder else root / target))


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damaged_bytes_load_or_fail_in_one_line(fmt, data):
    _, files, target, _, _ = fmt
    _load(fmt, _write(files, target, data.draw(mutated_bytes(files[target]))))


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damaged_values_load_or_fail_in_one_line(fmt, data):
    _, files, target, _, _ = fmt
    raw = files[target].decode()
    if target.endswith(".jsonl"):
        rows = [json.loads(line) for line in raw.splitlines()]
        i = data.draw(st.integers(0, len(rows) - 1))
        rows[i] = data.draw(mutated_json(rows[i]))
        damaged = "".join(dumps(r) + "\n" for r in rows).encode()
    elif target.endswith(".json"):
        damaged = dumps(data.draw(mutated_json(json.loads(raw)))).encode()
    else:
        damaged = data.draw(mutated_bytes(files[target]))
    _load(fmt, _write(files, target, damaged))


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_fifo_device_or_folder_in_place_of_the_file_is_refused_at_once(fmt, kind):
    _name, files, target, loader, folder = fmt
    root = _write({k: v for k, v in files.items() if k != target})
    p = root / target
    p.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "device":
        p.symlink_to("/dev/zero")  # never ends: read whole, it would exhaust memory
    else:
        p.mkdir()
    with _deadline(), pytest.raises(UserError) as exc:
        loader(str(root if folder else p))
    one_line(exc.value)
