"""Per-sample records -> the aggregated results.json (docs/contracts.md), as a reducer over checkpoints.

    from harness.pipeline.aggregate import aggregate
    from harness.core.results_file import write_results, load_results

    results = aggregate(store.records(), suites, run, provenance)   # pure: no I/O
    write_results("results/anchor/results.json", results)           # atomic replace

The math, in order (scores are x100):
  1. cell score  = mean of the sample scores of one (task, length, checkpoint); for perplexity
     records (metadata nll/tokens) the corpus perplexity exp(sum nll / sum tokens) instead, and a
     suite of only perplexity tasks is marked "score": "perplexity" (lower is better, no
     effective length);
  2. per task x length: mean, sample std (ddof=1; 0.0 with one checkpoint), min, max over checkpoints;
  3. suite (and category) average at a length: within each checkpoint, the mean over the tasks
     evaluated at that length, then the same statistics over checkpoints. Only checkpoints that
     have every one of those tasks at that length take part (a partly evaluated checkpoint would
     average a different task set), so `n` may be below the run's checkpoint count;
  4. Avg / wAvg(inc) / wAvg(dec): within each checkpoint, the mean of its per-length averages with
     weights 1 / 1..n / n..1 over the suite's lengths in increasing order, normalised by their sum;
     then statistics over checkpoints. Present only when every suite length has an average (an
     Avg over fewer lengths would not compare with other runs), else absent;
     A suite with "weighting": "samples" (LongBench v2) weights each task by its number of samples
     in its suite and category averages: the mean over their samples, as the reference reports it;
  5. effective length: the largest evaluated L such that the checkpoint-mean average is above
     (strictly greater than) the threshold at every evaluated length <= L; else value null and
     label "below the first length". A suite that is not length-controlled (spec
     "length_controlled": false, or lengths [0]: LongBench, MMLU/HellaSwag) gets
     {"threshold": null, "value": null, "label": "n/a"} and "length_controlled": false.
  6. NoLiMa's effective length (summary "effective_length_nolima", length-controlled suites):
     the base score is the mean of the per-length averages at lengths <= 1K (else at the shortest
     length); the value is the largest evaluated L with the average >= 0.85 x base at every
     evaluated length <= L (see base_relative_effective_length). A suite of NoLiMa records (their
     metadata names each needle test) gets the paper's rule instead (tasks/nolima/effective.py,
     "rule": "nolima-paper"): per test the best score at 250/500/1K, averaged over tests.
Excluded and unavailable tasks are listed and never averaged (as zeros or otherwise); every
average says how many of the suite's tasks it covers (tasks_covered / tasks_total).

Uncertainty (schema 2, harness/core/stats.py; docs/contracts.md "Intervals"): every statistic over
checkpoints also gets `ci_low`/`ci_high`, the 95% percentile-bootstrap interval of its mean,
resampling the samples (one draw shared by all checkpoints, which score the same samples) and the
checkpoints; suite and summary intervals resample each task's samples and average within the
replicate exactly as the point estimate does. Each suite keeps its per-sample scores in
`samples` {task: {length: block}} (harness/core/paired.py) so a leaderboard can pair two runs' samples,
and its niah needles' hit rate by depth in `depth_heatmap`. Records that carry `eval_seconds`
give the provenance `throughput` (with `seconds_per_sample` per task and length).

Fields beyond the contract: suite `unavailable_lengths` {task: {length: reason}} passed through
from the spec; per-stat `num_samples_range` when checkpoints have different sample
counts; suite `per_task_summary` {task: {avg, wavg_inc, wavg_dec}}; summary `lengths_covered` /
`lengths_total`; checkpoint labels in `per_step` are the step, or the path for a step-less
(hub) checkpoint or when two checkpoints share a step.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from harness.core import stats as bootstrap
from harness.core.degenerate import Degenerate
from harness.core.effective_length import base_relative_effective_length, effective_length
from harness.core.errors import UserError
from harness.core.paired import cell_replicates, is_perplexity, mean_of
from harness.core.results_schema import SCHEMA_VERSION
from harness.pipeline.store import record_key

# Needle depth bins of the heatmap, in percent of the haystack: [0, 10), [10, 20), ..., [90, 100].
DEPTH_BINS = [(lo, lo + 10) for lo in range(0, 100, 10)]
DEFAULT_THRESHOLD = 85.6
# Suites whose samples are not length-controlled (LongBench at its truncation budget, MMLU and
# HellaSwag at length 0) have no effective length: their one "length" is not a context length.
NOT_LENGTH_CONTROLLED = {"threshold": None, "value": None, "label": "n/a"}


def suite_length_controlled(spec: dict) -> bool:
    """Whether a suite's lengths are context lengths: the spec's `length_controlled` when given,
    else False for a suite evaluated at length 0 only."""
    flag = spec.get("length_controlled")
    if flag is not None:
        return bool(flag)
    return sorted(int(L) for L in spec.get("lengths") or []) != [0]


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


def _stats(per_ckpt: dict[str, float], ckpts: list[dict], labels: dict[str, str]) -> dict:
    """Statistics over checkpoints; per_ckpt maps fingerprint -> value (run order kept)."""
    order = [c for c in ckpts if c["fingerprint"] in per_ckpt]
    vals = [per_ckpt[c["fingerprint"]] for c in order]
    n = len(vals)
    assert n > 0
    mean = sum(vals) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else 0.0
    return {
        "mean": mean,
        "std": std,
        "min": min(vals),
        "max": max(vals),
        "n": n,
        "steps": [c.get("step") for c in order],
        "per_step": {labels[c["fingerprint"]]: per_ckpt[c["fingerprint"]] for c in order},
    }


def _weighted(values: list[float], weights: list[int]) -> float:
    return sum(w * v for w, v in zip(weights, values)) / sum(weights)


def _group_average(
    tasks: list[str], cell: dict, lengths: list[int], ckpt_fps: list[str], counts: dict | None = None
) -> dict[int, tuple[list[str], dict[str, float]]]:
    """For each length: (tasks covered, {fingerprint: mean over those tasks}) for complete checkpoints.
    counts: weight each task by its number of samples (a "weighting": "samples" suite), else equally."""
    out = {}
    for L in lengths:
        covered = [t for t in tasks if any((t, L, fp) in cell for fp in ckpt_fps)]
        if not covered:
            continue

        def weight(t: str, fp: str, L: int = L) -> float:
            return float(counts[(t, L, fp)]) if counts is not None else 1.0

        per_ckpt = {
            fp: sum(cell[(t, L, fp)] * weight(t, fp) for t in covered) / sum(weight(t, fp) for t in covered)
            for fp in ckpt_fps
            if all((t, L, fp) in cell for t in covered)
        }
        if per_ckpt:
            out[L] = (covered, per_ckpt)
    return out


def _summaries(
    per_len: dict[int, dict[str, float]], lengths: list[int], ckpts, labels, reps: dict | None = None, key=()
) -> dict:
    """avg / wavg_inc / wavg_dec over all `lengths`, within each checkpoint then over checkpoints.

    reps: {length: (B, K) replicates} to give each summary its interval (the same weights per replicate)."""
    if not lengths or any(L not in per_len for L in lengths):
        return {}
    fps = [c["fingerprint"] for c in ckpts if all(c["fingerprint"] in per_len[L] for L in lengths)]
    if not fps:
        return {}
    n = len(lengths)
    inc, dec = list(range(1, n + 1)), list(range(n, 0, -1))
    out = {}
    for name, weights in (("avg", [1] * n), ("wavg_inc", inc), ("wavg_dec", dec)):
        per_ckpt = {fp: _weighted([per_len[L][fp] for L in lengths], weights) for fp in fps}
        out[name] = _stats(per_ckpt, ckpts, labels)
        if reps is not None and all(L in reps for L in lengths):
            combined = mean_of([reps[L] for L in lengths], weights)
            out[name].update(_interval(combined, ckpts, fps, (*key, name)))
    return out


def _interval(reps: np.ndarray, ckpts: list[dict], fps, key: tuple) -> dict:
    """{"ci_low", "ci_high"} of the mean over the checkpoints `fps` (columns of reps in run order)."""
    cols = [i for i, c in enumerate(ckpts) if c["fingerprint"] in set(fps)]
    iv = bootstrap.interval(bootstrap.over_checkpoints(reps[:, cols], bootstrap.rng_for(*key, "checkpoints")))
    return {} if iv is None else {"ci_low": iv[0], "ci_high": iv[1]}


def _group_reps(tasks: list[str], L: int, reps: dict, weights: dict | None = None) -> np.ndarray | None:
    """Replicates of the within-checkpoint mean over tasks at one length (None if a task has none);
    weights {task: samples} for a sample-weighted suite."""
    mats = [m for t in tasks if (m := reps.get((t, L))) is not None]
    if len(mats) < len(tasks):
        return None
    return mean_of(mats, [weights[t] for t in tasks] if weights is not None else None)


def _sample_weights(tasks: list[str], L: int, counts: dict, per_ckpt: dict) -> dict[str, int]:
    """{task: samples} at L, from the first checkpoint of the average (checkpoints score the same samples)."""
    fp = next(iter(per_ckpt))
    return {t: counts[(t, L, fp)] for t in tasks}


def _aggregate_suite(
    spec: dict, cell: dict, counts: dict, ckpts, labels, threshold: float, per: dict | None = None
) -> dict:
    """One suite's block. per: the per-sample collections (blocks, replicates, depths, timings)."""
    per = per or {"reps": {}, "blocks": {}, "depth": {}, "seconds": {}}
    reps = per["reps"]
    tasks = list(spec["tasks"])
    excluded = list(spec.get("excluded") or [])
    unavailable = dict(spec.get("unavailable") or {})
    lengths = sorted(int(L) for L in spec["lengths"])
    fps = [c["fingerprint"] for c in ckpts]
    skip = set(excluded) | set(unavailable)
    evaluated = [t for t in tasks if t not in skip and any((t, L, fp) in cell for L in lengths for fp in fps)]

    per_task: dict[str, dict] = {}
    per_task_summary: dict[str, dict] = {}
    for t in evaluated:
        per_task[t] = {}
        task_len: dict[int, dict[str, float]] = {}
        for L in lengths:
            per_ckpt = {fp: cell[(t, L, fp)] for fp in fps if (t, L, fp) in cell}
            if not per_ckpt:
                continue
            task_len[L] = per_ckpt
            stats = _stats(per_ckpt, ckpts, labels)
            num = [counts[(t, L, fp)] for fp in per_ckpt]
            stats["num_samples"] = min(num)
            if min(num) != max(num):
                stats["num_samples_range"] = [min(num), max(num)]
            if (t, L) in reps:
                stats.update(_interval(reps[(t, L)], ckpts, per_ckpt, (t, L)))
            shares = (per.get("degenerate") or {}).get((t, L))
            if shares is not None:  # empty / ran to max new tokens / looping, named never averaged in silence
                stats["degenerate"] = shares
            block = per["blocks"].get((t, L))
            bound = None if block is not None and is_perplexity(block) else _bound(stats, _chance(t))
            if bound:
                stats["bound"] = bound
            per_task[t][str(L)] = stats
        task_reps = {L: reps[(t, L)] for L in task_len if (t, L) in reps}
        summary = _summaries(task_len, lengths, ckpts, labels, task_reps, (t,))
        if summary:
            per_task_summary[t] = summary

    total = len(tasks)
    pooled = spec.get("weighting") == "samples"
    weights = counts if pooled else None
    suite_len = _group_average(evaluated, cell, lengths, fps, weights)
    per_length = {}
    len_reps = {}
    for L, (covered, per_ckpt) in suite_len.items():
        per_length[str(L)] = {**_stats(per_ckpt, ckpts, labels), "tasks_covered": len(covered), "tasks_total": total}
        r = _group_reps(covered, L, reps, _sample_weights(covered, L, counts, per_ckpt) if pooled else None)
        if r is not None:
            len_reps[L] = r
            per_length[str(L)].update(_interval(r, ckpts, per_ckpt, ("suite", tuple(covered), L)))

    covered_everywhere = [t for t in evaluated if all(L in suite_len and t in suite_len[L][0] for L in lengths)]
    summary = _summaries(
        {L: pc for L, (_, pc) in suite_len.items()}, lengths, ckpts, labels, len_reps, ("suite", tuple(evaluated))
    )
    length_controlled = suite_length_controlled(spec)
    summary["effective_length"] = (
        effective_length(per_length, lengths, threshold) if length_controlled else dict(NOT_LENGTH_CONTROLLED)
    )
    if length_controlled:
        summary["effective_length_nolima"] = base_relative_effective_length(per_length, lengths)
    summary["tasks_covered"] = len(covered_everywhere)
    summary["tasks_total"] = total
    summary["lengths_covered"] = len(suite_len)
    summary["lengths_total"] = len(lengths)

    out: dict = {
        "tasks": tasks,
        "evaluated": evaluated,
        "excluded": excluded,
        "unavailable": unavailable,
        "lengths": lengths,
        "per_task": per_task,
        "per_length": per_length,
        "summary": summary,
        "per_task_summary": per_task_summary,
    }
    if not length_controlled:
        out["length_controlled"] = False
    if pooled:
        out["weighting"] = "samples"
    if spec.get("unavailable_lengths"):
        out["unavailable_lengths"] = {t: dict(v) for t, v in spec["unavailable_lengths"].items()}
    categories = spec.get("categories")
    if categories:
        out["categories"] = {}
        for cat, cat_tasks in categories.items():
            cat_eval = [t for t in cat_tasks if t in evaluated]
            out["categories"][cat] = {}
            for L, (covered, per_ckpt) in _group_average(cat_eval, cell, lengths, fps, weights).items():
                entry = {
                    **_stats(per_ckpt, ckpts, labels),
                    "tasks_covered": len(covered),
                    "tasks_total": len(cat_tasks),
                }
                r = _group_reps(covered, L, reps, _sample_weights(covered, L, counts, per_ckpt) if pooled else None)
                if r is not None:
                    entry.update(_interval(r, ckpts, per_ckpt, ("category", cat, tuple(covered), L)))
                out["categories"][cat][str(L)] = entry
    if spec.get("headline"):
        out["headline"] = _headline(spec["headline"], evaluated, cell, counts, lengths, ckpts, labels, reps)
    if spec.get("protocol"):
        out["protocol"] = spec["protocol"]
    blocks = {t: {str(L): per["blocks"][(t, L)] for L in lengths if (t, L) in per["blocks"]} for t in evaluated}
    if any(blocks.values()):
        out["samples"] = {t: b for t, b in blocks.items() if b}
    heatmap = _depth_heatmap(evaluated, lengths, per["depth"], ckpts)
    if heatmap:
        out["depth_heatmap"] = heatmap
    return out


