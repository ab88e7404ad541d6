"""results.json on disk: written atomically, read through the one schema (harness.core.results_schema),
with a one-line error naming the fix for a missing, unreadable, corrupt or foreign file."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.errors import UserError
from harness.core.results_schema import validate_results


def write_results(path: str | Path, results: dict) -> None:
    """Write results.json atomically (a reader never sees half a file)."""
    from harness.core.atomic import atomic_write

    atomic_write(path, json.dumps(results, indent=2, allow_nan=False) + "\n")


def load_results(path: str | Path) -> dict:
    """Read results.json; UserError when missing, corrupt, foreign or from a newer harness."""
    from harness.core.paths import NotARegularFile, read_regular

    path = Path(path)
    try:
        text = read_regular(path).decode("utf-8")  # a FIFO or device: an error, never a hang
    except NotARegularFile as exc:
        raise UserError(
            f"results file {path} is {exc.kind}: pass a results.json written by harness eval, or its run directory"
        ) from None
    except FileNotFoundError:
        raise UserError(
            f"results file {path} not found: pass a results.json written by harness eval, or its run directory"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read results file {path} ({exc.__class__.__name__}): pass a results.json written by harness eval"
        ) from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than any results file
        store = path.parent / "samples.jsonl"
        fix = (
            f"see its scores with `harness report {store}`"
            if store.is_file() and store != path
            else "re-run harness eval to write it"
        )
        raise UserError(f"results file {path} is corrupt (not JSON): {fix}") from None
    return validate_results(data, path)
