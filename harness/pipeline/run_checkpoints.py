"""A run's checkpoints as the records name them, and the labels results.json gives them.

    from harness.pipeline.run_checkpoints import checkpoint_labels, checkpoints_from_records

    ckpts = checkpoints_from_records(records)   # when only the store is known (re-aggregating)
    labels = checkpoint_labels(ckpts)           # fingerprint -> "2000", or the path when step-less

A label is what `per_step` and the per-sample blocks key a checkpoint by: its step, else its path
(a hub model, or two checkpoints sharing a step), else path@fingerprint.
"""

from __future__ import annotations

from collections import defaultdict


def _stored_step(c: dict) -> int | None:
    """A record's checkpoint step where today's rule reads the same step from its path (older stores
    gave a model folder such as SmolLM2-135M-Instruct.Q4_1 a step; hub names are stored step-less)."""
    from harness.models.checkpoints import step_of

    step = c.get("step")
    return step if step is not None and step_of(c["path"]) == step else None


def model_from_records(records: list[dict], ckpts: list[dict]) -> str | None:
    """run.model of a re-aggregated store: as eval named it where records say (their checkpoint's
    `model`), else derived from the path by eval's rule; None when the checkpoints disagree."""
    from harness.models.checkpoints import model_of

    named = {r["checkpoint"]["fingerprint"]: r["checkpoint"].get("model") for r in records}
    models = {named.get(c["fingerprint"]) or model_of(c["path"], c["step"]) for c in ckpts}
    return models.pop() if len(models) == 1 else None


def checkpoints_from_records(records: list[dict]) -> list[dict]:
    """The run's checkpoints when only records are known (re-aggregating a store).

    A path evaluated under two fingerprints was re-trained in place: the fingerprint whose
    records come last in the store is the current one.
    """
    last_seen: dict[str, tuple[int, dict]] = {}
    for i, r in enumerate(records):
        c = r["checkpoint"]
        last_seen[c["fingerprint"]] = (i, c)
    by_path: dict[str, tuple[int, dict]] = {}
    for i, c in last_seen.values():
        if c["path"] not in by_path or by_path[c["path"]][0] < i:
            by_path[c["path"]] = (i, c)
    ckpts = [
        {"path": c["path"], "step": _stored_step(c), "fingerprint": c["fingerprint"], "training": None}
        for _, c in by_path.values()
    ]
    ckpts.sort(key=lambda c: (c["step"] is not None, c["step"] if c["step"] is not None else 0, c["path"]))
    return ckpts


def checkpoint_labels(ckpts: list[dict]) -> dict[str, str]:
    """fingerprint -> the label per_step uses: the step, else the path, else path@fingerprint."""
    labels = {c["fingerprint"]: str(c["step"]) if c.get("step") is not None else c["path"] for c in ckpts}
    for fallback in (lambda c: c["path"], lambda c: f"{c['path']}@{c['fingerprint'][:8]}"):
        counts: defaultdict[str, int] = defaultdict(int)
        for v in labels.values():
            counts[v] += 1
        for c in ckpts:
            if counts[labels[c["fingerprint"]]] > 1:
                labels[c["fingerprint"]] = fallback(c)
    return labels
