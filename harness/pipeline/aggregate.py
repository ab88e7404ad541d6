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

This module makes step 1 (the one pass over the records: cells, duplicates, perplexity) and puts
the file together; the rest lives beside it: the statistics over checkpoints
(harness.pipeline.checkpoint_stats), a suite's block (harness.pipeline.suite_block, its headline
in harness.pipeline.headline_block), the per-sample blocks and timings (harness.pipeline.per_sample),
the depth heatmap (harness.pipeline.depth_heatmap), the checkpoints and their labels
(harness.pipeline.run_checkpoints). Re-aggregating a store without eval's settings:
harness.pipeline.reaggregate.results_from_store.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field

from harness.core import stats as bootstrap
from harness.core.effective_length import effective_length
from harness.core.results_schema import SCHEMA_VERSION
from harness.pipeline.per_sample import PerSample
from harness.pipeline.run_checkpoints import checkpoint_labels, checkpoints_from_records
from harness.pipeline.store import record_key
from harness.pipeline.suite_block import perplexity_view, suite_block, suite_length_controlled

DEFAULT_THRESHOLD = 85.6


def aggregate(
    records: list[dict], suites: dict[str, dict], run: dict, provenance: dict, threshold: float = DEFAULT_THRESHOLD
) -> dict:
    """The results.json dict (see the module docstring for the math)."""
    run = dict(run)
    ckpts = [dict(c) for c in run.get("checkpoints") or checkpoints_from_records(records)]
    run["checkpoints"] = ckpts
    labels = checkpoint_labels(ckpts)
    cells = _count_records(records, set(labels))
    per = cells.samples.finish(ckpts, labels)
    provenance = dict(provenance)
    throughput = cells.samples.throughput()
    if "throughput" not in provenance and throughput is not None:
        provenance["throughput"] = throughput
    out: dict = {
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "provenance": provenance,
        "intervals": dict(bootstrap.METHOD),
        "suites": {
            name: perplexity_view(
                suite_block(spec, cells.cell, cells.counts, ckpts, labels, threshold, per), cells.perplexity_tasks
            )
            for name, spec in suites.items()
        },
    }
    _nolima_effective_lengths(out["suites"], suites, cells.nolima_rows)
    if cells.conflicts:
        out["conflicting_records"] = cells.conflicts
    degenerate = cells.samples.run_degenerate()
    if degenerate is not None:  # the run's predictions together: "all empty" is said in the last line
        out["degenerate"] = degenerate
    return out


@dataclass
class _Cells:
    """What the one pass over the records counts: (task, length, fingerprint) -> score x100 and
    samples, the perplexity tasks, conflicting duplicates, per-sample facts and NoLiMa's rows."""

    cell: dict[tuple, float] = field(default_factory=dict)
    counts: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))
    perplexity_tasks: set[str] = field(default_factory=set)
    conflicts: int = 0  # later records of a counted key with other content: said, never chosen in silence
    samples: PerSample = field(default_factory=PerSample)
    nolima_rows: dict[str, list] = field(default_factory=lambda: defaultdict(list))  # task -> (L, test, fp, x100)


def _count_records(records: list[dict], known: set[str]) -> _Cells:
    """The cells of the records of the checkpoints `known` (fingerprints), each record key once."""
    out = _Cells()
    # Exact sums (math.fsum): a cell's value must not depend on the order records were stored in,
    # which varies with the runner's order of work and with parallel workers.
    sums: dict[tuple, list[float]] = defaultdict(list)
    nll: dict[tuple, list] = {}  # perplexity cells: [nll of each sample, sum scored tokens]
    seen: dict[tuple, tuple] = {}  # record key -> (prediction, score) of the record counted
    for r in records:
        fp = r["checkpoint"]["fingerprint"]
        k = record_key(r)
        if fp not in known:  # another (older) checkpoint
            continue
        content = (r.get("prediction"), float(r["score"]))
        if k in seen:  # a duplicate: the first written counts; one of other content is reported
            out.conflicts += seen[k] != content
            continue
        seen[k] = content
        if (r.get("metadata") or {}).get("unscored"):  # the reference's scorer skips it (HELMET's eval_alce)
            continue
        cell_key = (r["task"], int(r["length"]), fp)
        sums[cell_key].append(float(r["score"]))
        out.counts[cell_key] += 1
        meta = r.get("metadata") or {}
        if "test" in meta and r.get("metric") == "contains":  # NoLiMa: its base score is per test
            out.nolima_rows[r["task"]].append((int(r["length"]), str(meta["test"]), fp, 100.0 * float(r["score"])))
        if "nll" in meta and "tokens" in meta:
            acc = nll.setdefault(cell_key, [[], 0])
            acc[0].append(float(meta["nll"]))
            acc[1] += int(meta["tokens"])
        out.samples.add(r, fp)
    out.cell = {k: 100.0 * math.fsum(sums[k]) / out.counts[k] for k in sums}
    # A perplexity cell is the corpus perplexity exp(sum nll / sum tokens), as papers report it
    # (lower is better), not the mean of per-window scores.
    out.cell.update({k: math.exp(math.fsum(v[0]) / v[1]) for k, v in nll.items() if v[1] > 0})
    out.perplexity_tasks = {k[0] for k in nll}
    return out


def _nolima_effective_lengths(blocks: dict[str, dict], suites: dict[str, dict], nolima_rows: dict) -> None:
    """NoLiMa's effective length by the paper's rule (per-test base) in each suite holding its records."""
    for name, spec in suites.items():
        rows = [x for t in spec["tasks"] if t in nolima_rows for x in nolima_rows[t]]
        if rows and name in blocks:
            from tasks.nolima.effective import effective_length as nolima_effective_length
            from tasks.nolima.effective import per_test_means

            rel = nolima_effective_length(per_test_means(rows))
            if "scores" in rel:
                rel["scores"] = {str(L): v for L, v in rel["scores"].items()}
            blocks[name]["summary"]["effective_length_nolima"] = rel


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