def _headline(
    spec: dict, evaluated: list[str], cell: dict, counts: dict, lengths: list[int], ckpts, labels, reps: dict
) -> dict:
    """The reference's headline (tasks.registry.Headline): per group and length, within each
    checkpoint the mean over categories of each category's mean over its tasks (or pooled samples),
    then statistics and the bootstrap interval over checkpoints, as every other average; an Avg over
    lengths when every length has a value."""
    fps = [c["fingerprint"] for c in ckpts]
    pooled = spec.get("weighting") == "samples"
    weights = counts if pooled else None
    groups = {}
    for group, cats in spec["groups"].items():
        per_len: dict[int, dict[str, float]] = {}
        per_length, len_reps = {}, {}
        for L in lengths:
            cat_means = []  # (tasks covered, {fingerprint: category mean})
            for cat_tasks in cats.values():
                got = _group_average([t for t in cat_tasks if t in evaluated], cell, [L], fps, weights)
                if L in got:
                    cat_means.append(got[L])
            common = [fp for fp in fps if cat_means and all(fp in pc for _, pc in cat_means)]
            if not common:
                continue
            per_ckpt = {fp: sum(pc[fp] for _, pc in cat_means) / len(cat_means) for fp in common}
            per_len[L] = per_ckpt
            entry = {
                **_stats(per_ckpt, ckpts, labels),
                "categories_covered": len(cat_means),
                "categories_total": int((spec.get("categories_total") or {}).get(group, len(cats))),
                "tasks_covered": sum(len(covered) for covered, _ in cat_means),
            }
            cat_reps = [
                _group_reps(covered, L, reps, _sample_weights(covered, L, counts, pc) if pooled else None)
                for covered, pc in cat_means
            ]
            if all(r is not None for r in cat_reps):
                r = mean_of([r for r in cat_reps if r is not None], None)
                len_reps[L] = r
                entry.update(_interval(r, ckpts, per_ckpt, ("headline", group, L)))
            per_length[str(L)] = entry
        summary = _summaries(per_len, lengths, ckpts, labels, len_reps, ("headline", group))
        groups[group] = {"per_length": per_length, **({"avg": summary["avg"]} if "avg" in summary else {})}
    out = {"label": spec["label"], "groups": groups}
    if pooled:
        out["weighting"] = "samples"
    return out


