"""Results imported from another harness (`harness import`): how to tell such a run from one of
ours, and the one line a report shows for it."""

from __future__ import annotations


def note(source: dict) -> str:
    """The leaderboard's line for an imported row: which harness and how it builds its inputs."""
    harness = source.get("harness") or "another harness"
    version = source.get("version")
    protocols = source.get("protocol") or {}
    summaries = list(dict.fromkeys(p.get("summary") for p in protocols.values() if isinstance(p, dict)))
    text = f"imported from {harness}" + (f" {version}" if version else "")
    shown = "; ".join(s for s in summaries if s)
    return text + (f" (protocol: {shown})" if shown else "") + ": no per-sample data, never in a paired test"


def imported_source(run: dict) -> dict | None:
    """provenance.source of an imported results.json (None for a run of ours)."""
    src = (run.get("provenance") or {}).get("source")
    return src if isinstance(src, dict) and isinstance(src.get("harness"), str) else None
