"""A suite's reference headline in results.json (`headline`, tasks.registry.Headline).

Some references report a suite as groups of categories rather than as a mean over tasks (HELMET's
category averages, LongBench v2's Easy/Hard and Short/Medium/Long). The spec's `headline` names the
groups; this module computes them over checkpoints with the same statistics and intervals as every
other average (harness.pipeline.checkpoint_stats).
"""

from __future__ import annotations

import numpy as np

from harness.core.paired import mean_of
from harness.pipeline.checkpoint_stats import (
    checkpoint_interval,
    group_average,
    group_replicates,
    length_summaries,
    sample_weights,
    stats_over_checkpoints,
)


def headline_block(
    spec: dict, evaluated: list[str], cell: dict, counts: dict, lengths: list[int], ckpts, labels, reps: dict
) -> dict:
    """The reference's headline (tasks.registry.Headline): per group and length, within each
    checkpoint the mean over categories of each category's mean over its tasks (or pooled samples),
    then statistics and the bootstrap interval over checkpoints, as every other average; an Avg over
    lengths when every length has a value."""
    pooled = spec.get("weighting") == "samples"
    groups = {}
    for group, cats in spec["groups"].items():
        per_len: dict[int, dict[str, float]] = {}
        per_length, len_reps = {}, {}
        for L in lengths:
            got = _group_at(spec, group, cats, L, evaluated, cell, counts, ckpts, labels, reps)
            if got is None:
                continue
            per_len[L], per_length[str(L)], r = got
            if r is not None:
                len_reps[L] = r
        summary = length_summaries(per_len, lengths, ckpts, labels, len_reps, ("headline", group))
        groups[group] = {"per_length": per_length, **({"avg": summary["avg"]} if "avg" in summary else {})}
    out = {"label": spec["label"], "groups": groups}
    if pooled:
        out["weighting"] = "samples"
    return out


def _group_at(
    spec: dict, group: str, cats: dict, L: int, evaluated: list[str], cell: dict, counts: dict, ckpts, labels, reps
) -> tuple[dict[str, float], dict, np.ndarray | None] | None:
    """One group at length L: ({fingerprint: mean over categories}, its per_length entry, its
    replicates or None); None when no checkpoint has every covered category."""
    fps = [c["fingerprint"] for c in ckpts]
    pooled = spec.get("weighting") == "samples"
    weights = counts if pooled else None
    cat_means = []  # (tasks covered, {fingerprint: category mean})
    for cat_tasks in cats.values():
        got = group_average([t for t in cat_tasks if t in evaluated], cell, [L], fps, weights)
        if L in got:
            cat_means.append(got[L])
    common = [fp for fp in fps if cat_means and all(fp in pc for _, pc in cat_means)]
    if not common:
        return None
    per_ckpt = {fp: sum(pc[fp] for _, pc in cat_means) / len(cat_means) for fp in common}
    entry = {
        **stats_over_checkpoints(per_ckpt, ckpts, labels),
        "categories_covered": len(cat_means),
        "categories_total": int((spec.get("categories_total") or {}).get(group, len(cats))),
        "tasks_covered": sum(len(covered) for covered, _ in cat_means),
    }
    cat_reps = [
        group_replicates(covered, L, reps, sample_weights(covered, L, counts, pc) if pooled else None)
        for covered, pc in cat_means
    ]
    if not all(r is not None for r in cat_reps):
        return per_ckpt, entry, None
    r = mean_of([r for r in cat_reps if r is not None], None)
    entry.update(checkpoint_interval(r, ckpts, per_ckpt, ("headline", group, L)))
    return per_ckpt, entry, r
