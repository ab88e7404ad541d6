"""The training loop: packed windows -> model -> token-averaged loss -> AdamW, with checkpoints.

    from training.config import TrainJob, ModelConfig, DataConfig, ScheduleConfig
    from training.loop import train
    summary = train(TrainJob(model=ModelConfig("tiny"), data=DataConfig(["c.jsonl"], window=512),
                             out="runs/x", schedule=ScheduleConfig(steps=20)))

The CLI front end is `harness train` (harness/commands/train.py); multi-process runs are the same
command under torchrun or accelerate (training/distributed.py).

The loop plugs together the windows (training.windows: the pipeline and the resumable stream),
the optimizer step and its loss (training.step: the sum of token cross-entropies over the step's
loss tokens on every process, so accumulation and data parallelism average over tokens) and the
checkpoints (training.checkpointing).

Resume: the window stream is a pure function of (data, seed, epoch), so the state only records
how many windows were consumed; a resumed run rebuilds the stream and skips them. Together with
the saved model/optimizer/scheduler/RNG state this reproduces the uninterrupted loss curve.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from harness.core.errors import UserError
from training.config import TrainJob
from training.model_files import load_model, load_tokenizer_for
from training.step import Stepper, loss_sum, shifted_targets
from training.windows import Pipeline, WindowStream, default_pipeline

__all__ = ["Pipeline", "default_pipeline", "load_model", "load_tokenizer_for", "loss_sum", "shifted_targets", "train"]

# ---------------------------------------------------------------- pieces the loop plugs together


def _resolve_kernel(kernel: str, device, sp_size: int = 1) -> str:
    """auto: varlen on CUDA (flex under sequence parallelism, whose shards need the window layout), sdpa-doc on CPU."""
    if kernel == "auto":
        from training.attention import backend_of

        picked = "sdpa-doc" if device.type != "cuda" else ("flex" if sp_size > 1 else "varlen")
        print(f"--kernel auto: {picked} ({backend_of(picked)}) on {device.type}", flush=True)
        return picked
    return kernel


def make_optimizer(model, job: TrainJob):
    """AdamW; no weight decay on 1-D parameters (norm gains, biases), as HF Trainer and torchtitan do."""
    import torch

    o = job.optimizer
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # foreach=False: one kernel per tensor, identical on one process and on FSDP shards.
    return torch.optim.AdamW(
        groups, lr=o.lr, betas=cast("tuple[float, float]", tuple(o.betas)), eps=o.eps, foreach=False
    )


def make_scheduler(optimizer, job: TrainJob):
    """Linear warmup over `warmup` steps, then constant (the paper's constant lr)."""
    import torch

    warmup = job.schedule.warmup
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup > 0 else 1.0)


def _seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _report_mixture(run_dir: Path, table: str) -> None:
    """Print the mixture table (paper's Appendix C layout) and keep it beside the checkpoints."""
    from training.checkpointing import write_text_atomic

    print(table)
    write_text_atomic(run_dir / "mixture.txt", table + "\n")


# The settings a resumed run must share with the run it resumes (others, e.g. --steps, may change).
_RESUME_KEYS = (
    "mode",
    "window",
    "batch_size",
    "grad_accum",
    "seed",
    "paths",
    "domain_tags",
    "interleave_chunks",
    "mixture",
    "text_field",
    "max_docs",
)


def _resume_signature(job: TrainJob, world: int) -> dict:
    d = job.data
    sig = {k: getattr(d, k) for k in _RESUME_KEYS}
    sig.update(model=job.model.path, rope_theta=job.model.rope_theta, world=world)
    return sig


# ---------------------------------------------------------------- the loop