def _chance(task: str) -> float:
    """The task's chance level x100 (Task.chance: 25 for four options; 0 for generation tasks)."""
    from tasks.registry import get_task

    try:
        return float(getattr(get_task(task), "chance", 0.0))
    except UserError:  # a task this harness does not know (an imported or renamed one)
        return 0.0


def _bound(stats: dict, chance: float) -> str | None:
    """ "floor" when the cell's 95% interval reaches the task's chance level (or 0), "ceiling" when it
    reaches 100, "floor and ceiling" when both: such a cell cannot tell two runs apart (a reader must
    not read a difference into two floors). Without an interval, the mean itself at the bound."""
    lo, hi = stats.get("ci_low"), stats.get("ci_high")
    if lo is None or hi is None:
        lo = hi = stats["mean"]
    floor, ceiling = lo <= chance + 1e-9, hi >= 100.0 - 1e-9
    if floor and ceiling:
        return "floor and ceiling"
    return "floor" if floor else "ceiling" if ceiling else None


def _depth_heatmap(tasks: list[str], lengths: list[int], depth: dict, ckpts: list[dict]) -> dict | None:
    """Needle hit rate (x100) by answer depth bin and length, pooled over the suite's niah tasks:
    within each checkpoint, then the mean over checkpoints. `n` counts answer needles per checkpoint."""
    used = sorted({t for (t, _, _, _) in depth if t in tasks})
    if not used:
        return None
    cells: dict[str, list] = {}
    for L in lengths:
        row = []
        for b in range(len(DEPTH_BINS)):
            per_ckpt, n = [], 0
            for c in ckpts:
                acc = [depth[(t, L, c["fingerprint"], b)] for t in used if (t, L, c["fingerprint"], b) in depth]
                hits, count = sum(a[0] for a in acc), sum(a[1] for a in acc)
                if count:
                    per_ckpt.append(100.0 * hits / count)
                    n = max(n, count)
            row.append(
                {"mean": sum(per_ckpt) / len(per_ckpt), "n": n, "checkpoints": len(per_ckpt)} if per_ckpt else None
            )
        if any(row):
            cells[str(L)] = row
    if not cells:
        return None
    return {"tasks": used, "bins": [list(b) for b in DEPTH_BINS], "lengths": [int(L) for L in cells], "cells": cells}


