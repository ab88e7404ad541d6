"""MMLU and HellaSwag data: local files offline, the hub (cais/mmlu, Rowan/hellaswag) online.

Local layouts (the hub datasets' rows, as jsonl):
    HARNESS_MMLU=DIR       DIR/test.jsonl and DIR/dev.jsonl, rows {question, subject, choices, answer}
                           (cais/mmlu "all"; answer is the index 0-3 of the right choice)
    HARNESS_HELLASWAG=DIR  DIR/validation.jsonl, rows {ind, activity_label, ctx_a, ctx_b, ctx,
                           endings, source_id, split, split_type, label}
Either way the rows are written once per content hash under the harness cache as plain jsonl
files that lm-eval reads with `dataset_path: json` (MMLU split per subject, as lm-eval's tasks are).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from functools import lru_cache
from pathlib import Path

from pydantic import Field, StrictInt, StrictStr, model_validator

from harness.core.errors import TaskUnavailable
from tasks.data.reader import Row, read_jsonl

MMLU_ENV = "HARNESS_MMLU"
HELLASWAG_ENV = "HARNESS_HELLASWAG"


def cache_root() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "longctx-harness")) / "short"


class MmluRow(Row):
    """cais/mmlu "all": answer is the index of the right choice."""

    question: str
    subject: str
    choices: list[str] = Field(min_length=2)
    answer: int = Field(ge=0)

    @model_validator(mode="after")
    def _answer_is_a_choice(self) -> MmluRow:
        if self.answer >= len(self.choices):
            raise ValueError(f"answer {self.answer} is not an index of its {len(self.choices)} choices")
        return self


class HellaSwagRow(Row):
    """Rowan/hellaswag: label is the index of the right ending (a digit string there, or an int)."""

    ctx: str
    ctx_a: str
    ctx_b: str
    activity_label: str
    endings: list[str] = Field(min_length=2)
    label: StrictInt | StrictStr

    @model_validator(mode="after")
    def _label_is_an_ending(self) -> HellaSwagRow:
        label = self.label
        if isinstance(label, str):
            if not (label.isascii() and label.isdigit()):
                raise ValueError(f"label {label!r} is not an ending's index")
            label = int(label)
        if not 0 <= label < len(self.endings):
            raise ValueError(f"label {label} is not an index of its {len(self.endings)} endings")
        return self


_FIX = "write the hub dataset's rows as JSON Lines (see tasks/short/data.py for the fields)"


def _read_jsonl(path: Path, row: type[Row]) -> list[dict]:
    return read_jsonl(path, _FIX, row=row)


def _hash_rows(*splits: list[dict]) -> str:
    h = hashlib.sha256()
    for rows in splits:
        for r in rows:
            h.update(json.dumps(r, sort_keys=True, ensure_ascii=False).encode() + b"\n")
        h.update(b"--split--")
    return h.hexdigest()[:16]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    from harness.core.atomic import atomic_write

    atomic_write(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _rows(env: str, files: list[str], repo: tuple[str, str | None], what: str, row: type[Row]) -> list[list[dict]]:
    folder = os.environ.get(env)
    if folder:
        paths = [Path(folder) / f for f in files]
        missing = [str(p) for p in paths if not p.exists()]  # anything else there: the reader says what
        if missing:
            raise TaskUnavailable(
                f"{what} file {missing[0]} not found: {env} must name a folder with {', '.join(files)}"
            )
        return [_read_jsonl(p, row) for p in paths]
    from harness.core import hub
    from tasks.data_sources import source

    fix = source(what.lower()).fix()
    try:
        return [[dict(r) for r in hub.load_dataset(repo[0], repo[1], split=f.removesuffix(".jsonl"))] for f in files]
    except hub.HubUnreachable as exc:
        raise TaskUnavailable(f"{what} data not found ({hub.first_line(exc)}): {fix}") from None
    except Exception as exc:  # any hub failure becomes one TaskUnavailable line  # noqa: BLE001
        raise TaskUnavailable(f"{what} could not be loaded from the hub ({hub.first_line(exc)}): {fix}") from None


@lru_cache(maxsize=4)
def _mmlu(folder_key: str | None) -> tuple[dict[str, dict[str, str]], list[tuple[str, int]], str]:
    test, dev = _rows(MMLU_ENV, ["test.jsonl", "dev.jsonl"], ("cais/mmlu", "all"), "MMLU", MmluRow)
    digest = _hash_rows(test, dev)
    by_subject: dict[str, dict[str, list[dict]]] = {}
    for split, rows in (("test", test), ("dev", dev)):
        for r in rows:
            by_subject.setdefault(r["subject"], {"test": [], "dev": []})[split].append(r)
    root = cache_root() / f"mmlu-{digest}"
    files: dict[str, dict[str, str]] = {}
    order: list[tuple[str, int]] = []
    for subject in sorted(by_subject):
        splits = by_subject[subject]
        if not splits["test"]:
            continue
        if len(splits["dev"]) < 5:
            raise TaskUnavailable(
                f"MMLU subject {subject} has {len(splits['dev'])} dev rows, 5-shot needs 5: use the full dev split"
            )
        files[subject] = {}
        for split in ("test", "dev"):
            path = root / subject / f"{split}.jsonl"
            if not path.is_file():
                _write_jsonl(path, splits[split])
            files[subject][split] = str(path)
        order += [(subject, i) for i in range(len(splits["test"]))]
    # A fixed shuffle: the full set gives lm-eval's micro average exactly, and a --samples prefix
    # is an unbiased subsample instead of the first few subjects.
    random.Random(0).shuffle(order)
    return files, order, digest


def mmlu_files() -> tuple[dict[str, dict[str, str]], list[tuple[str, int]], str]:
    """({subject: {"test": path, "dev": path}}, (subject, doc_id) of each sample index, data hash)."""
    return _mmlu(os.environ.get(MMLU_ENV))


@lru_cache(maxsize=4)
def _hellaswag(folder_key: str | None) -> tuple[str, tuple[int, ...], str]:
    (rows,) = _rows(HELLASWAG_ENV, ["validation.jsonl"], ("Rowan/hellaswag", None), "HellaSwag", HellaSwagRow)
    digest = _hash_rows(rows)
    path = cache_root() / f"hellaswag-{digest}" / "validation.jsonl"
    if not path.is_file():
        _write_jsonl(path, rows)
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)  # validation is ActivityNet then WikiHow: a prefix must mix both
    return str(path), tuple(order), digest


def hellaswag_file() -> tuple[str, tuple[int, ...], str]:
    """(validation jsonl path, doc id of each sample index, data hash)."""
    return _hellaswag(os.environ.get(HELLASWAG_ENV))


def clear_caches() -> None:
    _mmlu.cache_clear()
    _hellaswag.cache_clear()
