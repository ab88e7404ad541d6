"""The RoPE diagnostic on the leaderboard page: how far bf16 moves attention under a position shift.

    from leaderboards.diagnostic import load_rope_diagnostic, rope_section
    rope = load_rope_diagnostic("runs/demo/diagnose/rope_diagnostic.json")   # written by harness.diagnose.report
    section = rope_section(rope, root=None, names=["base", "full", "anchor"])

Each row is one checkpoint: D(Δ1 = 0, Δ2) of the paper's Eq. 4 (0 in exact arithmetic: RoPE depends
only on relative positions) per dtype, and the first token's share of it (the per-token terms at
key position 0 over their sum; the paper's Figure 1, middle, finds the first token dominates). The
file is untrusted input: anything but a well-formed diagnostic is a one-line UserError.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.core.errors import UserError

DELTA1 = 0  # the shift whose per-token terms the diagnostic reports (harness.diagnose.rope.PER_TOKEN_DELTA1)
_FIX = "pass the rope_diagnostic.json written by `harness diagnose rope` or `harness demo`"


def _numbers(value, what: str, where: str) -> list[float]:
    if not isinstance(value, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in value
    ):
        raise UserError(f"{where}: {what} is not a list of finite numbers; {_FIX}")
    return [float(x) for x in value]


def load_rope_diagnostic(path: str | Path) -> dict:
    """Read and check a rope_diagnostic.json; returns {"settings": {...}, "runs": [checked runs]}."""
    path = Path(path)
    where = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"no RoPE diagnostic at {path}: {_FIX}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{where} is not readable JSON ({type(exc).__name__}): {_FIX}") from None
    if not isinstance(data, dict) or data.get("kind") != "rope_diagnostic" or data.get("schema_version") != 1:
        raise UserError(f"{where} is not a RoPE diagnostic (kind rope_diagnostic, schema_version 1): {_FIX}")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise UserError(f"{where} has no runs: {_FIX}")
    checked = []
    for i, run in enumerate(runs):
        at = f"{where} run {i + 1}"
        if not isinstance(run, dict):
            raise UserError(f"{at} is not an object; {_FIX}")
        for key in ("checkpoint", "dtype"):
            if not isinstance(run.get(key), str) or not run[key]:
                raise UserError(f"{at}: {key!r} is missing or not text; {_FIX}")
        name = run.get("name")
        if name is not None and not isinstance(name, str):
            raise UserError(f"{at}: 'name' is not text; {_FIX}")
        d = run.get("D")
        if not isinstance(d, dict):
            raise UserError(f"{at}: 'D' is missing; {_FIX}")
        shifts = _numbers(d.get("shifts"), "D.shifts", at)
        mean = _numbers(d.get("mean"), "D.mean", at)
        delta2 = d.get("delta2")
        if len(shifts) != len(mean) or not isinstance(delta2, int) or isinstance(delta2, bool):
            raise UserError(f"{at}: D.shifts and D.mean differ in length or D.delta2 is not an integer; {_FIX}")
        per_token = run.get("per_token")
        tokens = _numbers(per_token.get("mean"), "per_token.mean", at) if isinstance(per_token, dict) else None
        checked.append(
            {
                "name": name,
                "checkpoint": run["checkpoint"],
                "dtype": run["dtype"],
                "D": {"shifts": shifts, "mean": mean, "delta2": delta2},
                "per_token": {"mean": tokens} if tokens else None,
                "num_samples": run.get("num_samples") if isinstance(run.get("num_samples"), int) else None,
            }
        )
    settings = data.get("settings") if isinstance(data.get("settings"), dict) else {}
    return {"settings": settings, "runs": checked}


def deviation(run: dict) -> float | None:
    """D(Δ1 = 0, Δ2) of a run, or None when Δ1 = 0 was not measured."""
    shifts = run["D"]["shifts"]
    return run["D"]["mean"][shifts.index(DELTA1)] if DELTA1 in shifts else None


def first_token_share(run: dict) -> float | None:
    """The first key position's share of D(Δ1 = 0): per-token term 0 over the sum of all terms."""
    tokens = (run.get("per_token") or {}).get("mean")
    if not tokens:
        return None
    total = sum(tokens)
    return tokens[0] / total if total > 0 else None


def _label(run: dict) -> str:
    return run["name"] or Path(run["checkpoint"]).name


def _checkpoint_label(path: str, root: Path | None) -> str:
    """Relative to `root` when under it (runs/full/ckpt-200), else the model's own name (demo-base)."""
    from leaderboards.labels import path_label

    shown = path_label(path, root)
    return Path(path).name or path if shown == path and root is not None else shown


def rope_section(data: dict, root: Path | None, names: list[str]) -> dict:
    """The page's table: one row per checkpoint, a (D, first token's share) pair per dtype."""
    dtypes = list(dict.fromkeys(r["dtype"] for r in data["runs"]))
    rows: dict[tuple[str, str], dict] = {}
    for run in data["runs"]:
        key = (_label(run), run["checkpoint"])
        row = rows.setdefault(
            key,
            {
                "label": key[0],
                "checkpoint": _checkpoint_label(run["checkpoint"], root),
                "checkpoint_title": run["checkpoint"],
                "is_row": key[0] in names,
                "cells": {},
            },
        )
        d, share = deviation(run), first_token_share(run)
        row["cells"][run["dtype"]] = {
            "D": d,
            "D_text": "—" if d is None else f"{d:.2e}",
            "share": share,
            "share_text": "—" if share is None else f"{100 * share:.0f}%",
            "num_samples": run["num_samples"],
        }
    for row in rows.values():
        b, f = row["cells"].get("bf16"), row["cells"].get("fp32")
        ratio = b["D"] / f["D"] if b and f and b["D"] is not None and f["D"] else None
        row["ratio_text"] = "—" if ratio is None else f"{ratio:,.0f}×"
    settings = data["settings"]
    delta2 = data["runs"][0]["D"]["delta2"]
    what = f"Δ1 = {DELTA1} vs Δ2 = {delta2}"
    if isinstance(settings.get("seq_len"), int) and isinstance(settings.get("num_samples"), int):
        what += f", mean over {settings['num_samples']} text windows of {settings['seq_len']} tokens"
    return {"dtypes": dtypes, "rows": list(rows.values()), "what": what, "ratio": "bf16" in dtypes and "fp32" in dtypes}
