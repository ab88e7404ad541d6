"""AA-LCR's released questions and document sets (hub dataset ArtificialAnalysis/AA-LCR), from a
local folder or the hub.

Offline: `--aa-lcr-data DIR` or HARNESS_AA_LCR=DIR, a folder holding the dataset's files as released:
    AA-LCR_Dataset.csv                         the 100 questions (the card's "test" split)
    extracted_text/AA-LCR_extracted-text.zip   the document sets' text, lcr/<category>/<set id>/<file>
The zip may also lie at the folder's top, or be unpacked there (lcr/<category>/<set id>/<file>).
Online, with no folder given, both files are downloaded from the hub (harness.core.hub: offline, or
without a connection, it fails at once, in one line naming the flag).

A question's columns, as released: document_category, document_set_id, question_id, question,
answer, data_source_filenames (the set's documents, ";"-separated, in prompt order),
data_source_urls, input_tokens (the prompt's cl100k_base count). Rows are validated at the boundary
(every column there, input_tokens a whole number). A document is found in its set's folder as
NeMo-Skills' prepare.py finds it (find_actual_file): the name as written, else with the released
zip's mis-decoded characters (a curly apostrophe as "ΓÇÖ", ...), else a file of the folder whose
name matches after undoing them. A document not found is an error naming it (NeMo-Skills would
skip it and then stop on the token count that no longer matches).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.core.errors import TaskUnavailable
from tasks.aa_lcr.prompts import question_prompt
from tasks.data.reader import decode, read_bytes

ENV_VAR = "HARNESS_AA_LCR"
HUB_REPO = "ArtificialAnalysis/AA-LCR"
QUESTIONS = "AA-LCR_Dataset.csv"
ZIP = "extracted_text/AA-LCR_extracted-text.zip"
ROOT = "lcr"  # the zip's top folder
COLUMNS = (
    "document_category",
    "document_set_id",
    "question_id",
    "question",
    "answer",
    "data_source_filenames",
    "data_source_urls",
    "input_tokens",
)
# prepare.py's find_actual_file: clean character -> the zip's mis-decoded form, in its order
ARTIFACTS = (
    ("'", "ΓÇÖ"),
    ("\u2019", "ΓÇÖ"),
    ("\u2018", "ΓÇÖ"),
    ("\u2014", "ΓÇö"),
    ("\u2013", "ΓÇô"),
    ("ş", "s╠º"),
)


@dataclass(frozen=True)
class Item:
    """One released question with its documents' prompt (`row`: its place in the CSV)."""

    row: int
    question_id: str
    document_category: str
    document_set_id: str
    question: str
    answer: str
    filenames: tuple[str, ...]
    input_tokens: int
    prompt: str


def fix() -> str:
    from tasks.data_sources import source

    return source("aa_lcr").fix()


def _to_artifacts(name: str) -> str:
    for clean, artifact in ARTIFACTS:
        name = name.replace(clean, artifact)
    return name


def _from_artifacts(name: str) -> str:
    for clean, artifact in ARTIFACTS:
        name = name.replace(artifact, clean)
    return name


def resolve(name: str, present: list[str]) -> str | None:
    """The file of the set's folder (names in `present`) that the released name means, or None."""
    if name in present:
        return name
    marked = _to_artifacts(name)
    if marked != name and marked in present:
        return marked
    for actual in present:
        if marked == actual or name == _from_artifacts(actual):
            return actual
    return None


def _text(data: bytes, where: str) -> str:
    """A document's text as NeMo-Skills reads it: UTF-8, newlines translated (open(..., "rt"))."""
    text = decode(data, where, fix())
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


