"""SQuAD v2 dev and HotpotQA dev (distractor), read the way RULER's qa.py reads them.

Sources, first found wins: an explicit path (`--squad PATH` / `--hotpotqa PATH`), the env
variables HARNESS_SQUAD / HARNESS_HOTPOTQA, or the hub when online (rajpurkar/squad_v2,
hotpotqa/hotpot_qa "distractor", validation split, via `datasets`). The files are the official
JSON (dev-v2.0.json, hotpot_dev_distractor_v1.json).

SQuAD: documents = sorted set of paragraph contexts; questions = answerable ones, in file order,
with the other paragraphs of the same article as preferred distractors. HotpotQA: documents =
sorted set of "{title}\\n{joined sentences}"; each question's 10 paragraphs are its context.
A HotpotQA file is decoded one question at a time (_array_elements): the parsed whole file would
hold ~3x its 46 MB at once, more than the rest of `harness generate` together.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from pydantic import ConfigDict, StrictStr, TypeAdapter, ValidationError

from harness.core.errors import TaskUnavailable
from harness.core.results_schema import describe
from tasks.data.reader import DataFileError, Row, check_regular, decode_json, open_binary, parse_json


@dataclass
class QaData:
    qas: list[dict]  # {"query", "outputs", "context": [doc ids], "more_context": [doc ids]}
    docs: list[str]
    hash: str
    source: str


FIXES = {
    "squad": "pass --squad PATH (SQuAD v2 dev-v2.0.json) or set HARNESS_SQUAD",
    "hotpotqa": "pass --hotpotqa PATH (hotpot_dev_distractor_v1.json) or set HARNESS_HOTPOTQA",
}
ENV = {"squad": "HARNESS_SQUAD", "hotpotqa": "HARNESS_HOTPOTQA"}


# The shapes the readers below use (the official files hold more fields; those pass through).
class SquadAnswer(Row):
    text: str


class SquadQuestion(Row):
    question: str
    is_impossible: bool
    answers: list[SquadAnswer]


class SquadParagraph(Row):
    context: str
    qas: list[SquadQuestion]


class SquadArticle(Row):
    paragraphs: list[SquadParagraph]


class SquadFile(Row):
    data: list[SquadArticle]


class HotpotQuestion(Row):
    model_config = ConfigDict(strict=False, extra="allow")  # lax only so a JSON [title, sentences] is a tuple

    question: StrictStr
    answer: StrictStr
    context: list[tuple[StrictStr, list[StrictStr]]]


SHAPES: dict[str, TypeAdapter[Any]] = {"squad": TypeAdapter(SquadFile), "hotpotqa": TypeAdapter(list[HotpotQuestion])}
_HOTPOT_ITEM = TypeAdapter(HotpotQuestion)


def read_squad(data: dict) -> tuple[list[dict], list[str]]:
    docs = sorted({p["context"] for d in data["data"] for p in d["paragraphs"]})
    ids = {c: i for i, c in enumerate(docs)}
    qas = []
    for d in data["data"]:
        more = [ids[p["context"]] for p in d["paragraphs"]]
        for p in d["paragraphs"]:
            for q in p["qas"]:
                if not q["is_impossible"]:
                    qas.append(
                        {
                            "query": q["question"],
                            "outputs": [a["text"] for a in q["answers"]],
                            "context": [ids[p["context"]]],
                            "more_context": [i for i in more if i != ids[p["context"]]],
                        }
                    )
    return qas, docs


def read_hotpotqa(data: Iterable) -> tuple[list[dict], list[str]]:
    # each paragraph's text is built once (it is the slow part of loading: ~74k paragraphs); the
    # question dicts are not kept, so `data` can be a stream (_array_elements)
    per_question, heads = [], []
    for d in data:
        _HOTPOT_ITEM.validate_python(d)  # a streamed element is checked as it arrives
        per_question.append([f"{t}\n{''.join(p)}" for t, p in d["context"]])
        heads.append((d["question"], d["answer"]))
    docs = sorted({c for texts in per_question for c in texts})
    ids = {c: i for i, c in enumerate(docs)}
    qas = [
        {"query": q, "outputs": [a], "context": [ids[c] for c in texts], "more_context": []}
        for (q, a), texts in zip(heads, per_question)
    ]
    return qas, docs


_CHUNK = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")  # json's whitespace
_DELIM = re.compile(r"[ \t\n\r,\]]")  # what may follow an array element


def _ws_end(buf: str, pos: int) -> int:
    """End of the whitespace run at `pos` (`_WS` matches the empty string, so it always matches)."""
    m = _WS.match(buf, pos)
    assert m is not None
    return m.end()


class _NotStreamable(Exception):
    """The file does not open as a UTF-8 JSON array: read it whole."""


def _array_elements(f: IO[bytes], digest: Any) -> Iterator[Any]:
    """The elements of the JSON array in `f`, decoded one at a time from 1 MB chunks; `digest` is
    updated with every byte. The same objects as json.loads of the whole file, which for HotpotQA
    dev holds ~3x the 46 MB file in memory at once. Raises ValueError where the JSON is invalid."""
    first = f.read(_CHUNK)
    digest.update(first)
    if json.detect_encoding(first) != "utf-8":
        raise _NotStreamable
    text = _ChunkedText(f, digest, first)
    text.skip_ws()
    if text.peek() != "[":
        raise _NotStreamable
    text.pos += 1
    text.skip_ws()
    if text.peek() == "]":
        text.pos += 1
    else:
        yield from _elements(text)
    text.skip_ws()
    if text.pos != len(text.buf):
        raise ValueError("extra data")


def _elements(text: _ChunkedText) -> Iterator[Any]:
    """The array's elements from the first one on, through its closing bracket."""
    decoder = json.JSONDecoder()
    while True:
        try:
            obj, end = decoder.raw_decode(text.buf, text.pos)
        except json.JSONDecodeError:
            if text.fill():
                continue  # the element runs past the chunk
            raise
        if _DELIM.search(text.buf, end) is None and text.fill():
            # no delimiter after the value yet: a number ("-2." of "-2.5e-07") may go on in the next chunk
            continue
        text.pos = end
        yield obj
        text.skip_ws()
        if text.peek() == "]":
            text.pos += 1
            return
        if text.peek() != ",":
            raise ValueError("expecting ',' delimiter")
        text.pos += 1
        text.skip_ws()


