"""One suite's block of results.json, from the run's cells (steps 2-5 of harness.pipeline.aggregate).

    block = suite_block(spec, cell, counts, ckpts, labels, threshold, per)

spec: the suite as evaluated ({"tasks", "excluded", "unavailable", "lengths"}, and optionally
"length_controlled", "weighting", "categories", "headline", "protocol", "unavailable_lengths");
cell / counts: (task, length, fingerprint) -> score x100 / samples; per: PerSample.finish().
The block holds per task and length the statistics over checkpoints, the suite's and its
categories' averages per length, the summary over lengths with the effective length, and the
per-sample blocks and depth heatmap that reports pair and draw.
"""

from __future__ import annotations

from harness.core.effective_length import base_relative_effective_length, effective_length
from harness.core.errors import UserError
from harness.core.paired import is_perplexity
from harness.pipeline.checkpoint_stats import (
    checkpoint_interval,
    group_average,
    group_replicates,
    length_summaries,
    sample_weights,
    stats_over_checkpoints,
)
from harness.pipeline.depth_heatmap import depth_heatmap
from harness.pipeline.headline_block import headline_block

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


def suite_block(spec: dict, cell: dict, counts: dict, ckpts, labels, threshold: float, per: dict | None = None) -> dict:
    """One suite's block. per: the per-sample collections (blocks, replicates, depths, timings)."""
    per = per or {"reps": {}, "blocks": {}, "depth": {}, "seconds": {}}
    tasks = list(spec["tasks"])
    lengths = sorted(int(L) for L in spec["lengths"])
    fps = [c["fingerprint"] for c in ckpts]
    skip = set(spec.get("excluded") or []) | set(spec.get("unavailable") or {})
    evaluated = [t for t in tasks if t not in skip and any((t, L, fp) in cell for L in lengths for fp in fps)]
    per_task, per_task_summary = _per_task(evaluated, lengths, cell, counts, ckpts, labels, per)
    pooled = spec.get("weighting") == "samples"
    suite_len = group_average(evaluated, cell, lengths, fps, counts if pooled else None)
    per_length, len_reps = {}, {}
    for L, (covered, per_ckpt) in suite_len.items():
        per_length[str(L)] = {
            **stats_over_checkpoints(per_ckpt, ckpts, labels),
            "tasks_covered": len(covered),
            "tasks_total": len(tasks),
        }
        r = _replicates(covered, L, per["reps"], counts, per_ckpt, pooled)
        if r is not None:
            len_reps[L] = r
            per_length[str(L)].update(checkpoint_interval(r, ckpts, per_ckpt, ("suite", tuple(covered), L)))
    summary = length_summaries(
        {L: pc for L, (_, pc) in suite_len.items()}, lengths, ckpts, labels, len_reps, ("suite", tuple(evaluated))
    )
    covered_everywhere = [t for t in evaluated if all(L in suite_len and t in suite_len[L][0] for L in lengths)]
    summary.update(_effective_lengths(spec, per_length, lengths, threshold))
    summary["tasks_covered"] = len(covered_everywhere)
    summary["tasks_total"] = len(tasks)
    summary["lengths_covered"] = len(suite_len)
    summary["lengths_total"] = len(lengths)
    out: dict = {
        "tasks": tasks,
        "evaluated": evaluated,
        "excluded": list(spec.get("excluded") or []),
        "unavailable": dict(spec.get("unavailable") or {}),
        "lengths": lengths,
        "per_task": per_task,
        "per_length": per_length,
        "summary": summary,
        "per_task_summary": per_task_summary,
    }
    out.update(_spec_extras(spec, evaluated, cell, counts, lengths, ckpts, labels, per))
    return out


def _effective_lengths(spec: dict, per_length: dict, lengths: list[int], threshold: float) -> dict:
    """The summary's effective length at the threshold, and NoLiMa's base-relative one, for a
    length-controlled suite; "n/a" for another."""
    if not suite_length_controlled(spec):
        return {"effective_length": dict(NOT_LENGTH_CONTROLLED)}
    return {
        "effective_length": effective_length(per_length, lengths, threshold),
        "effective_length_nolima": base_relative_effective_length(per_length, lengths),
    }


def _per_task(
    evaluated: list[str], lengths: list[int], cell: dict, counts: dict, ckpts, labels, per: dict
) -> tuple[dict[str, dict], dict[str, dict]]:
    """per_task {task: {length: statistics}} and per_task_summary {task: {avg, wavg_inc, wavg_dec}}."""
    reps = per["reps"]
    fps = [c["fingerprint"] for c in ckpts]
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
            per_task[t][str(L)] = _cell_stats(t, L, per_ckpt, counts, ckpts, labels, per)
        task_reps = {L: reps[(t, L)] for L in task_len if (t, L) in reps}
        summary = length_summaries(task_len, lengths, ckpts, labels, task_reps, (t,))
        if summary:
            per_task_summary[t] = summary
    return per_task, per_task_summary


