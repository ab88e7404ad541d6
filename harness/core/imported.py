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
    return text + (f" (protocol: {shown})" if shown else "") + ": " + _per_sample(source.get("per_sample"))


def _per_sample(state) -> str:
    """What the row's intervals rest on: its per-sample scores (ours to bootstrap and pair) or the
    other harness's aggregates."""
    if state == "every cell":
        return "per-sample scores imported, intervals and paired differences computed here"
    if isinstance(state, str) and state.endswith(" cells"):
        return f"per-sample scores for {state} (intervals computed here), the others from its aggregates"
    return "no per-sample data: intervals from its standard errors where it wrote them, never paired"


def imported_source(run: dict) -> dict | None:
    """provenance.source of an imported results.json (None for a run of ours)."""
    src = (run.get("provenance") or {}).get("source")
    return src if isinstance(src, dict) and isinstance(src.get("harness"), str) else None
