"""HotpotQA read one question at a time: the same questions, documents and hash as json.loads of
the whole file (the reference), at any chunk boundary; anything odd falls back to the whole read."""

from __future__ import annotations

import hashlib
import io
import json
import random

import pytest

from tasks.data import qa


def _elements(data: bytes, chunk: int, monkeypatch) -> list:
    monkeypatch.setattr(qa, "_CHUNK", chunk)
    return list(qa._array_elements(io.BytesIO(data), hashlib.sha256()))


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([0, -7, 12345678901234567890, 1.5, -2.5e-7, 1e300])
    if kind == 1:
        return rng.choice([True, False, None])
    if kind in (2, 3, 4):
        alphabet = 'ab \t\n"\\/é€😀\u2028\x01,[]{}:'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
    if kind in (5, 6):
        return {f"k{i}": _random_value(rng, depth + 1) for i in range(rng.randrange(4))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_elements_equal_json_loads_at_every_chunk_size(monkeypatch):
    rng = random.Random(0)
    for trial in range(60):
        value = [_random_value(rng) for _ in range(rng.randrange(6))]
        text = json.dumps(value, ensure_ascii=trial % 2 == 0, indent=rng.choice([None, 1, "\t"]))
        text = text.replace("\n", rng.choice(["\n", "\r\n", "\n  "]))
        data = (rng.choice(["", " ", "\n\t"]) + text + rng.choice(["", "\n", " \r\n"])).encode()
        for chunk in (1, 2, 3, 5, 8, 64, 1 << 20):
            assert _elements(data, chunk, monkeypatch) == json.loads(data), (text, chunk)


def test_invalid_json_raises(monkeypatch):
    for bad in (b"[1, 2", b"[1 2]", b"[1,]", b"[1] x", b'[{"a": }]', b'["unterminated]'):
        with pytest.raises(ValueError):
            json.loads(bad)
        for chunk in (1, 3, 1 << 20):
            with pytest.raises(ValueError):
                _elements(bad, chunk, monkeypatch)


def _hotpot(rng: random.Random, n: int) -> list:
    words = ["alpha", "beta", "gamma", "délta", "ε", "😀", "a\u2028b", 'q"t', "x\\y"]
    para = lambda: " ".join(rng.choice(words) for _ in range(rng.randrange(1, 8)))
    return [
        {
            "_id": f"h{q}",
            "question": f"Which {para()}?",
            "answer": para(),
            "supporting_facts": [[f"T{q}", 0]],
            "context": [[f"T{rng.randrange(3 * n)}", [para(), " ", para()]] for _ in range(rng.randrange(1, 5))],
            "level": rng.random(),
        }
        for q in range(n)
    ]


def test_hotpotqa_streamed_equals_whole_read(tmp_path, monkeypatch, hotpot_file):
    rng = random.Random(1)
    files = [hotpot_file]
    for i in range(4):
        path = tmp_path / f"h{i}.json"
        path.write_text(json.dumps(_hotpot(rng, 30), ensure_ascii=i % 2 == 0, indent=i or None), encoding="utf-8")
        files.append(path)
    for path in files:
        raw = path.read_bytes()
        want = (*qa.read_hotpotqa(json.loads(raw)), hashlib.sha256(raw).hexdigest()[:16])
        for chunk in (7, 100, 1 << 20):
            monkeypatch.setattr(qa, "_CHUNK", chunk)
            assert qa._hotpotqa_streamed(path) == want
    qa._load.cache_clear()
    monkeypatch.setattr(qa, "_CHUNK", 5)
    data = qa.load_qa("hotpotqa", str(hotpot_file))
    raw = hotpot_file.read_bytes()
    assert (data.qas, data.docs) == qa.read_hotpotqa(json.loads(raw))
    assert data.hash == hashlib.sha256(raw).hexdigest()[:16]
    qa._load.cache_clear()


def test_odd_files_fall_back_to_the_whole_read(tmp_path, monkeypatch):
    """Not a UTF-8 array, invalid JSON, wrong shape: no stream result, and load_qa raises the same
    TaskUnavailable as the whole read always did."""
    from harness.core.errors import TaskUnavailable

    good = json.dumps(_hotpot(random.Random(2), 3))
    cases = {
        "bom": b"\xef\xbb\xbf" + good.encode(),
        "utf16": good.encode("utf-16"),
        "object": b'{"data": []}',
        "truncated": good.encode()[:-5],
        "extra": good.encode() + b" []",
        "no question": json.dumps([{"context": [["t", ["p"]]], "answer": "a"}]).encode(),
        "empty": b"[]",
        "nothing": b"",
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        result = qa._hotpotqa_streamed(path)
        assert result is None or result[0] == [], name
        qa._load.cache_clear()
        try:
            loaded = qa.load_qa("hotpotqa", str(path))
        except TaskUnavailable as exc:
            loaded = str(exc)
        try:
            ref = json.loads(data)
        except ValueError:
            expect = "is not valid JSON"
        else:
            try:
                qas, docs = qa.read_hotpotqa(ref)
                expect = (qas, docs) if qas else "no answerable questions"
            except (KeyError, TypeError, ValueError):  # the reader's schema check (tasks/data/reader.py)
                expect = "does not have the expected shape"
        if isinstance(expect, str):
            assert isinstance(loaded, str) and expect in loaded, (name, loaded)
        else:
            assert (loaded.qas, loaded.docs) == expect, name
    qa._load.cache_clear()