def _cell_stats(t: str, L: int, per_ckpt: dict[str, float], counts: dict, ckpts, labels, per: dict) -> dict:
    """One task at one length: statistics over checkpoints, samples, interval, degenerate shares, bound."""
    stats = stats_over_checkpoints(per_ckpt, ckpts, labels)
    num = [counts[(t, L, fp)] for fp in per_ckpt]
    stats["num_samples"] = min(num)
    if min(num) != max(num):
        stats["num_samples_range"] = [min(num), max(num)]
    if (t, L) in per["reps"]:
        stats.update(checkpoint_interval(per["reps"][(t, L)], ckpts, per_ckpt, (t, L)))
    shares = (per.get("degenerate") or {}).get((t, L))
    if shares is not None:  # empty / ran to max new tokens / looping, named never averaged in silence
        stats["degenerate"] = shares
    cut = (per.get("budget") or {}).get((t, L))
    if cut is not None:  # under a thinking budget: thoughts closed at it, answers that reached theirs
        stats["budget"] = cut
    prompt = (per.get("prompt_tokens") or {}).get((t, L))
    if prompt is not None:  # the prompts' real mean length beside the nominal L
        stats["prompt_tokens"] = round(prompt, 1)
    block = per["blocks"].get((t, L))
    bound = None if block is not None and is_perplexity(block) else _bound(stats, _chance(t))
    if bound:
        stats["bound"] = bound
    return stats


def _replicates(covered: list[str], L: int, reps: dict, counts: dict, per_ckpt: dict, pooled: bool):
    """Replicates of a group's mean at L, its tasks weighted by their samples in a pooled suite."""
    return group_replicates(covered, L, reps, sample_weights(covered, L, counts, per_ckpt) if pooled else None)


def _spec_extras(
    spec: dict, evaluated: list[str], cell: dict, counts: dict, lengths: list[int], ckpts, labels, per: dict
) -> dict:
    """The block's optional fields, in their order: what the spec adds (length_controlled, weighting,
    unavailable lengths, categories, headline, protocol), then the per-sample blocks and the heatmap."""
    out: dict = {}
    if not suite_length_controlled(spec):
        out["length_controlled"] = False
    if spec.get("weighting") == "samples":
        out["weighting"] = "samples"
    if spec.get("unavailable_lengths"):
        out["unavailable_lengths"] = {t: dict(v) for t, v in spec["unavailable_lengths"].items()}
    if spec.get("categories"):
        out["categories"] = _categories(spec, evaluated, cell, counts, lengths, ckpts, labels, per["reps"])
    if spec.get("headline"):
        out["headline"] = headline_block(spec["headline"], evaluated, cell, counts, lengths, ckpts, labels, per["reps"])
    if spec.get("protocol"):
        out["protocol"] = spec["protocol"]
    blocks = {t: {str(L): per["blocks"][(t, L)] for L in lengths if (t, L) in per["blocks"]} for t in evaluated}
    if any(blocks.values()):
        out["samples"] = {t: b for t, b in blocks.items() if b}
    heatmap = depth_heatmap(evaluated, lengths, per["depth"], ckpts)
    if heatmap:
        out["depth_heatmap"] = heatmap
    return out


def _categories(
    spec: dict, evaluated: list[str], cell: dict, counts: dict, lengths: list[int], ckpts, labels, reps: dict
) -> dict:
    """{category: {length: average over its evaluated tasks}}, as the suite's per_length is made."""
    fps = [c["fingerprint"] for c in ckpts]
    pooled = spec.get("weighting") == "samples"
    out: dict[str, dict] = {}
    for cat, cat_tasks in spec["categories"].items():
        cat_eval = [t for t in cat_tasks if t in evaluated]
        out[cat] = {}
        for L, (covered, per_ckpt) in group_average(cat_eval, cell, lengths, fps, counts if pooled else None).items():
            entry = {
                **stats_over_checkpoints(per_ckpt, ckpts, labels),
                "tasks_covered": len(covered),
                "tasks_total": len(cat_tasks),
            }
            r = _replicates(covered, L, reps, counts, per_ckpt, pooled)
            if r is not None:
                entry.update(checkpoint_interval(r, ckpts, per_ckpt, ("category", cat, tuple(covered), L)))
            out[cat][str(L)] = entry
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


def perplexity_view(suite: dict, perplexity_tasks: set[str]) -> dict:
    """Mark a suite whose tasks are all perplexities: lower is better, no effective length."""
    if suite["evaluated"] and set(suite["evaluated"]) <= perplexity_tasks:
        suite["score"] = "perplexity"
        suite["summary"]["effective_length"] = {"threshold": None, "value": None, "label": "n/a (perplexity)"}
        suite["summary"].pop("effective_length_nolima", None)
    return suite
