"""The evaluation loop: checkpoints x tasks x lengths -> per-sample store -> results.json + table.

    from harness.pipeline.evaluate import EvalConfig, run_eval
    results = run_eval(EvalConfig(ckpts="runs/anchor/ckpt-<1950..2000>", suite="ruler", lengths="4k-128k"))

(`harness eval` is the command-line front; see harness/commands/eval.py.)

Order of work, so every user mistake surfaces before any model is loaded:
  1. plan (harness/pipeline/planning.py): select checkpoints (same tokenizer), open the store (an
     unreadable one is an error), resolve tasks (missing data -> "unavailable", listed, never scored
     0), build every sample with tasks.generate (cached on disk, shared by all checkpoints:
     harness/pipeline/sample_plan.py), and check that every prompt plus its tokens to generate fits
     each checkpoint's context;
  2. run (here): per checkpoint, the samples whose store key is absent go to the runner (vLLM gets
     them all at once; transformers one batch at a time) and each finished batch is scored and
     appended to the store, so a killed run loses at most the batch in flight and a re-run of the
     same command recomputes nothing finished; `--data-parallel N` hands work units (whole
     checkpoints, or sample ranges with --shard-samples) to N engines, local or on a Ray cluster
     (harness/pipeline/parallel.py);
  3. report (harness/pipeline/results.py): aggregate the store's records of this plan
     (harness.pipeline.aggregate), write results.json, print the table.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from harness.pipeline.engine import JobEngine, run_job
from harness.pipeline.eval_config import EvalConfig
from harness.pipeline.jobs import CheckpointJob, split_job
from harness.pipeline.planning import Plan, plan_eval
from harness.pipeline.results import build_results
from harness.pipeline.sample_plan import DEFAULT_SAMPLES
from harness.pipeline.store import discard_empty_store

# The evaluation's entry points, importable from here as from the modules that hold them
__all__ = [
    "DEFAULT_SAMPLES",
    "EvalConfig",
    "Plan",
    "build_results",
    "execute",
    "plan_eval",
    "run_eval",
    "run_job",
    "work_units",
]


def work_units(jobs: list[CheckpointJob], engines: int, shard: bool) -> list[CheckpointJob]:
    """The units a data-parallel run hands out: whole checkpoints, or, with --shard-samples or when
    there are fewer checkpoints than engines, sample ranges of each (checkpoint, task, length) so
    that several engines share one checkpoint. Units show no bar of their own (the run shows one)."""
    if shard or len(jobs) < engines:
        parts = engines if shard else -(-engines // len(jobs))
        units = [u for job in jobs for u in split_job(job, parts)]
    else:
        units = list(jobs)
    return [replace(u, progress=False) for u in units]


def execute(plan: Plan) -> None:
    cfg = plan.cfg
    if not plan.jobs:
        return
    if cfg.data_parallel > 1 or cfg.ray_address:
        from harness.pipeline.parallel import run_units

        units = work_units(plan.jobs, cfg.data_parallel, cfg.shard_samples)
        stats = run_units(
            JobEngine,
            units,
            cfg.data_parallel,
            cfg.tensor_parallel_size,
            cfg.ray_address,
            store_dir=plan.out,
            progress=cfg.progress,
        )
        retried = f", {stats.retried} sent again after a lost worker" if stats.retried else ""
        print(
            f"model loads: {stats.loads} ({stats.engines} engines, {len(plan.jobs)} checkpoints, "
            f"{stats.units} work units{retried})",
            file=sys.stderr,
        )
    else:
        for job in plan.jobs:
            _run_unless_vanished(job)


def _run_unless_vanished(job: CheckpointJob) -> None:
    """run_job, except for a checkpoint folder deleted since planning (a training run's --keep-last
    pruning it): skipped with one line, its records so far kept, the other checkpoints evaluated."""
    from harness.models.sources.base import vanished, warn_vanished

    if vanished(job.ckpt):
        warn_vanished(job.ckpt.path)
        return
    try:
        run_job(job)
    except Exception:
        if not vanished(job.ckpt):
            raise
        warn_vanished(job.ckpt.path)


def run_eval(cfg: EvalConfig, print_table: bool = True) -> dict:
    """Plan, run, aggregate; writes <out>/results.json and returns the results dict."""
    from harness.core.results_file import write_results
    from harness.pipeline.run_outcome import Outcome, stored_keys
    from harness.pipeline.store import run_lock

    plan = plan_eval(cfg)
    with run_lock(plan.out) as waited:  # one eval per --out; the second computes only what is missing
        if waited:
            plan = plan_eval(cfg)
        before = stored_keys(plan)
        try:
            execute(plan)
        except BaseException:
            if plan.fresh_store is not None:  # a run that stored nothing leaves no store behind
                discard_empty_store(plan.out, plan.fresh_store, keep_dir=True)
            raise
        outcome = Outcome.of(plan, before, stored_keys(plan))
        if outcome.after == 0:  # nothing to show: no results.json of dashes, one line instead
            if plan.fresh_store is not None:
                discard_empty_store(plan.out, plan.fresh_store, keep_dir=True)
            outcome.refuse_if_nothing()
        results = build_results(plan)
        write_results(plan.out / "results.json", results)
    if print_table:
        from harness.pipeline.table import format_table

        print(format_table(results))
        print(f"results: {plan.out / 'results.json'} (samples: {plan.out / 'samples.jsonl'})")
    outcome.refuse_if_nothing()  # evaluated nothing, the run incomplete: exit 2, said last
    if print_table and outcome.line():
        print(outcome.line())
    return results