class _ChunkedText:
    """The decoded text of a file read _CHUNK bytes at a time: `buf` holds what is not consumed yet
    (before `pos`: consumed), a chunk is appended when a value runs past its end."""

    def __init__(self, f: IO[bytes], digest: Any, first: bytes):
        self.f, self.digest = f, digest
        self.utf8 = codecs.getincrementaldecoder("utf-8")("surrogatepass")  # as json.loads(bytes) decodes
        self.eof = not first
        self.buf, self.pos = self.utf8.decode(first, final=self.eof), 0

    def fill(self) -> bool:
        """Append the next chunk (dropping what is consumed); False at the end of the file."""
        if self.eof:
            return False
        chunk = self.f.read(_CHUNK)
        self.digest.update(chunk)
        self.eof = not chunk
        self.buf, self.pos = self.buf[self.pos :] + self.utf8.decode(chunk, final=self.eof), 0
        return True

    def skip_ws(self) -> None:
        self.pos = _ws_end(self.buf, self.pos)
        while self.pos == len(self.buf) and self.fill():
            self.pos = _ws_end(self.buf, self.pos)

    def peek(self) -> str:
        """The next character ("" at the end of the text)."""
        return self.buf[self.pos : self.pos + 1]


def _hotpotqa_streamed(path: Path) -> tuple[list[dict], list[str], str] | None:
    """(qas, docs, hash) of a HotpotQA file read one question at a time, or None when anything is
    off (not a UTF-8 array, invalid JSON, a missing field): the caller then reads the file whole,
    for the same result or error as always."""
    digest = hashlib.sha256()
    try:
        with open_binary(path, FIXES["hotpotqa"]) as f:
            qas, docs = read_hotpotqa(_array_elements(f, digest))
    except (_NotStreamable, ValueError, KeyError, TypeError, RecursionError):  # ValidationError is a ValueError
        return None
    return qas, docs, digest.hexdigest()[:16]


def _from_hub(name: str):
    """The hub copies converted to the official JSON layout (only when online)."""
    from harness.core import hub

    try:
        hub.check()  # offline or unreachable: None at once, without a request
        if name == "squad":
            ds = hub.load_dataset("rajpurkar/squad_v2", split="validation")
            arts: dict[str, dict] = {}
            for r in ds:
                art = arts.setdefault(r["title"], {"paragraphs": {}})
                par = art["paragraphs"].setdefault(r["context"], {"context": r["context"], "qas": []})
                par["qas"].append(
                    {
                        "question": r["question"],
                        "is_impossible": not r["answers"]["text"],
                        "answers": [{"text": t} for t in r["answers"]["text"]],
                    }
                )
            return {"data": [{"paragraphs": list(a["paragraphs"].values())} for a in arts.values()]}
        ds = hub.load_dataset("hotpotqa/hotpot_qa", "distractor", split="validation")
        return [
            {
                "question": r["question"],
                "answer": r["answer"],
                "context": list(zip(r["context"]["title"], r["context"]["sentences"])),
            }
            for r in ds
        ]
    except Exception:  # offline or hub error: the caller reports the task unavailable  # noqa: BLE001
        return None


@lru_cache(maxsize=4)
def _load(name: str, path: str | None) -> QaData:
    if path:
        p = Path(path).expanduser()
        if not p.exists():
            raise TaskUnavailable(f"{name} data not found at {p}: {FIXES[name]}")
        check_regular(p, FIXES[name])  # a FIFO or device: refused before it is opened
        streamed = _hotpotqa_streamed(p) if name == "hotpotqa" else None
        if streamed and streamed[0]:
            return QaData(qas=streamed[0], docs=streamed[1], hash=streamed[2], source=str(p))
        with open_binary(p, FIXES[name]) as f:
            raw_bytes = f.read()
        # Read whole: decodable, valid JSON, the official file's shape; one line naming the problem.
        raw = parse_json(decode_json(raw_bytes, p, FIXES[name]), p, FIXES[name], SHAPES[name])
        source = str(p)
    else:
        raw = _from_hub(name)
        if raw is None:
            raise TaskUnavailable(
                f"{'SQuAD v2 dev' if name == 'squad' else 'HotpotQA dev (distractor)'} not found: {FIXES[name]}"
            )
        raw_bytes = json.dumps(raw, sort_keys=True).encode()
        source = "hub"
    try:
        SHAPES[name].validate_python(raw)  # files were checked above; a hub copy of another shape here
    except ValidationError as exc:
        raise DataFileError(f"{source} does not look like {name} ({describe(exc)}): {FIXES[name]}") from None
    qas, docs = read_squad(raw) if name == "squad" else read_hotpotqa(raw)
    if not qas:
        raise TaskUnavailable(f"{source} holds no answerable questions: {FIXES[name]}")
    return QaData(qas=qas, docs=docs, hash=hashlib.sha256(raw_bytes).hexdigest()[:16], source=source)


def load_qa(name: str, path: str | os.PathLike | None = None) -> QaData:
    path = path or os.environ.get(ENV[name])
    return _load(name, str(path) if path else None)
