"""Uncertainty in the leaderboard: paired intervals of the delta view and the needle-depth heatmaps.

    from leaderboards.intervals import delta_interval, heatmaps
    iv = delta_interval(run, base_run, column)     # {"low", "high", "significant", "paired", ...} or None
    maps = heatmaps(runs, baseline="full")         # per run and per delta: depth x length grids

Both read the schema-2 fields of results.json (docs/contracts.md): the per-sample "samples" blocks
and "depth_heatmap". A results file without them (schema 1) gets no interval and no heatmap.

A delta cell's interval: for every task in the cell, the samples both runs scored (same task
version, dataset hash, seed, length and index) are resampled with one shared draw (the pairing),
each run's checkpoints are resampled on their own, and the statistic is recomputed exactly as the
cell's (mean over tasks, weighted over lengths) per replicate. Tasks whose samples cannot be
paired are resampled independently per run (an unpaired bootstrap), and the title says so.
"""

from __future__ import annotations

from harness.core import stats
from harness.core.paired import cell_replicates, mean_of, paired_replicates, shared_indices

_SUMMARY_WEIGHTS = ("avg", "wavg_inc", "wavg_dec")


def _labels(suite: dict) -> list[str]:
    """The run's checkpoint labels in the order they appear in its sample blocks."""
    seen: dict[str, None] = {}
    for by_len in (suite.get("samples") or {}).values():
        for block in by_len.values():
            for label in block.get("scores") or block.get("nll") or {}:
                seen.setdefault(label)
    return list(seen)


def _weights(key: str, n: int) -> list[int]:
    return {"avg": [1] * n, "wavg_inc": list(range(1, n + 1)), "wavg_dec": list(range(n, 0, -1))}[key]


def _cell_parts(suite: dict, col: dict, suite_name: str) -> list[tuple[list[str], int, float]] | None:
    """(tasks, length, weight) pieces whose task means make up the column's statistic."""
    key = col["key"]
    evaluated = list(suite.get("evaluated") or [])
    if key.startswith("len:"):
        return [(evaluated, int(col["length"]), 1.0)]
    if key in _SUMMARY_WEIGHTS:
        lengths = sorted(int(L) for L in suite.get("lengths") or [])
        return [(evaluated, L, float(w)) for L, w in zip(lengths, _weights(key, len(lengths)))]
    if key.startswith("task:") and col.get("length") is not None:
        return [([col["task"]], int(col["length"]), 1.0)]
    if key.startswith("cat:"):
        from tasks.suites import suite_categories

        members = suite_categories(suite_name).get(col["category"])
        if not members:
            return None
        return [([t for t in members if t in evaluated], int(col["length"]), 1.0)]
    return None


def _task_replicates(
    t: str, L: int, ba: dict, la: list[str], bb: dict, lb: list[str], cache: dict | None, key: tuple
) -> tuple:
    """(run replicates, baseline replicates, shared samples): paired when they share samples."""
    if cache is not None and key in cache:
        return cache[key]
    idx = shared_indices(ba, bb)
    if idx:
        ra, rb = paired_replicates(t, L, ba, la, bb, lb, idx)
    else:
        ra, rb = cell_replicates(t, L, ba, la), cell_replicates(t, L, bb, lb)
    out = (ra, rb, len(idx))
    if cache is not None:
        cache[key] = out
    return out


