"""The pieces every reader of harness.imports shares: an imported score (`Cell`), where the scores
came from (`Source`), and the checks of a file's JSON and numbers (`loads_json`, `number`, `percent`).

The readers (harness.imports.lm_eval, .ruler, .helmet) import these from here, and the package
(harness/imports/__init__.py) imports the readers: one direction, no circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import UserError


@dataclass(frozen=True)
class Cell:
    """One imported score: x100, as this project's results hold them."""

    suite: str
    task: str
    length: int
    score: float
    num_samples: int | None = None
    file: str = ""


@dataclass
class Source:
    harness: str  # "lm-eval" | "RULER" | "HELMET"
    version: str | None = None
    git_hash: str | None = None
    model: str | None = None
    files: list[dict] = field(default_factory=list)
    protocol: dict[str, dict[str, str]] = field(default_factory=dict)  # suite -> how inputs are built
    skipped: list[str] = field(default_factory=list)  # tasks of the file this harness does not import

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


def loads_json(text: str, path: Path, what: str):
    import json

    def no_constant(name: str):
        raise ValueError(f"{name} is not a number")

    try:
        return json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{path} is not valid JSON ({str(exc).splitlines()[0][:80]}): pass {what}") from None


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
