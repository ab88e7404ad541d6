"""A training run folder as a follower sees it: its complete checkpoints and its end-of-run marker.

    from harness.models.run_end import complete_checkpoints, read_run_end
    for step, path in complete_checkpoints("runs/anchor"):   # ckpt-<step> with a completion marker, by step
        ...
    end = read_run_end("runs/anchor")      # None while training goes on (or never finished)
    end.last_step                          # the step the run stopped at

`harness train` (training/loop.py) removes `<run>/harness_run_end.json` when it goes on to train steps
(its resume checks passed: a refused run changes nothing) and writes it, atomically, when the run has ended (its last step trained, the checkpoints outside
its schedule pruned): `{"schema_version": 1, "last_step": N, "stopped_early": bool, "checkpoints": [steps]}`.
A run killed or stopped by an error writes none. `harness eval --follow RUN` (harness/pipeline/follow.py)
ends once the marker is there and every checkpoint it then lists is evaluated: after the marker no
checkpoint of that run changes until the next `harness train` on it removes the marker again.

Only checkpoints carrying the completion marker (`harness_complete.json`, written last by
training/checkpointing.py) count: a follower never picks a folder half written, and a folder of
another tool's checkpoints (no marker) is named once by `unmarked_checkpoints` instead of being
evaluated while it may still be written.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, StrictBool, ValidationError

from harness.core.errors import UserError
from harness.core.results_schema import Count, Positive, Strict, describe
from harness.models.checkpoints import COMPLETE_FILE, incomplete_reason

RUN_END_FILE = "harness_run_end.json"
_SCHEMA_VERSION = 1
_CKPT = re.compile(r"^ckpt-(\d+)$")


class _RunEndFile(Strict):
    """The one schema of harness_run_end.json."""

    schema_version: Positive
    last_step: Count
    stopped_early: StrictBool = False
    checkpoints: list[Count] = Field(default_factory=list)


@dataclass(frozen=True)
class RunEnd:
    """A finished training run: the step it stopped at and the checkpoints it kept."""

    last_step: int
    stopped_early: bool
    checkpoints: tuple[int, ...]


def write_run_end(run_dir: str | Path, last_step: int, *, stopped_early: bool, checkpoints: list[int]) -> None:
    """The end-of-run marker, written to a temporary file and renamed into place."""
    from harness.core.atomic import atomic_write

    body = {
        "schema_version": _SCHEMA_VERSION,
        "last_step": int(last_step),
        "stopped_early": bool(stopped_early),
        "checkpoints": sorted(int(s) for s in checkpoints),
    }
    atomic_write(Path(run_dir) / RUN_END_FILE, json.dumps(body) + "\n")


def clear_run_end(run_dir: str | Path) -> None:
    """Training (re)starts on this folder: it has not ended (a follower waits for the new marker)."""
    try:
        os.unlink(Path(run_dir) / RUN_END_FILE)
    except FileNotFoundError:
        pass


def read_run_end(run_dir: str | Path) -> RunEnd | None:
    """The marker of a finished run, None while there is none; a damaged one is a one-line UserError."""
    path = Path(run_dir) / RUN_END_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path} ({exc}): delete it and re-run the train command to rewrite it") from None
    try:
        data = _RunEndFile.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        why = describe(exc) if isinstance(exc, ValidationError) else "not JSON"
        raise UserError(
            f"{path} is not an end-of-run marker ({why}): delete it and re-run the train command to rewrite it"
        ) from None
    if data.schema_version > _SCHEMA_VERSION:
        raise UserError(
            f"{path} has schema_version {data.schema_version}, this harness reads {_SCHEMA_VERSION}: upgrade"
        )
    return RunEnd(data.last_step, data.stopped_early, tuple(data.checkpoints))


def _ckpt_dirs(run_dir: Path) -> list[tuple[int, Path]]:
    try:
        names = os.listdir(run_dir)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), run_dir / n) for n in names if (m := _CKPT.match(n))]
    return sorted((s, p) for s, p in found if p.is_dir())


def complete_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every ckpt-<step> folder holding its completion marker and every file it lists."""
    out = []
    for step, path in _ckpt_dirs(Path(run_dir)):
        if (path / COMPLETE_FILE).is_file() and incomplete_reason(path) is None:
            out.append((step, path))
    return out


def unmarked_checkpoints(run_dir: str | Path) -> list[Path]:
    """ckpt-<step> folders with neither completion nor in-progress marker (another tool's, or an earlier
    harness's): a follower cannot tell when they are whole."""
    from harness.models.checkpoints import IN_PROGRESS_FILE

    return [
        p
        for _, p in _ckpt_dirs(Path(run_dir))
        if not (p / COMPLETE_FILE).exists() and not (p / IN_PROGRESS_FILE).exists()
    ]
