"""The needle-depth heatmap of a suite (results.json `depth_heatmap`): hit rate by answer depth.

    hits = NeedleHits()
    for r in records: hits.add(r, fingerprint)          # records whose metadata names answer_depths
    block = depth_heatmap(evaluated, lengths, hits.bins, ckpts)

A record's needles are scored one by one with the task's own metric (1 when the prediction holds
that needle's answer), binned by depth in percent of the haystack, and pooled over the suite's
niah tasks within each checkpoint before the mean over checkpoints.
"""

from __future__ import annotations

# Needle depth bins of the heatmap, in percent of the haystack: [0, 10), [10, 20), ..., [90, 100].
DEPTH_BINS = [(lo, lo + 10) for lo in range(0, 100, 10)]


class NeedleHits:
    """Needle hits and counts by (task, length, checkpoint fingerprint, depth bin)."""

    def __init__(self) -> None:
        self.bins: dict[tuple, list] = {}  # (task, L, fp, bin) -> [hits, needles]

    def add(self, r: dict, fp: str) -> None:
        meta = r.get("metadata") or {}
        depths, refs = meta.get("answer_depths"), meta.get("references")
        if not (depths and refs and len(depths) == len(refs) and r.get("metric")):
            return
        from tasks.metrics import METRICS

        task, L = r["task"], int(r["length"])
        metric = METRICS.get(r["metric"])
        for ref, d in zip(refs, depths):
            # the task's own metric on this needle's answer alone: 1 when the prediction has it
            hit = metric(r.get("prediction") or "", [ref]) if metric else float(r["score"])
            b = min(int(float(d) // 10), len(DEPTH_BINS) - 1)
            acc = self.bins.setdefault((task, L, fp, b), [0.0, 0])
            acc[0] += hit
            acc[1] += 1


def depth_heatmap(tasks: list[str], lengths: list[int], depth: dict, ckpts: list[dict]) -> dict | None:
    """Needle hit rate (x100) by answer depth bin and length, pooled over the suite's niah tasks:
    within each checkpoint, then the mean over checkpoints. `n` counts answer needles per checkpoint."""
    used = sorted({t for (t, _, _, _) in depth if t in tasks})
    if not used:
        return None
    cells: dict[str, list] = {}
    for L in lengths:
        row = [_bin_cell(used, L, b, depth, ckpts) for b in range(len(DEPTH_BINS))]
        if any(row):
            cells[str(L)] = row
    if not cells:
        return None
    return {"tasks": used, "bins": [list(b) for b in DEPTH_BINS], "lengths": [int(L) for L in cells], "cells": cells}


def _bin_cell(used: list[str], L: int, b: int, depth: dict, ckpts: list[dict]) -> dict | None:
    """One heatmap cell: the checkpoints' mean hit rate in depth bin b at length L (None: no needle)."""
    per_ckpt, n = [], 0
    for c in ckpts:
        acc = [depth[(t, L, c["fingerprint"], b)] for t in used if (t, L, c["fingerprint"], b) in depth]
        hits, count = sum(a[0] for a in acc), sum(a[1] for a in acc)
        if count:
            per_ckpt.append(100.0 * hits / count)
            n = max(n, count)
    return {"mean": sum(per_ckpt) / len(per_ckpt), "n": n, "checkpoints": len(per_ckpt)} if per_ckpt else None