def train(
    job: TrainJob,
    *,
    pipeline: Pipeline | None = None,
    dist=None,
    progress: bool = True,
    stop_after: int | None = None,
    grad_hook: Callable | None = None,
    log_to: str | Sequence[str] | None = None,
) -> dict:
    """Run (or resume) the job; returns {"steps", "losses", "checkpoints", "resumed_from", "last_loss"}.

    `dist` is a training.distributed.DistContext (None: one process). `stop_after` ends the run
    after that step as if killed, and `grad_hook(step, model)` sees the reduced gradients before
    clipping (tests use both: resume, and equality of gradients across process layouts).
    Rank 0 holds the run directory's lock (training.runlock) for the whole run. `log_to` names the
    dashboard sinks beside log.jsonl ("tensorboard", "wandb"; training.logging), checked before anything loads.
    """
    import torch
    from transformers.utils import logging as hf_logging

    from training.distributed import SingleProcess
    from training.logging import check_sink_folders, parse_log_to
    from training.runlock import RunLock

    _validate(job)
    sinks = parse_log_to(log_to)
    check_sink_folders(job.out, sinks)  # RUN/tensorboard/ that cannot be made: before the model loads
    ctx = dist if dist is not None else SingleProcess(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    lock = RunLock(job.out) if ctx.rank == 0 else None
    # Our bar is the run's progress; transformers' weight-loading/saving bars would break it up.
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        if lock is not None:
            lock.acquire()
        return _train(
            job, pipeline=pipeline, ctx=ctx, progress=progress, stop_after=stop_after, grad_hook=grad_hook, sinks=sinks
        )
    finally:
        if lock is not None:
            lock.release()
        if bars:
            hf_logging.enable_progress_bar()


def _validate(job: TrainJob) -> None:
    d = job.data
    if job.schedule.steps < 1:
        raise UserError(f"--steps {job.schedule.steps} must be at least 1")
    minutes = job.schedule.max_minutes
    if minutes is not None and not 0 < minutes < float("inf"):
        raise UserError(f"--max-minutes {minutes:g} must be a positive number of minutes")
    if d.batch_size < 1 or d.grad_accum < 1:
        raise UserError("--batch-size and --grad-accum must be at least 1")
    if d.window < 16:
        raise UserError(f"--window {d.window} is too small to train on: pass at least 16 tokens")
    if job.model.dtype not in ("bf16", "fp32"):
        raise UserError(f"--dtype {job.model.dtype} is not supported: pass bf16 or fp32")


def _kernel_for(job: TrainJob, ctx) -> str:
    kernel = _resolve_kernel(job.model.kernel, ctx.device, ctx.sp_size)
    if kernel in ("flex", "varlen") and ctx.device.type != "cuda":  # known before loading any weights
        why = "FlexAttention has no backward on CPU" if kernel == "flex" else "varlen attention is CUDA-only"
        raise UserError(f"the {kernel} kernel cannot train on CPU ({why}): pass --kernel sdpa-doc (or auto)")
    return kernel


def _last_logged_loss(run_dir: Path, step: int) -> float | None:
    """The loss logged at `step` (a finished run re-run reports it), else None."""
    from training.logging import LOG_NAME, read_log

    # (a follower's checkpoint scores share the log: rows without a loss are not steps)
    rows = [r for r in read_log(run_dir / LOG_NAME) if r.get("step") == step and "loss" in r]
    return rows[-1]["loss"] if rows else None


def _train(job: TrainJob, *, pipeline, ctx, progress, stop_after, grad_hook, sinks=("jsonl",)) -> dict:
    run = _open(job, pipeline, ctx)
    start_step, stream_pos, state_dir, spent = run.manager.resume(run.model, run.optimizer, run.scheduler)
    budget = None if job.schedule.max_minutes is None else 60.0 * job.schedule.max_minutes
    out_of_time = budget is not None and start_step > 0 and spent >= budget
    meta = _training_meta(run)
    if start_step >= job.schedule.steps or out_of_time:
        return _nothing_to_train(run, meta, start_step, spent, out_of_time)
    if ctx.rank == 0:  # the run goes on (nothing refused it): a follower waits for the marker written at its end
        from harness.models.run_end import clear_run_end

        clear_run_end(job.out)
    if state_dir is not None and ctx.rank == 0:
        print(f"resumed from step {start_step} (state {state_dir})")
    stream = WindowStream(run.pipeline.windows, stream_pos["epoch"], stream_pos["index"])
    stepper, log = _stepper_and_log(run, start_step, progress, sinks)
    return _run_steps(run, stepper, log, stream, meta, start_step, spent, budget, stop_after, grad_hook)


@dataclass
class _Run:
    """What a run trains with once it is set up: the model and its optimizer, and the run folder's manager."""

    job: TrainJob
    ctx: Any
    tokenizer: Any
    pipeline: Pipeline
    kernel: str
    model: Any
    rope_theta: float | None
    optimizer: Any
    scheduler: Any
    manager: Any
    probes: Any = None  # training.probes.Probes, None when off


def _open(job: TrainJob, pipeline: Pipeline | None, ctx) -> _Run:
    """Tokenizer, data, kernel, model, optimizer and the checkpoint manager, in the order that fails
    cheapest first; the run folder's interrupted writes are recovered."""
    from training import checkpointing as ck

    d = job.data
    run_dir = Path(job.out)
    tokenizer = load_tokenizer_for(job)
    if pipeline is None:  # before the model: bad data fails in seconds, not after loading 7B weights
        pipeline = default_pipeline(
            job, tokenizer, report=(lambda table: _report_mixture(run_dir, table)) if ctx.rank == 0 else None
        )
    # imported here: the probe set's schema needs pydantic, which the GPU image's sweep (benchmarks/gpu_check.py,
    # importing this module) does not have
    from training.probes import open_probes

    probes = open_probes(job, tokenizer, ctx)  # also before the model: a bad --probe-docs fails in seconds
    kernel = _kernel_for(job, ctx)
    _seed_all(d.seed)
    model, rope_theta = load_model(job, ctx.device)
    if probes is not None:
        probes.check_model(model)
    try:
        pipeline.prepare_model(model, kernel)
    except ValueError as exc:  # a kernel the hardware or window cannot run (e.g. varlen on CPU)
        raise UserError(f"attention kernel {kernel!r}: {exc}") from None
    if d.window % ctx.sp_size:
        raise UserError(
            f"--window {d.window} does not split over {ctx.sp_size} sequence-parallel ranks: pass a multiple of {ctx.sp_size}"
        )
    model = ctx.wrap_model(model)
    optimizer = make_optimizer(model, job)
    scheduler = make_scheduler(optimizer, job)
    manager = ck.CheckpointManager(run_dir, job, ctx, signature=_resume_signature(job, ctx.world))
    manager.recover()
    return _Run(job, ctx, tokenizer, pipeline, kernel, model, rope_theta, optimizer, scheduler, manager, probes)


def _nothing_to_train(run: _Run, meta: dict, start_step: int, spent: float, out_of_time: bool) -> dict:
    """A run already trained to --steps, or whose --max-minutes are spent: it says so, and a timed
    run that stops short gets its checkpoint at the step it stops at."""
    from training import checkpointing as ck

    job, ctx, manager = run.job, run.ctx, run.manager
    run_dir, total = Path(job.out), job.schedule.steps
    if ctx.rank == 0:
        why = f" (its --max-minutes {job.schedule.max_minutes:g} were spent: {spent:.0f}s)" if out_of_time else ""
        print(f"{run_dir}: already trained to step {start_step}{why}; nothing to do")
    if out_of_time and start_step < total:
        # It stops where its state is, and a stopped run has a checkpoint there: the state may come
        # from --save-state-every of an earlier, longer run that did not checkpoint this step.
        manager.end_at(start_step)
        missing = ctx.rank == 0 and all(s != start_step for s, _ in ck.list_checkpoints(run_dir))
        if ctx.all_reduce_sum(int(missing)) > 0:  # rank 0 looks; every rank takes part in the write
            manager.write_checkpoint(start_step, run.model, run.tokenizer, meta)
        manager.finish()
    manager.mark_end(start_step, stopped_early=out_of_time and start_step < total)
    return {
        "steps": start_step,
        "losses": [],
        "checkpoints": manager.written,
        "resumed_from": start_step,
        "last_loss": _last_logged_loss(run_dir, start_step),
        "stopped_early": out_of_time and start_step < total,
    }


def _training_meta(run: _Run) -> dict:
    """harness_training.json of this run's checkpoints (without the step)."""
    from training import checkpointing as ck

    d = run.job.data
    meta = ck.training_meta(
        mode=d.mode,
        window=d.window,
        rope_theta=run.rope_theta,
        domain_tags=d.domain_tags,
        interleave_chunks=d.interleave_chunks,
        kernel=run.kernel,
        seed=d.seed,
        data=run.pipeline.data_info,
        job=run.job.to_json(),
        tokens_per_step=d.window * d.batch_size * d.grad_accum * run.ctx.dp_size,
    )
    if run.probes is not None:
        meta["probes"] = run.probes.record()  # the probe set's file and sha256 beside the weights
    return meta


def _stepper_and_log(run: _Run, start_step: int, progress: bool, sinks) -> tuple[Stepper, Any]:
    """The optimizer step (bf16 autocast for --dtype bf16) and the step log (rank 0 writes it)."""
    import torch

    from training.logging import StepLog

    job, ctx = run.job, run.ctx
    autocast = torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=job.model.dtype == "bf16")
    stepper = Stepper(job, ctx, run.pipeline, run.model, run.optimizer, run.scheduler, run.kernel, autocast)
    log = StepLog(
        Path(job.out),
        total_steps=job.schedule.steps,
        start_step=start_step,
        enabled=ctx.rank == 0,
        progress=progress,
        sinks=sinks,
        config=job.to_json(),
    )
    return stepper, log


