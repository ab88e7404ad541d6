"""The pieces every reader of harness.imports shares: an imported score (`Cell`) with its samples
(`Sample`) when the harness wrote them, where the scores came from (`Source`), and the checks of a
file's JSON and numbers (`loads_json`, `read_jsonl`, `number`, `percent`).

The readers (harness.imports.lm_eval, .ruler, .helmet) import these from here, and the package
(harness/imports/__init__.py) imports the readers: one direction, no circle.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import UserError

MAX_BYTES = 1 << 30  # a HELMET output json or an lm-eval samples file holds every prompt; none is larger


@dataclass(frozen=True)
class Sample:
    """One sample of an imported cell, from the harness's per-sample file: its score as a fraction
    (as our records hold it), the model's answer, its prompt's length and the tokens generated."""

    index: int
    score: float
    prediction: str | None = None
    prompt_tokens: int | None = None
    new_tokens: int | None = None


@dataclass(frozen=True)
class Cell:
    """One imported score: x100, as this project's results hold them.

    stderr: the harness's own standard error of the mean, x100 (lm-eval's `<metric>_stderr`), when
    only the aggregate is known; samples: the per-sample scores when the harness wrote them, with
    sample_key (task version, dataset hash): two imports whose keys agree scored the same documents,
    so their samples pair; prompt_tokens: the mean prompt length, as the harness counted it;
    max_new_tokens: the generation budget (a sample that used it all ran to max new tokens)."""

    suite: str
    task: str
    length: int
    score: float
    num_samples: int | None = None
    file: str = ""
    stderr: float | None = None
    samples: tuple[Sample, ...] = ()
    sample_key: tuple[str, str] = ("", "")
    prompt_tokens: float | None = None
    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        # the length rule harness eval, report and leaderboard apply (tasks.length_rule): a RULER
        # cell at 0 or 10^20 tokens is the file's mistake, never a score that moves the average
        from tasks.length_rule import task_length_problem

        problem = task_length_problem(self.task, self.length)
        if problem is not None:
            raise UserError(
                f"{self.file or 'an imported file'}: {problem}: fix the file (a RULER or HELMET file: or pass --length L)"
            )


@dataclass
class Source:
    harness: str  # "lm-eval" | "RULER" | "HELMET"
    version: str | None = None
    git_hash: str | None = None
    model: str | None = None
    files: list[dict] = field(default_factory=list)
    protocol: dict[str, dict[str, str]] = field(default_factory=dict)  # suite -> how inputs are built
    skipped: list[str] = field(default_factory=list)  # tasks of the file this harness does not import
    # what moves scores, as the file states it (backend, dtype, model_args, batch_size, max_model_len,
    # template, seed, created): the row's provenance, never ours
    settings: dict[str, object] = field(default_factory=dict)

    def merge(self, other: Source) -> None:
        if other.harness != self.harness:
            raise UserError(
                f"{other.files[0]['file']} is a {other.harness} file and the others are {self.harness}: "
                "import each harness's files with their own `harness import`"
            )
        for key in ("version", "git_hash", "model"):
            mine, theirs = getattr(self, key), getattr(other, key)
            if mine is None:
                setattr(self, key, theirs)
            elif theirs is not None and theirs != mine:
                if key == "model":
                    raise UserError(
                        f"{other.files[0]['file']} is of model {theirs!r}, the others of {mine!r}: "
                        "one `harness import` makes one run; import each model's files on their own"
                    )
                setattr(self, key, f"{mine}, {theirs}" if theirs not in mine.split(", ") else mine)
        self.files += other.files
        for suite, proto in other.protocol.items():
            self.protocol.setdefault(suite, proto)
        self.skipped += [t for t in other.skipped if t not in self.skipped]
        for key, value in other.settings.items():
            mine = self.settings.get(key)
            if mine is None:
                self.settings[key] = value
            elif value is not None and value != mine and str(value) not in str(mine).split(", "):
                self.settings[key] = f"{mine}, {value}"  # files of one model run with two settings: both said


def read_text(path: Path) -> tuple[str, str]:
    """(text, sha256) of a regular UTF-8 file; a UserError naming it otherwise."""
    try:
        if not path.is_file():
            raise UserError(
                f"no file at {path}: pass lm-eval results_*.json, RULER summary*.csv or HELMET output files"
            )
        if path.stat().st_size > MAX_BYTES:
            raise UserError(f"{path} is larger than 1 GB: no results file of lm-eval, RULER or HELMET is")
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path} ({exc.strerror or exc}): check the path and its permissions") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text: pass a results file as its harness wrote it") from None
    return text, hashlib.sha256(data).hexdigest()


def loads_json(text: str, path: Path, what: str):
    def no_constant(name: str):
        raise ValueError(f"{name} is not a number")

    try:
        return json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{path} is not valid JSON ({str(exc).splitlines()[0][:80]}): pass {what}") from None


def read_jsonl(path: Path, what: str) -> tuple[list[dict], str]:
    """(the objects of a JSON-lines file, its sha256), line by line (a per-sample file may be large);
    a UserError naming the file and line otherwise."""
    digest = hashlib.sha256()
    rows: list[dict] = []
    try:
        if path.stat().st_size > MAX_BYTES:
            raise UserError(f"{path} is larger than 1 GB: pass {what}")
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                digest.update(line)
                if not line.strip():
                    continue
                try:
                    row = json.loads(line.decode("utf-8-sig" if n == 1 else "utf-8"), parse_constant=_no_constant)
                except (ValueError, RecursionError) as exc:
                    msg = str(exc).splitlines()[0][:80]
                    raise UserError(f"{path} line {n} is not JSON ({msg}): pass {what}") from None
                if not isinstance(row, dict):
                    raise UserError(f"{path} line {n} is not a JSON object: pass {what}")
                rows.append(row)
    except OSError as exc:
        raise UserError(f"cannot read {path} ({exc.strerror or exc}): check the path and its permissions") from None
    return rows, digest.hexdigest()


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number")


def fraction(value, path: Path, where: str) -> float:
    """A per-sample score in 0..1 (a number of the file)."""
    v = number(value, path, where)
    if not 0 <= v <= 1:
        raise UserError(
            f"{path}: {where} = {v:g} is outside 0..1, not a per-sample score: the file is not of its harness's shape"
        )
    return v


def sample_key(harness: str, task: str, version: object, documents: list[str]) -> tuple[str, str]:
    """(task version, dataset hash) of an imported cell's samples: the harness, its task and version,
    and a hash of its documents in order, so only two imports of the same documents pair."""
    digest = hashlib.sha256("\n".join(documents).encode()).hexdigest()[:16]
    return f"{harness} {task}" + (f" v{version}" if version not in (None, "") else ""), digest


def number(value, path: Path, where: str) -> float:
    """A finite number from the file (true/false and strings are not)."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"{path}: {where} is {str(value)[:40]!r}, not a number: the file is not of its harness's shape")
    return float(value)


def percent(value: float, path: Path, where: str) -> float:
    if not 0 <= value <= 100:
        raise UserError(
            f"{path}: {where} = {value:g} is outside 0..100, not a score: the file is not of its harness's shape"
        )
    return value
