"""The one reader of task data files named by flags (--essays, --squad, ...) and HARNESS_* variables.

    from tasks.data.reader import read_text, read_json, read_jsonl, data_files
    text = read_text(path, FIX)                              # UTF-8 text of a regular file
    rows = read_jsonl(path, FIX, row=IclRow)                 # every line an object of the row schema
    data = read_json(path, FIX, shape=SquadFile)             # one JSON document of the given schema
    files = data_files(folder, (".txt",), FIX)               # a folder's data files, sorted

These files are untrusted input. Each reader checks, before and while reading, in this order:
  1. the path is a regular file: a FIFO would block the read forever, a device (/dev/zero) never
     ends; the type is checked with stat and again on the opened descriptor (opened non-blocking,
     so even a FIFO swapped in between cannot hang it);
  2. the bytes are UTF-8 (a JSON document may start with a byte-order mark, or be UTF-16/32 as
     json.loads of bytes detects);
  3. the JSON parses, and JSON Lines rows are objects;
  4. every row (or the document) follows its pydantic schema (strict types: a label "3" is not 3,
     NaN is not a number), declared next to the loader that uses it.
A problem is a `DataFileError` (a TaskUnavailable: the task is listed as unavailable with the
reason, never scored 0), one line naming the file, the line, what is wrong, and the fix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from harness.core.errors import TaskUnavailable
from harness.core.paths import NotARegularFile, file_kind, open_regular


class DataFileError(TaskUnavailable):
    """A data file that cannot be used: not a regular file, not UTF-8, not JSON, or rows of the wrong shape."""


class Row(BaseModel):
    """Base of the row schemas: strict types, finite numbers, other fields kept."""

    model_config = ConfigDict(strict=True, extra="allow", allow_inf_nan=False)


def check_regular(path: str | os.PathLike, fix: str) -> Path:
    """path, if it names a regular file (symlinks followed); else a DataFileError."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise DataFileError(f"{p} not found: {fix}") from None
    except OSError as exc:
        raise DataFileError(f"cannot read {p} ({exc.strerror}): {fix}") from None
    kind = file_kind(st.st_mode)
    if kind:
        raise DataFileError(f"{p} is {kind}, not a data file: {fix}")
    return p


def open_binary(path: str | os.PathLike, fix: str) -> BinaryIO:
    """A regular file opened for reading in binary (harness.core.paths.open_regular: checked before
    opening and on the descriptor after; a FIFO swapped in between cannot hang the open)."""
    p = check_regular(path, fix)
    try:
        return os.fdopen(open_regular(p), "rb")
    except NotARegularFile as exc:
        raise DataFileError(f"{p} is {exc.kind}, not a data file: {fix}") from None
    except OSError as exc:
        raise DataFileError(f"cannot read {p} ({exc.strerror}): {fix}") from None


def read_bytes(path: str | os.PathLike, fix: str) -> bytes:
    """The bytes of a regular file."""
    with open_binary(path, fix) as f:
        try:
            return f.read()
        except OSError as exc:
            raise DataFileError(f"cannot read {path} ({exc.strerror}): {fix}") from None


def _line_of(data: bytes, pos: int) -> int:
    return data.count(b"\n", 0, pos) + 1


def decode(data: bytes, path: str | os.PathLike, fix: str, encoding: str = "utf-8") -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        what = "UTF-8 text" if encoding == "utf-8" else f"valid {encoding.upper()}"
        raise DataFileError(
            f"{path} is not {what} (line {_line_of(data, exc.start)}, byte {exc.start}): {fix}"
        ) from None


def decode_json(data: bytes, path: str | os.PathLike, fix: str) -> str:
    """A JSON document's bytes as text: UTF-8 (a BOM allowed), or UTF-16/32 as RFC 8259's
    encoding detection (and json.loads of bytes) reads them."""
    return decode(data, path, fix, json.detect_encoding(data))


def read_text(path: str | os.PathLike, fix: str) -> str:
    """The UTF-8 text of a regular file, newlines translated as text-mode open() does ("\r\n" and
    "\r" become "\n"), so a document reads the same as before this reader existed."""
    text = decode(read_bytes(path, fix), path, fix)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _problem(exc: ValidationError) -> str:
    from harness.core.results_schema import describe

    return describe(exc)


def _adapter(shape: Any) -> TypeAdapter:
    return shape if isinstance(shape, TypeAdapter) else TypeAdapter(shape)


def parse_json(text: str, path: str | os.PathLike, fix: str, shape: Any = None) -> Any:
    """One JSON document (text already decoded), checked against `shape` (a type/model) when given."""
    try:
        data = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise DataFileError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}): {fix}"
        ) from None
    except RecursionError:
        raise DataFileError(f"{path} is not valid JSON (nested too deeply): {fix}") from None
    if shape is not None:
        try:
            _adapter(shape).validate_python(data)
        except ValidationError as exc:
            raise DataFileError(f"{path} does not have the expected shape ({_problem(exc)}): {fix}") from None
        except RecursionError:
            raise DataFileError(f"{path} is nested too deeply: {fix}") from None
    return data


def read_json(path: str | os.PathLike, fix: str, shape: Any = None) -> Any:
    """A JSON file (a regular file; UTF-8, or UTF-16/32), checked against `shape` when given."""
    return parse_json(decode_json(read_bytes(path, fix), path, fix), path, fix, shape)


def read_jsonl(path: str | os.PathLike, fix: str, row: Any = None) -> list[dict]:
    """The rows of a JSON Lines file: each non-blank line one JSON object following `row`."""
    text = read_text(path, fix)
    check = _adapter(row) if row is not None else None
    rows = []
    for n, line in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(f"{path} line {n} is not valid JSON ({exc.msg}, column {exc.colno}): {fix}") from None
        except RecursionError:
            raise DataFileError(f"{path} line {n} is not valid JSON (nested too deeply): {fix}") from None
        if not isinstance(value, dict):
            raise DataFileError(f"{path} line {n} is not a JSON object (found {type(value).__name__}): {fix}")
        if check is not None:
            try:
                check.validate_python(value)
            except ValidationError as exc:
                raise DataFileError(f"{path} line {n}: {_problem(exc)}: {fix}") from None
            except RecursionError:
                raise DataFileError(f"{path} line {n} is nested too deeply: {fix}") from None
        rows.append(value)
    return rows


def data_files(folder: str | os.PathLike, suffixes: Iterable[str], fix: str) -> list[Path]:
    """The files of a folder with one of the suffixes, sorted by name; each a regular file."""
    root = Path(folder)
    suffixes = tuple(suffixes)
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise DataFileError(f"cannot list {root} ({exc.strerror}): {fix}") from None
    return [check_regular(root / name, fix) for name in names if name.endswith(suffixes)]
