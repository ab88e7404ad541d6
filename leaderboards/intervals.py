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
paired are resampled independently per run (an unpaired bootstrap), and the title says so. A cell
imported without per-sample scores but with its harness's standard error (harness import) is drawn
from that normal instead, and the title names the run.
"""

from __future__ import annotations

import numpy as np

from harness.core import stats
from harness.core.paired import cell_replicates, mean_of, normal_replicates, paired_replicates, shared_indices

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


def _task_replicates(t: str, L: int, sides: tuple, cache: dict | None, key: tuple) -> tuple | None:
    """(run replicates, baseline replicates, shared samples, runs drawn from a standard error): paired
    when both have samples and share some, each on its own otherwise, a side without samples drawn
    from its imported standard error; None when a side has neither. sides: per run (block, labels,
    the cell's statistics)."""
    if cache is not None and key in cache:
        return cache[key]
    (ba, la, sa), (bb, lb, sb) = sides
    idx = shared_indices(ba, bb) if ba is not None and bb is not None else []
    ra: np.ndarray | None
    rb: np.ndarray | None
    if idx:
        ra, rb = paired_replicates(t, L, ba, la, bb, lb, idx)
    else:
        ra = cell_replicates(t, L, ba, la) if ba is not None else normal_replicates(sa or {}, *key, "run")
        rb = cell_replicates(t, L, bb, lb) if bb is not None else normal_replicates(sb or {}, *key, "baseline")
    out = (
        None
        if ra is None or rb is None
        else (ra, rb, len(idx), [k for k, b in (("run", ba), ("baseline", bb)) if b is None])
    )
    if cache is not None:
        cache[key] = out
    return out


def _side(suite: dict, labels: list[str], t: str, L: int) -> tuple:
    """(samples block, checkpoint labels, statistics) of one run's task cell."""
    return (suite.get("samples") or {}).get(t, {}).get(str(L)), labels, (suite["per_task"].get(t) or {}).get(str(L))


def delta_interval(run: dict, base: dict, col: dict, cache: dict | None = None) -> dict | None:
    """The 95% interval of (run - baseline) for one column, or None when the results lack samples
    (and an imported standard error).

    cache: a dict kept across the columns of one build, so each task cell is resampled once."""
    name = col["suite"]
    a, b = run["suites"].get(name), base["suites"].get(name)
    parts = _cell_parts(a, col, name) if a and b else None
    if not parts:
        return None
    la, lb = _labels(a), _labels(b)
    ra_parts, rb_parts, weights = [], [], []
    paired_n, unpaired, from_stderr = 0, [], set()
    pooled = a.get("weighting") == "samples"
    for tasks, L, w in parts:
        ra_tasks, rb_tasks, used = [], [], []
        for t in tasks:
            key = (run["run"]["name"], base["run"]["name"], name, t, L)
            got = _task_replicates(t, L, (_side(a, la, t, L), _side(b, lb, t, L)), cache, key)
            if got is None:
                continue  # a task only one run has (the flags say the sets differ), or no samples
            ra, rb, shared, drawn = got
            used.append(t)
            paired_n += shared
            unpaired += [] if shared else [t]
            from_stderr |= {run["run"]["name"] if d == "run" else base["run"]["name"] for d in drawn}
            ra_tasks.append(ra)
            rb_tasks.append(rb)
        if not ra_tasks:
            return None  # a length without any task both runs scored: no interval
        # a sample-weighted suite (LongBench v2) weights each task by its samples, as its averages do
        tw = [_samples_of(a, t, L) for t in used] if pooled else None
        ra_parts.append(mean_of(ra_tasks, tw))
        rb_parts.append(mean_of(rb_tasks, tw))
        weights.append(w)
    iv = _difference(
        mean_of(ra_parts, weights), mean_of(rb_parts, weights), (run["run"]["name"], base["run"]["name"], col["id"])
    )
    if iv is None:
        return None
    return {
        **iv,
        "paired_samples": paired_n,
        "unpaired_tasks": sorted(set(unpaired)),
        "from_stderr": sorted(from_stderr),
    }


def _samples_of(suite: dict, t: str, L: int) -> int:
    """A task's sample count at L: its block's, else what its statistics say."""
    block = (suite.get("samples") or {}).get(t, {}).get(str(L))
    return len(block["index"]) if block is not None else suite["per_task"][t][str(L)].get("num_samples") or 1


def _difference(ra, rb, seed: tuple) -> dict | None:
    """The interval of the difference of two runs' replicates, each run's checkpoints resampled."""
    da = stats.over_checkpoints(ra, stats.rng_for(*seed, "run"))
    db = stats.over_checkpoints(rb, stats.rng_for(*seed, "baseline"))
    iv = stats.interval(da - db)
    if iv is None:
        return None
    low, high = iv
    return {"low": low, "high": high, "significant": stats.significant(low, high), "level": stats.LEVEL}


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