class Documents:
    """The document sets: an unpacked lcr/ folder or the released zip, as {set folder: {name: reader}}."""

    def __init__(self, source: Path):
        self.source = source
        self.folders: dict[str, dict[str, object]] = {}
        if source.is_dir():
            for path in sorted(source.rglob("*")):
                if path.is_file():
                    folder = path.parent.relative_to(source).as_posix()
                    self.folders.setdefault(folder, {})[path.name] = path
            return
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(read_bytes(source, fix())))
        except zipfile.BadZipFile as exc:
            raise TaskUnavailable(f"{source} is not a zip file ({exc}): {fix()}") from None
        for info in self.zip.infolist():
            if not info.is_dir() and info.filename.startswith(ROOT + "/"):
                folder, _, name = info.filename[len(ROOT) + 1 :].rpartition("/")
                self.folders.setdefault(folder, {})[name] = info

    def read(self, category: str, set_id: str, name: str, where: str) -> str:
        folder = self.folders.get(f"{category}/{set_id}", {})
        actual = resolve(name, sorted(folder))
        if actual is None:
            raise TaskUnavailable(f"{where}: document {category}/{set_id}/{name} is not in {self.source}: {fix()}")
        entry = folder[actual]
        data = read_bytes(entry, fix()) if isinstance(entry, Path) else self.zip.read(entry)  # type: ignore[arg-type]
        return _text(data, f"{self.source}:{ROOT}/{category}/{set_id}/{actual}")


def _local(folder: Path) -> tuple[Path, Path]:
    questions = folder / QUESTIONS
    if not questions.is_file():
        raise TaskUnavailable(f"AA-LCR questions {questions} not found: {fix()}")
    for docs in (folder / ZIP, folder / Path(ZIP).name, folder / ROOT):
        if docs.exists():
            return questions, docs
    raise TaskUnavailable(f"AA-LCR documents ({ZIP} or an unpacked {ROOT}/) not found in {folder}: {fix()}")


def _hub() -> tuple[Path, Path]:
    from harness.core import hub

    try:
        return Path(hub.download(HUB_REPO, QUESTIONS)), Path(hub.download(HUB_REPO, ZIP))
    except hub.HubUnreachable as exc:
        raise TaskUnavailable(f"AA-LCR data not found ({hub.first_line(exc)}): {fix()}") from None
    except Exception as exc:  # noqa: BLE001  (any hub failure becomes one line)
        raise TaskUnavailable(f"AA-LCR could not be loaded from the hub ({hub.first_line(exc)}): {fix()}") from None


def _rows(path: Path) -> list[dict]:
    # newline="" keeps a quoted field's own line breaks as released (pandas' CSV reader does too)
    reader = csv.DictReader(io.StringIO(decode(read_bytes(path, fix()), path, fix()), newline=""))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise TaskUnavailable(f"{path} lacks column(s) {', '.join(missing)} of AA-LCR's questions: {fix()}")
    return list(reader)


def _item(n: int, row: dict, docs: Documents, where: str) -> Item:
    if any(not isinstance(row.get(c), str) for c in COLUMNS):
        raise TaskUnavailable(f"{where}: a column is missing on this row: {fix()}")
    try:
        tokens = int(row["input_tokens"])
    except ValueError:
        raise TaskUnavailable(f"{where}: input_tokens {row['input_tokens'][:20]!r} is not a number: {fix()}") from None
    names = tuple(row["data_source_filenames"].split(";"))
    category, set_id = row["document_category"], row["document_set_id"]
    texts = [docs.read(category, set_id, name, where) for name in names]
    return Item(
        n,
        row["question_id"],
        category,
        set_id,
        row["question"],
        row["answer"],
        names,
        tokens,
        question_prompt(texts, row["question"]),
    )


@lru_cache(maxsize=2)
def _load(folder: str | None) -> tuple[tuple[Item, ...], str]:
    questions, source = _local(Path(folder).expanduser()) if folder else _hub()
    docs = Documents(source)
    rows = _rows(questions)
    items = tuple(_item(n, r, docs, f"{questions} row {n + 1}") for n, r in enumerate(rows))
    if not items:
        raise TaskUnavailable(f"{questions} has no questions: {fix()}")
    digest = hashlib.sha256()
    for it in items:  # the content (a local copy and the hub's hash the same), prompt included
        digest.update(repr((it.question_id, it.document_category, it.answer, it.input_tokens)).encode())
        digest.update(hashlib.sha256(it.prompt.encode("utf-8")).digest())
    return items, digest.hexdigest()[:16]


def load_items() -> tuple[Item, ...]:
    """The released questions in CSV order, each with its prompt."""
    return _load(os.environ.get(ENV_VAR))[0]


def items_hash() -> str:
    return _load(os.environ.get(ENV_VAR))[1]


def clear_cache() -> None:
    _load.cache_clear()