def aggregate(
    records: list[dict], suites: dict[str, dict], run: dict, provenance: dict, threshold: float = DEFAULT_THRESHOLD
) -> dict:
    """The results.json dict (see the module docstring for the math)."""
    run = dict(run)
    ckpts = [dict(c) for c in run.get("checkpoints") or checkpoints_from_records(records)]
    run["checkpoints"] = ckpts
    labels = checkpoint_labels(ckpts)
    known = set(labels)

    # Exact sums (math.fsum): a cell's value must not depend on the order records were stored in,
    # which varies with the runner's order of work and with parallel workers.
    sums: dict[tuple, list[float]] = defaultdict(list)
    counts: dict[tuple, int] = defaultdict(int)
    nll: dict[tuple, list] = {}  # perplexity cells: [nll of each sample, sum scored tokens]
    seen: dict[tuple, tuple] = {}  # record key -> (prediction, score) of the record counted
    conflicts = 0  # later records of a counted key with other content: said, never chosen in silence
    collected = _Collected()
    nolima_rows: dict[str, list] = defaultdict(list)  # task -> (length, test, fp, score x100)
    for r in records:
        fp = r["checkpoint"]["fingerprint"]
        k = record_key(r)
        if fp not in known:  # another (older) checkpoint
            continue
        content = (r.get("prediction"), float(r["score"]))
        if k in seen:  # a duplicate: the first written counts; one of other content is reported
            conflicts += seen[k] != content
            continue
        seen[k] = content
        if (r.get("metadata") or {}).get("unscored"):  # the reference's scorer skips it (HELMET's eval_alce)
            continue
        cell_key = (r["task"], int(r["length"]), fp)
        sums[cell_key].append(float(r["score"]))
        counts[cell_key] += 1
        meta = r.get("metadata") or {}
        if "test" in meta and r.get("metric") == "contains":  # NoLiMa: its base score is per test
            nolima_rows[r["task"]].append((int(r["length"]), str(meta["test"]), fp, 100.0 * float(r["score"])))
        if "nll" in meta and "tokens" in meta:
            acc = nll.setdefault(cell_key, [[], 0])
            acc[0].append(float(meta["nll"]))
            acc[1] += int(meta["tokens"])
        collected.add(r, fp)
    cell = {k: 100.0 * math.fsum(sums[k]) / counts[k] for k in sums}
    # A perplexity cell is the corpus perplexity exp(sum nll / sum tokens), as papers report it
    # (lower is better), not the mean of per-window scores.
    cell.update({k: math.exp(math.fsum(v[0]) / v[1]) for k, v in nll.items() if v[1] > 0})
    perplexity_tasks = {k[0] for k in nll}
    per = collected.finish(ckpts, labels)
    provenance = dict(provenance)
    if "throughput" not in provenance and collected.total_seconds > 0:
        provenance["throughput"] = {
            "samples_per_s": collected.total_samples / collected.total_seconds,
            "samples": collected.total_samples,
            "seconds": collected.total_seconds,
            "note": "samples evaluated per second of one checkpoint's evaluation (all checkpoints pooled)",
            # timings live here, not in the scores: a re-run or a parallel run scores the same, times differ
            "seconds_per_sample": {
                t: {str(L): s / n for (t2, L), (s, n) in sorted(collected.seconds.items()) if t2 == t}
                for t in sorted({t for t, _ in collected.seconds})
            },
        }

    out: dict = {
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "provenance": provenance,
        "intervals": dict(bootstrap.METHOD),
        "suites": {
            name: _perplexity_view(
                _aggregate_suite(spec, cell, counts, ckpts, labels, threshold, per), perplexity_tasks
            )
            for name, spec in suites.items()
        },
    }
    for name, spec in suites.items():  # NoLiMa's effective length by the paper's rule (per-test base)
        rows = [x for t in spec["tasks"] if t in nolima_rows for x in nolima_rows[t]]
        if rows and name in out["suites"]:
            from tasks.nolima.effective import effective_length as nolima_effective_length
            from tasks.nolima.effective import per_test_means

            rel = nolima_effective_length(per_test_means(rows))
            if "scores" in rel:
                rel["scores"] = {str(L): v for L, v in rel["scores"].items()}
            out["suites"][name]["summary"]["effective_length_nolima"] = rel
    if conflicts:
        out["conflicting_records"] = conflicts
    whole = Degenerate()  # the run's predictions together: "all empty" is said in the last line
    for d in collected.degenerate.values():
        whole.total += d.total
        whole.empty += d.empty
        whole.at_max += d.at_max
        whole.repeat += d.repeat
    if whole.total:
        out["degenerate"] = whole.shares()
    return out