def _run_steps(
    run: _Run,
    stepper: Stepper,
    log,
    stream: WindowStream,
    meta: dict,
    start_step: int,
    spent: float,
    budget: float | None,
    stop_after: int | None,
    grad_hook: Callable | None,
) -> dict:
    """The steps from start_step + 1 to --steps (or until --max-minutes or `stop_after`), each
    logged and given the checkpoint and state the schedule asks for."""
    job, ctx, manager = run.job, run.ctx, run.manager
    total = job.schedule.steps
    losses: list[float] = []
    step = start_step
    stopped_early = False
    started = _clock()
    run.model.train()
    try:
        for step in range(start_step + 1, total + 1):
            row = stepper.step(step, stream, grad_hook)
            if run.probes is not None and run.probes.due(step):
                row.update(run.probes.run(run.model))  # logged with the step's loss (training.probes)
            log.write(row)
            losses.append(row["loss"])
            seconds = spent + _clock() - started
            if budget is not None and step < total and _time_is_up(ctx, seconds >= budget):
                manager.end_at(step)  # this step gets the checkpoint and the state a last step gets
                stopped_early = True
                # Spent on some rank's clock, maybe not on this one's: the state says spent, so the same
                # command again does nothing (rank 0's own seconds could be a little short of it).
                seconds = max(seconds, budget)
            manager.on_step(
                step, run.model, run.optimizer, run.scheduler, run.tokenizer, meta, stream.position(), seconds
            )
            if stopped_early:
                if ctx.rank == 0:
                    print(
                        f"stopped at step {step} of {total}: --max-minutes {job.schedule.max_minutes:g} reached "
                        f"after {seconds:.0f}s of training"
                    )
                break
            if stop_after is not None and step >= stop_after:
                break
        manager.finish()
        if stopped_early or step >= total:  # ended, not cut short as if killed (stop_after)
            manager.mark_end(step, stopped_early=stopped_early)
    finally:
        log.close()
    return {
        "steps": step,
        "losses": losses,
        "checkpoints": manager.written,
        "resumed_from": start_step,
        "last_loss": losses[-1] if losses else None,
        "stopped_early": stopped_early,
    }


_clock = time.monotonic  # --max-minutes' clock (tests drive a fake one)


def _time_is_up(ctx, mine: bool) -> bool:
    """Every rank stops at the same step: the time is up when it is up on any rank's clock."""
    return ctx.all_reduce_sum(int(mine)) > 0
