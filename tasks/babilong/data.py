"""BABILong's two sources: bAbI questions (the facts to hide) and PG19 books (the text they hide in).

Offline: `--babilong-data DIR` or HARNESS_BABILONG=DIR holding
    bAbI's test files  qa1_single-supporting-fact_test.txt ... qa20_agents-motivations_test.txt, in DIR,
                       DIR/en-10k, DIR/en or DIR/tasks_1-20_v1-2/en-10k (the tasks_1-20_v1-2 release
                       unpacked there; the reference's leaderboard sets are built from its test questions)
    PG19 books         DIR/pg19/*.txt or DIR/pg19/test/*.txt, one book per file (PG19's test split,
                       which the reference samples its background text from)
Online, with no folder given: the bAbI test questions of the hub dataset RMT-team/babilong-1k-samples
(config 0k: the facts alone) and PG19's test split from the hub dataset deepmind/pg19, through
harness.core.hub (offline or without a connection it fails at once). Without PG19 text the tasks with
background text are unavailable, never run on another text; the 0K tasks (facts only) need no PG19.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.core.errors import TaskUnavailable
from tasks.data.reader import decode, read_bytes

ENV_VAR = "HARNESS_BABILONG"
TASK_FILES = {
    "qa1": "qa1_single-supporting-fact",
    "qa2": "qa2_two-supporting-facts",
    "qa3": "qa3_three-supporting-facts",
    "qa4": "qa4_two-arg-relations",
    "qa5": "qa5_three-arg-relations",
    "qa6": "qa6_yes-no-questions",
    "qa7": "qa7_counting",
    "qa8": "qa8_lists-sets",
    "qa9": "qa9_simple-negation",
    "qa10": "qa10_indefinite-knowledge",
    "qa11": "qa11_basic-coreference",
    "qa12": "qa12_conjunction",
    "qa13": "qa13_compound-coreference",
    "qa14": "qa14_time-reasoning",
    "qa15": "qa15_basic-deduction",
    "qa16": "qa16_basic-induction",
    "qa17": "qa17_positional-reasoning",
    "qa18": "qa18_size-reasoning",
    "qa19": "qa19_path-finding",
    "qa20": "qa20_agents-motivations",
}
_BABI_DIRS = ("", "en-10k", "en", "tasks_1-20_v1-2/en-10k", "tasks_1-20_v1-2/en")
_PG19_DIRS = ("pg19/test", "pg19")
HUB_BABI = "RMT-team/babilong-1k-samples"
HUB_PG19 = "deepmind/pg19"


@dataclass(frozen=True)
class Question:
    facts: tuple[str, ...]  # the story's statements before the question, in order
    question: str
    answer: str
    supporting: tuple[int, ...]  # positions in `facts` of the supporting facts (() when unknown)


@dataclass(frozen=True)
class Books:
    texts: tuple[str, ...]
    hash: str
    source: str


def _fix() -> str:
    from tasks.data_sources import source

    return source("babilong").fix()


def folder() -> Path | None:
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else None


def parse_babi(text: str, where: str) -> tuple[Question, ...]:
    """One question per question line, with every statement of its story before it (the reference's
    TaskDataset: earlier questions of the story are dropped, statements kept)."""
    out: list[Question] = []
    story: list[str] = []
    ids: dict[int, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        head, _, rest = line.partition(" ")
        if not head.isdigit() or not rest:
            raise TaskUnavailable(f"{where} line {n} is not a bAbI line ('<id> <text>'): {_fix()}")
        num = int(head)
        if num == 1:
            story, ids = [], {}
        if "\t" in rest:
            parts = rest.split("\t")
            try:
                sup = tuple(ids[int(x)] for x in re.split(r"\s+", parts[2].strip()) if x) if len(parts) > 2 else ()
            except (KeyError, ValueError):
                raise TaskUnavailable(
                    f"{where} line {n}: its supporting fact ids are not statements of its story"
                ) from None
            out.append(Question(tuple(story), parts[0], parts[1], sup))
        else:
            ids[num] = len(story)
            story.append(rest)
    if not out:
        raise TaskUnavailable(f"{where} holds no bAbI question: {_fix()}")
    return tuple(out)


def _find_babi(root: Path, task: str) -> Path | None:
    for sub in _BABI_DIRS:
        hits = sorted((root / sub).glob(f"{task}_*_test.txt")) if (root / sub).is_dir() else []
        if hits:
            return hits[0]
    return None


def _split_facts(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=\.)\s+", text.strip()) if s]


@lru_cache(maxsize=32)
def _questions(task: str, root: str | None) -> tuple[tuple[Question, ...], str]:
    if root:
        path = _find_babi(Path(root), task)
        if path is None:
            raise TaskUnavailable(f"BABILong {task}: no {TASK_FILES[task]}_test.txt in {root}: {_fix()}")
        raw = read_bytes(path, _fix())  # a regular file (never a FIFO that blocks the read)
        return parse_babi(decode(raw, path, _fix()), str(path)), hashlib.sha256(raw).hexdigest()[:16]
    from harness.core import hub

    try:
        rows = hub.load_dataset(HUB_BABI, "0k", split=task)
    except hub.HubUnreachable as exc:
        raise TaskUnavailable(f"BABILong {task} not found ({hub.first_line(exc)}): {_fix()}") from None
    except Exception as exc:  # noqa: BLE001  (any hub failure becomes one line)
        raise TaskUnavailable(
            f"BABILong {task} could not be loaded from the hub ({hub.first_line(exc)}): {_fix()}"
        ) from None
    qs = tuple(Question(tuple(_split_facts(r["input"])), r["question"], r["target"], ()) for r in rows)
    digest = hashlib.sha256(repr(qs).encode()).hexdigest()[:16]
    return qs, digest


def questions(task: str) -> tuple[tuple[Question, ...], str]:
    """(the task's bAbI test questions in file order, hash of their source)."""
    root = folder()
    return _questions(task, str(root) if root else None)


@lru_cache(maxsize=4)
def _books(root: str | None) -> Books:
    if root:
        for sub in _PG19_DIRS:
            d = Path(root) / sub
            files = sorted(d.glob("*.txt")) if d.is_dir() else []
            if files:
                digest = hashlib.sha256()
                texts = []
                for f in files:
                    raw = read_bytes(f, _fix())
                    digest.update(f.name.encode() + b"\0" + raw + b"\0")
                    # a binary or non-UTF-8 file is refused (one line naming it), never read with
                    # replacement characters into every haystack
                    texts.append(decode(raw, f, _fix()))
                if not any(len(t) > 1000 for t in texts):
                    raise TaskUnavailable(f"the PG19 books in {d} are empty or tiny: {_fix()}")
                return Books(tuple(texts), digest.hexdigest()[:16], str(d))
        raise TaskUnavailable(f"BABILong: no PG19 text (pg19/*.txt) in {root}: {_fix()}")
    from harness.core import hub

    try:
        rows = hub.load_dataset(HUB_PG19, split="test")
    except hub.HubUnreachable as exc:
        raise TaskUnavailable(f"BABILong: PG19 text not found ({hub.first_line(exc)}): {_fix()}") from None
    except Exception as exc:  # noqa: BLE001
        raise TaskUnavailable(
            f"BABILong: PG19 could not be loaded from the hub ({hub.first_line(exc)}): {_fix()}"
        ) from None
    hub_texts = tuple(r["text"] for r in rows)
    return Books(hub_texts, hashlib.sha256("\0".join(hub_texts).encode()).hexdigest()[:16], f"hub:{HUB_PG19}")


def books() -> Books:
    root = folder()
    return _books(str(root) if root else None)


def clear_caches() -> None:
    _questions.cache_clear()
    _books.cache_clear()
