"""The per-sample results store (harness/pipeline/store.py): resume, dedupe, crash and corruption handling."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from harness.core.errors import UserError
from harness.core.identity import settings_id
from harness.pipeline.store import ResultStore, StoreError, read_store


def rec(
    index: int, fp: str = "fp1", task: str = "niah_single_1", length: int = 4096, score: float = 1.0, seed: int = 42
) -> dict:
    return {
        "run": "r",
        "checkpoint": {"path": "runs/r/ckpt-10", "step": 10, "fingerprint": fp},
        "suite": "ruler",
        "task": task,
        "task_version": 1,
        "length": length,
        "index": index,
        "seed": seed,
        "dataset_hash": "h",
        "prediction": f"answer {index}\nwith a newline",
        "score": score,
        "metric": "string_match_all",
        "num_tokens": 4000,
        "settings": {"backend": "hf"},
        "metadata": {},
    }


def lines(path):
    return path.read_bytes().decode().splitlines()


def test_header_append_resume_dedupe(tmp_path):
    path = tmp_path / "out" / "samples.jsonl"
    store = ResultStore(path)
    header = json.loads(lines(path)[0])
    assert header["type"] == "header" and header["schema_version"] == 1
    assert {"created", "package_version", "git_hash"} <= set(header)
    assert store.done_keys() == set()

    assert store.append([rec(0), rec(1), rec(1)]) == 2  # duplicate inside a batch written once
    sid = settings_id({"backend": "hf"})
    assert store.done_keys() == {
        ("fp1", "niah_single_1", 1, 4096, 0, 42, "h", sid),
        ("fp1", "niah_single_1", 1, 4096, 1, 42, "h", sid),
    }
    assert ResultStore.key(rec(3)) == ("fp1", "niah_single_1", 1, 4096, 3, 42, "h", sid)

    again = ResultStore(path)  # a re-run resumes from what is on disk
    assert again.done_keys() == store.done_keys()
    assert again.append([rec(1), rec(2), rec(2, fp="fp2"), rec(2, seed=7), rec(2, length=8192)]) == 4
    assert store.append([rec(2)]) == 0  # written by the other instance meanwhile: seen at append time
    assert len(store.done_keys()) == 6
    got = store.records()
    assert [r["type"] for r in got] == ["sample"] * 6
    assert got[0]["prediction"] == "answer 0\nwith a newline" and got[0]["checkpoint"]["fingerprint"] == "fp1"
    assert len(lines(path)) == 7 and lines(path)[0] == json.dumps(header)  # header never rewritten


def test_torn_last_line_is_ignored_then_truncated(tmp_path):
    path = tmp_path / "samples.jsonl"
    ResultStore(path).append([rec(0), rec(1)])
    whole = path.read_bytes()
    with open(path, "ab") as f:
        f.write(json.dumps({"type": "sample", **rec(2)}).encode()[:40])  # a writer killed mid-line
    assert len(read_store(path)[1]) == 2  # readers skip it
    store = ResultStore(path)
    assert path.read_bytes() == whole  # truncated on open
    assert store.append([rec(2)]) == 1
    assert [r["index"] for r in store.records()] == [0, 1, 2]
    for line in lines(path):
        json.loads(line)


def test_torn_tail_left_by_another_writer_is_truncated_before_append(tmp_path):
    path = tmp_path / "samples.jsonl"
    store = ResultStore(path)
    store.append([rec(0)])
    with open(path, "ab") as f:
        f.write(b'{"type": "sample", "run": "r", "checkpo')
    store.append([rec(1)])
    assert [r["index"] for r in read_store(path)[1]] == [0, 1]


def test_torn_header_is_rewritten(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b'{"type": "head')
    ResultStore(path).append([rec(0)])
    assert json.loads(lines(path)[0])["type"] == "header" and len(lines(path)) == 2


def test_corrupt_middle_line_is_an_error(tmp_path):
    path = tmp_path / "samples.jsonl"
    ResultStore(path).append([rec(0), rec(1), rec(2)])
    text = lines(path)
    text[2] = text[2][:30] + "#garbage"
    path.write_text("\n".join(text) + "\n")
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"samples.jsonl line 3 is corrupt"):
        ResultStore(path)
    with pytest.raises(StoreError, match="line 3"):
        read_store(path)
    assert path.read_bytes() == before
    assert issubclass(StoreError, UserError)


def test_record_without_key_fields_is_corrupt(tmp_path):
    path = tmp_path / "samples.jsonl"
    ResultStore(path)
    with open(path, "a") as f:
        f.write(json.dumps({"type": "sample", "task": "x"}) + "\n")
    with pytest.raises(StoreError, match="line 2 is corrupt"):
        ResultStore(path)


@pytest.mark.parametrize("content", [b"hello world\n", b"hello world", b'{"a": 1}\n{"type": "sample"}\n', b"[1, 2]\n"])
def test_foreign_file_is_an_error_and_untouched(tmp_path, content):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="is not a harness results store"):
        ResultStore(path)
    assert path.read_bytes() == content


def test_newer_schema_is_an_error(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps({"type": "header", "schema_version": 2}) + "\n")
    with pytest.raises(StoreError, match="schema_version 2, this harness reads 1"):
        ResultStore(path)


def test_nan_score_is_refused(tmp_path):
    store = ResultStore(tmp_path / "samples.jsonl")
    with pytest.raises(ValueError):
        store.append([rec(0, score=float("nan"))])
    assert store.records() == []


def _worker(path: str, worker: int, barrier) -> None:
    store = ResultStore(path)
    barrier.wait()
    # Every worker writes overlapping index ranges in small batches, in its own order.
    indices = list(range(worker * 40, worker * 40 + 120))
    if worker % 2:
        indices.reverse()
    for i in range(0, len(indices), 7):
        store.append([rec(j, score=worker / 10) for j in indices[i : i + 7]])


def test_concurrent_appends_lose_and_duplicate_nothing(tmp_path):
    path = str(tmp_path / "samples.jsonl")
    ctx = multiprocessing.get_context("fork")
    num_workers = 4
    barrier = ctx.Barrier(num_workers)
    procs = [ctx.Process(target=_worker, args=(path, w, barrier)) for w in range(num_workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    _header, records = read_store(path)
    indices = [r["index"] for r in records]
    assert sorted(indices) == list(range(40 * (num_workers - 1) + 120))  # every key exactly once
    assert sum(1 for line in lines(tmp_path / "samples.jsonl") if '"type": "header"' in line) == 1