class _Collected:
    """Per-sample facts gathered in the one pass over the records: scores for the samples blocks,
    needle hits by depth for the heatmap, evaluation seconds for the throughput."""

    def __init__(self) -> None:
        self.cells: dict[tuple, dict] = {}
        self.depth: dict[tuple, list] = {}  # (task, L, fp, bin) -> [hits, needles]
        self.seconds: dict[tuple, list] = {}  # (task, L) -> [seconds, samples]
        self.total_seconds = 0.0
        self.total_samples = 0
        self.degenerate: dict[tuple, Degenerate] = {}  # (task, L) -> degenerate predictions, all checkpoints

    def add(self, r: dict, fp: str) -> None:
        task, L, meta = r["task"], int(r["length"]), r.get("metadata") or {}
        c = self.cells.setdefault(
            (task, L),
            {"task_version": r["task_version"], "dataset_hash": r.get("dataset_hash"), "seed": r["seed"], "by": {}},
        )
        for field in ("task_version", "dataset_hash", "seed"):  # a cell mixing generators pairs with nothing
            if c[field] != r.get(field) and not str(c[field]).startswith("mixed"):
                c[field] = f"mixed: {c[field]}, {r.get(field)}"
        entry = {"score": float(r["score"])}
        if "nll" in meta and "tokens" in meta:
            entry.update(nll=float(meta["nll"]), tokens=int(meta["tokens"]))
        c["by"].setdefault(fp, {})[int(r["index"])] = entry
        self.degenerate.setdefault((task, L), Degenerate()).add(r)
        depths, refs = meta.get("answer_depths"), meta.get("references")
        if depths and refs and len(depths) == len(refs) and r.get("metric"):
            from tasks.metrics import METRICS

            metric = METRICS.get(r["metric"])
            for ref, d in zip(refs, depths):
                # the task's own metric on this needle's answer alone: 1 when the prediction has it
                hit = metric(r.get("prediction") or "", [ref]) if metric else float(r["score"])
                b = min(int(float(d) // 10), len(DEPTH_BINS) - 1)
                acc = self.depth.setdefault((task, L, fp, b), [0.0, 0])
                acc[0] += hit
                acc[1] += 1
        secs = r.get("eval_seconds")
        if isinstance(secs, (int, float)) and secs >= 0:
            acc = self.seconds.setdefault((task, L), [0.0, 0])
            acc[0] += float(secs)
            acc[1] += 1
            self.total_seconds += float(secs)
            self.total_samples += 1

    def finish(self, ckpts: list[dict], labels: dict[str, str]) -> dict:
        blocks, reps = {}, {}
        for (task, L), c in self.cells.items():
            index = sorted({i for by in c["by"].values() for i in by})
            block = {k: c[k] for k in ("task_version", "dataset_hash", "seed")}
            block["index"] = index
            ppl = all("nll" in e for by in c["by"].values() for e in by.values())
            fields = ("nll", "tokens") if ppl else ("score",)
            for field in fields:
                block["scores" if field == "score" else field] = {
                    labels[fp]: [_num(by[i][field]) if i in by else None for i in index]
                    for fp, by in ((ck["fingerprint"], c["by"].get(ck["fingerprint"])) for ck in ckpts)
                    if by is not None
                }
            blocks[(task, L)] = block
            reps[(task, L)] = cell_replicates(task, L, block, [labels[ck["fingerprint"]] for ck in ckpts])
            assert is_perplexity(block) == ppl
        degenerate = {k: sh for k, d in self.degenerate.items() if (sh := d.shares()) is not None}
        return {"blocks": blocks, "reps": reps, "depth": self.depth, "seconds": self.seconds, "degenerate": degenerate}


def _num(v: float) -> float:
    """Scores kept to 6 decimals (their exact fractions do not need more), token counts as ints."""
    return v if isinstance(v, int) else round(float(v), 6)


def _perplexity_view(suite: dict, perplexity_tasks: set[str]) -> dict:
    """Mark a suite whose tasks are all perplexities: lower is better, no effective length."""
    if suite["evaluated"] and set(suite["evaluated"]) <= perplexity_tasks:
        suite["score"] = "perplexity"
        suite["summary"]["effective_length"] = {"threshold": None, "value": None, "label": "n/a (perplexity)"}
        suite["summary"].pop("effective_length_nolima", None)
    return suite


def apply_threshold(results: dict, threshold: float) -> dict:
    """The same results with every suite's effective length recomputed for another threshold."""
    out = json.loads(json.dumps(results))
    for suite in out["suites"].values():
        if suite.get("score") == "perplexity" or not suite_length_controlled(suite):
            continue
        suite.setdefault("summary", {})["effective_length"] = effective_length(
            suite.get("per_length", {}), suite.get("lengths", []), threshold
        )
    return out


def _merged(values: list) -> object:
    """One value when all records agree, else a "mixed: ..." note (mixed settings move scores)."""
    distinct = []
    for v in values:
        if v not in distinct:
            distinct.append(v)
    if len(distinct) == 1:
        return distinct[0]
    return "mixed: " + ", ".join(map(str, distinct))


def _registry_length_controlled(names: list[str]) -> bool | None:
    """Whether any of these registered tasks is length-controlled; None when none is registered."""
    from tasks.registry import get_task

    flags = []
    for n in names:
        try:
            flags.append(bool(get_task(n).length_controlled))
        except UserError:  # unknown to this harness (a renamed or third-party task)
            continue
    return any(flags) if flags else None


def _latest_settings(records: list[dict]) -> list[dict]:
    """Per checkpoint, the records computed with the settings of its most recently written record:
    a store swept over a setting (--dtype, --rope-theta, ...) holds one record set per value, and
    averaging them together would report a setting no record had."""
    from harness.core.identity import settings_id

    latest = {r["checkpoint"]["fingerprint"]: settings_id(r.get("settings")) for r in records}
    kept = [r for r in records if settings_id(r.get("settings")) == latest[r["checkpoint"]["fingerprint"]]]
    # Likewise per checkpoint and task, the task version and data of its latest record: a data file
    # whose content changed (or a new task version) made new records beside the old ones, and a
    # cell must not average the two contents.
    made = {(r["checkpoint"]["fingerprint"], r["task"]): (r["task_version"], r.get("dataset_hash")) for r in kept}
    return [
        r
        for r in kept
        if (r["task_version"], r.get("dataset_hash")) == made[(r["checkpoint"]["fingerprint"], r["task"])]
    ]


def _suite_headline(name: str, seen: list[str]) -> dict | None:
    """The registered headline of a suite, restricted to the tasks the store holds."""
    from tasks.registry import suite_headline

    headline = suite_headline(name)
    return headline.to_spec(seen) if headline is not None else None


def _suite_weighting(name: str) -> str | None:
    from tasks.suites import suite_weighting

    return suite_weighting(name)


def results_from_store(
    path: str | Path, threshold: float = DEFAULT_THRESHOLD, suite_tasks: dict[str, list[str]] | None = None
) -> dict:
    """Re-aggregate a samples.jsonl without the eval command's suite settings.

    suite_tasks gives each suite's full task list (the registry's); a suite's tasks without
    records are listed as unavailable ("no results in the store"), because the store does not
    say whether they were excluded or missing. Lengths are those present in the records. Of a
    checkpoint evaluated under several settings, the records of its last-written settings are used.
    """
    from harness.pipeline.store import read_store

    header, records = read_store(path)
    if not records:
        raise UserError(f"results store {path} has no records yet: run harness eval first")
    suite_order: dict[str, list[str]] = {}
    suite_lengths: dict[str, set[int]] = defaultdict(set)
    for r in records:
        tasks = suite_order.setdefault(r.get("suite") or "tasks", [])
        if r["task"] not in tasks:
            tasks.append(r["task"])
        suite_lengths[r.get("suite") or "tasks"].add(int(r["length"]))
    suites = {}
    for name, seen in suite_order.items():
        full = list((suite_tasks or {}).get(name) or [])
        if not set(seen) <= set(full):
            full = seen
        suites[name] = {
            "tasks": full,
            "excluded": [],
            "lengths": sorted(suite_lengths[name]),
            "unavailable": {t: f"no results in {Path(path).name}" for t in full if t not in seen},
        }
        controlled = _registry_length_controlled(seen)
        if controlled is not None:
            suites[name]["length_controlled"] = controlled
        if _suite_weighting(name):  # LongBench v2 pools its cells' samples, in a re-aggregation too
            suites[name]["weighting"] = _suite_weighting(name)
        headline = _suite_headline(name, seen)
        if headline:
            suites[name]["headline"] = headline
        protocols = sorted(
            {
                str(p)
                for r in records
                if r.get("suite", "tasks") == name and (p := (r.get("settings") or {}).get("protocol"))
            }
        )
        if protocols:
            suites[name]["protocol"] = protocols[0] if len(protocols) == 1 else protocols
    ckpts = checkpoints_from_records(records)
    current = {c["fingerprint"] for c in ckpts}
    used = _latest_settings([r for r in records if r["checkpoint"]["fingerprint"] in current])
    run = {
        "name": _merged([r.get("run") for r in used]),
        "model": model_from_records(records, ckpts),
        "mode": None,
        "checkpoints": ckpts,
    }
    settings = [r.get("settings") or {} for r in used]
    prov = {"package_version": header.get("package_version"), "git_hash": header.get("git_hash")}
    for key in (
        "backend",
        "dtype",
        "batch_size",
        "max_model_len",
        "rope_theta",
        "rope_scaling",
        "template",
        "truncation",
        "tokenizer",
    ):
        prov[key] = _merged([s.get(key) for s in settings])
    hashes: dict[str, list] = defaultdict(list)
    for r in used:
        if r.get("dataset_hash") is not None and r["dataset_hash"] not in hashes[r["task"]]:
            hashes[r["task"]].append(r["dataset_hash"])
    prov["dataset_hashes"] = {t: h[0] if len(h) == 1 else h for t, h in hashes.items()}
    prov["seed"] = _merged(sorted({r["seed"] for r in used}))
    prov["created"] = header.get("created")
    prov["source"] = f"re-aggregated from {path}"
    return aggregate(used, suites, run, prov, threshold)