def delta_interval(run: dict, base: dict, col: dict, cache: dict | None = None) -> dict | None:
    """The 95% interval of (run - baseline) for one column, or None when the results lack samples.

    cache: a dict kept across the columns of one build, so each task cell is resampled once."""
    name = col["suite"]
    a, b = run["suites"].get(name), base["suites"].get(name)
    if not a or not b or not a.get("samples") or not b.get("samples"):
        return None
    parts = _cell_parts(a, col, name)
    if not parts:
        return None
    la, lb = _labels(a), _labels(b)
    ra_parts, rb_parts, weights = [], [], []
    paired_n, unpaired = 0, []
    pooled = a.get("weighting") == "samples"
    for tasks, L, w in parts:
        ra_tasks, rb_tasks, used = [], [], set()
        for t in tasks:
            ba = (a["samples"].get(t) or {}).get(str(L))
            bb = (b["samples"].get(t) or {}).get(str(L))
            if ba is None or bb is None:
                continue  # a task only one run has: the flags say the sets differ
            used.add(t)
            key = (run["run"]["name"], base["run"]["name"], name, t, L)
            ra, rb, shared = _task_replicates(t, L, ba, la, bb, lb, cache, key)
            if shared:
                paired_n += shared
            else:
                unpaired.append(t)
            ra_tasks.append(ra)
            rb_tasks.append(rb)
        if not ra_tasks:
            return None  # a length without any task both runs scored: no interval
        # a sample-weighted suite (LongBench v2) weights each task by its samples, as its averages do
        tw = [len(a["samples"][t][str(L)]["index"]) for t in tasks if t in used] if pooled else None
        ra_parts.append(mean_of(ra_tasks, tw))
        rb_parts.append(mean_of(rb_tasks, tw))
        weights.append(w)
    ra, rb = mean_of(ra_parts, weights), mean_of(rb_parts, weights)
    seed = (run["run"]["name"], base["run"]["name"], col["id"])
    da = stats.over_checkpoints(ra, stats.rng_for(*seed, "run"))
    db = stats.over_checkpoints(rb, stats.rng_for(*seed, "baseline"))
    iv = stats.interval(da - db)
    if iv is None:
        return None
    low, high = iv
    return {
        "low": low,
        "high": high,
        "significant": stats.significant(low, high),
        "paired_samples": paired_n,
        "unpaired_tasks": sorted(set(unpaired)),
        "level": stats.LEVEL,
    }


def cell_interval(stats_dict: dict) -> tuple[float, float] | None:
    """A results statistic's stored interval (schema 2), None when absent."""
    lo, hi = stats_dict.get("ci_low"), stats_dict.get("ci_high")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return float(lo), float(hi)
    return None


# ----------------------------------------------------------------------------------------------
# Needle depth x length heatmaps


def _grid(hm: dict) -> dict:
    return {str(L): hm["cells"][str(L)] for L in hm["lengths"] if str(L) in hm["cells"]}


def heatmaps(runs: list[dict], baseline: str | None) -> list[dict]:
    """One heatmap per run and suite with depth data, then one per delta against the baseline."""
    out = []
    base = next((r for r in runs if r["run"]["name"] == baseline), None)
    for r in runs:
        for sname, suite in r["suites"].items():
            hm = suite.get("depth_heatmap")
            if not hm:
                continue
            out.append(
                {
                    "kind": "scores",
                    "run": r["run"]["name"],
                    "suite": sname,
                    "tasks": list(hm.get("tasks") or []),
                    "bins": [list(b) for b in hm["bins"]],
                    "lengths": [int(L) for L in hm["lengths"]],
                    "cells": _grid(hm),
                }
            )
    if base is None:
        return out
    for r in runs:
        if r is base:
            continue
        for sname, suite in r["suites"].items():
            hm, hb = suite.get("depth_heatmap"), (base["suites"].get(sname) or {}).get("depth_heatmap")
            if not hm or not hb or hm["bins"] != hb["bins"]:
                continue
            ga, gb = _grid(hm), _grid(hb)
            lengths = [int(L) for L in hm["lengths"] if str(L) in gb]
            cells = {}
            for L in lengths:
                row = []
                for x, y in zip(ga[str(L)], gb[str(L)]):
                    row.append(
                        None if x is None or y is None else {"mean": x["mean"] - y["mean"], "n": min(x["n"], y["n"])}
                    )
                cells[str(L)] = row
            if lengths:
                out.append(
                    {
                        "kind": "delta",
                        "run": r["run"]["name"],
                        "baseline": baseline,
                        "suite": sname,
                        "tasks": sorted(set(hm.get("tasks") or []) & set(hb.get("tasks") or [])),
                        "bins": [list(b) for b in hm["bins"]],
                        "lengths": lengths,
                        "cells": cells,
                    }
                )
    return out
