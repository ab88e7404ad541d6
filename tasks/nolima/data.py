"""NoLiMa's released files: the needle set and the shuffled-book haystacks.

Offline (the usual case) point --nolima-data DIR / HARNESS_NOLIMA=DIR at a folder laid out as
adobe-research/NoLiMa's data/download_NoLiMa_data.sh leaves it (hub dataset amodaresi/NoLiMa):

    DIR/needlesets/needle_set.json
    DIR/haystack/rand_shuffle/rand_book_1.txt ... rand_book_5.txt

Online, with no folder set, the same files come from the hub dataset amodaresi/NoLiMa. A missing
file makes the NoLiMa tasks unavailable with one line naming the folder and the file, never a 0.

The needle set is untrusted input: each entry is checked for the fields the reference's
evaluation/run_tests.py reads (id, needle, questions, tests with input_args, character_set when
the needle names {CHAR}); distractor needle sets (needle_set_w_Distractor.json) are refused, as
their placement draws from a random stream this implementation does not reproduce.
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

ENV_VAR = "HARNESS_NOLIMA"
HUB_REPO = "amodaresi/NoLiMa"
NEEDLE_SET = "needlesets/needle_set.json"
HAYSTACK_DIR = "haystack/rand_shuffle"
HUB_BOOKS = [f"rand_book_{i}.txt" for i in range(1, 6)]
FIX = f"pass --nolima-data DIR (or set {ENV_VAR}) to a folder holding NoLiMa's {NEEDLE_SET} and {HAYSTACK_DIR}/*.txt"

_data_dir: Path | None = None


def set_data_dir(path: str | os.PathLike | None) -> None:
    """Use this folder (the CLI's --nolima-data); None goes back to the env variable / the hub."""
    global _data_dir
    _data_dir = Path(path).expanduser() if path is not None else None
    _load.cache_clear()


def data_dir() -> Path | None:
    if _data_dir is not None:
        return _data_dir
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else None


def _offline() -> bool:
    from harness.core import hub

    return hub.offline_reason() is not None


@dataclass(frozen=True)
class Test:
    """One question-needle pair of the needle set, expanded as evaluation/run_tests.py does."""

    name: str  # <exp id>_<test id>_<question type>
    question_type: str
    needle: str  # with {CHAR} still in it when the needle names a random character
    question: str
    gold_answers: tuple[str, ...]  # used when the needle names no {CHAR}
    character_set: tuple[str, ...]
    seed_offset: int  # int(exp id[:4]): the reference seeds each test with base_seed + this + haystack no.
    task_template: str | None  # None: the reference's default template


@dataclass(frozen=True)
class NoLiMaData:
    tests: tuple[Test, ...]
    books: tuple[tuple[str, str], ...]  # (file name, text), sorted by name
    hash: str


def _bad(path, what: str) -> TaskUnavailable:
    return TaskUnavailable(f"{path} is not a NoLiMa needle set ({what}): {FIX}")


def _str_list(value, path, what) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(path, f"{what} is not a list of strings")
    return tuple(value)


def expand_tests(needle_set, path="needle_set.json") -> tuple[Test, ...]:
    """The tests of a needle set, in the reference's order (experiment, question type, test).

    Argument filling follows run_tests.py, quirk included: the question is rebuilt from the
    template for each placeholder it holds, so only the last placeholder's substitution stays."""
    if not isinstance(needle_set, list) or not needle_set:
        raise _bad(path, "not a non-empty JSON list")
    tests = []
    for n, exp in enumerate(needle_set):
        if not isinstance(exp, dict):
            raise _bad(path, f"entry {n} is not an object")
        for key, kind in (("id", str), ("needle", str), ("questions", dict), ("tests", dict)):
            if not isinstance(exp.get(key), kind):
                raise _bad(path, f"entry {n} lacks {key!r} ({kind.__name__})")
        exp_id = exp["id"]
        if not exp_id[:4].isdigit():
            raise _bad(path, f"entry {n} id {exp_id!r} does not start with 4 digits")
        if exp.get("distractors"):
            raise _bad(path, f"entry {n} has distractors; only distractor-free needle sets are supported")
        chars = _str_list(exp.get("character_set") or [], path, f"entry {n} character_set")
        if "{CHAR}" in exp["needle"] and not chars:
            raise _bad(path, f"entry {n} needle names {{CHAR}} but there is no character_set")
        template = exp.get("task_template")
        if template is not None and not (
            isinstance(template, str) and "{haystack}" in template and "{question}" in template
        ):
            raise _bad(path, f"entry {n} task_template lacks {{haystack}} or {{question}}")
        for qtype, question in exp["questions"].items():
            if not isinstance(question, str):
                raise _bad(path, f"entry {n} question {qtype!r} is not a string")
            for test_id, test in exp["tests"].items():
                if not isinstance(test, dict):
                    raise _bad(path, f"entry {n} test {test_id!r} is not an object")
                args = _str_list(test.get("input_args"), path, f"entry {n} test {test_id!r} input_args")
                needle, full_question = exp["needle"], question
                for arg_no, arg in enumerate(args):
                    ph = "{" + str(arg_no + 1) + "}"
                    if ph in question:
                        full_question = question.replace(ph, arg)
                    if ph in needle:
                        needle = needle.replace(ph, arg)
                gold = test.get("gold_answers", "")
                gold_t = (gold,) if isinstance(gold, str) else _str_list(gold, path, f"test {test_id!r} gold_answers")
                if "{CHAR}" not in needle and not any(gold_t):
                    raise _bad(path, f"entry {n} test {test_id!r} has neither {{CHAR}} nor gold_answers")
                tests.append(
                    Test(
                        name=f"{exp_id}_{test_id}_{qtype}",
                        question_type=qtype,
                        needle=needle,
                        question=full_question,
                        gold_answers=tuple(g for g in gold_t if g),
                        character_set=chars,
                        seed_offset=int(exp_id[:4]),
                        task_template=template,
                    )
                )
    return tuple(tests)


def _local(folder: Path) -> tuple[bytes, list[tuple[str, bytes]]]:
    needle_path = folder / NEEDLE_SET
    if not needle_path.exists():  # anything else there (a FIFO, a device) the reader names
        raise TaskUnavailable(f"NoLiMa file {needle_path} not found: {FIX}")
    book_dir = folder / HAYSTACK_DIR
    books = sorted(book_dir.glob("*.txt")) if book_dir.is_dir() else []
    if not books:
        raise TaskUnavailable(f"NoLiMa haystacks not found: {book_dir} holds no .txt book (rand_book_1.txt ...): {FIX}")
    # regular files only (the shared data reader): a FIFO named like a book never blocks the read
    return read_bytes(needle_path, FIX), [(b.name, read_bytes(b, FIX)) for b in books]


def _hub() -> tuple[bytes, list[tuple[str, bytes]]]:
    try:
        from harness.core import hub

        def get(name: str) -> bytes:
            return Path(hub.download(HUB_REPO, name, repo_type="dataset")).read_bytes()

        return get(NEEDLE_SET), [(b, get(f"{HAYSTACK_DIR}/{b}")) for b in HUB_BOOKS]
    except Exception as exc:  # every hub failure becomes one TaskUnavailable line  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:150]
        raise TaskUnavailable(f"NoLiMa data could not be loaded from the hub {HUB_REPO} ({first}): {FIX}") from None


@lru_cache(maxsize=4)
def _load(folder: Path | None) -> NoLiMaData:
    if folder is not None:
        if not folder.is_dir():
            raise TaskUnavailable(f"NoLiMa folder {folder} does not exist: {FIX}")
        raw, books = _local(folder)
        where = folder / NEEDLE_SET
    elif _offline():
        raise TaskUnavailable(f"NoLiMa data not found (offline): {FIX}")
    else:
        raw, books = _hub()
        where = Path(NEEDLE_SET)
    try:
        needle_set = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _bad(where, "not UTF-8 JSON") from None
    tests = expand_tests(needle_set, where)
    texts = []
    for name, data in books:
        try:
            texts.append((name, data.decode("utf-8")))
        except UnicodeDecodeError:
            raise TaskUnavailable(f"NoLiMa haystack {name} is not UTF-8 text: {FIX}") from None
    digest = hashlib.sha256(raw)
    for name, text in texts:  # the reference hashes each book's text (BookHaystack.get_hash)
        digest.update(name.encode() + b"\0" + hashlib.sha256(text.encode()).digest())
    return NoLiMaData(tests, tuple(texts), digest.hexdigest()[:16])


def load() -> NoLiMaData:
    return _load(data_dir())
