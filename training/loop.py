"""The training loop: packed windows -> model -> token-averaged loss -> AdamW, with checkpoints.

    from training.config import TrainJob, ModelConfig, DataConfig, ScheduleConfig
    from training.loop import train
    summary = train(TrainJob(model=ModelConfig("tiny"), data=DataConfig(["c.jsonl"], window=512),
                             out="runs/x", schedule=ScheduleConfig(steps=20)))

The CLI front end is `harness train` (harness/commands/train.py); multi-process runs are the same
command under torchrun or accelerate (training/distributed.py).

Loss: for every micro-batch, the sum of token cross-entropies over targets whose label is not
-100 (labels are HF-aligned: logits at t predict labels at t+1), divided by the number of loss
tokens over ALL micro-batches of the step and all data-parallel processes. Gradient accumulation
therefore averages over accumulated tokens, not over micro-batches, and N processes give the
gradient of one process that saw all their windows.

Resume: the window stream is a pure function of (data, seed, epoch), so the state only records
how many windows were consumed; a resumed run rebuilds the stream and skips them. Together with
the saved model/optimizer/scheduler/RNG state this reproduces the uninterrupted loss curve.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from harness.core.errors import UserError
from training.config import TrainJob
from training.model_files import load_model, load_tokenizer_for

if TYPE_CHECKING:
    import torch

    from training.modes import Batch

__all__ = ["Pipeline", "default_pipeline", "load_model", "load_tokenizer_for", "loss_sum", "shifted_targets", "train"]

# ---------------------------------------------------------------- pieces the loop plugs together


@dataclass
class Pipeline:
    """How windows become model inputs; `default_pipeline` wires in training.packing/modes/attention."""

    windows: Callable[[int], Iterator]
    """epoch -> iterator of PackedWindow, the same every call for the same epoch."""
    build_batch: Callable[[list, str], Batch]
    """(windows, mode) -> Batch with input_ids, labels (-100 = no loss), position_ids, doc_ids."""
    forward_kwargs: Callable[[object, str], dict]
    """(batch, kernel) -> kwargs for model(**kw), the kernel's explicit mask or boundaries included."""
    gather_logits: Callable[[object, object, str], object]
    """(logits, batch, kernel) -> logits in window order (the anchor-copy varlen layout adds tokens)."""
    prepare_model: Callable[[object, str], None]
    """(model, kernel) -> None: selects the attention implementation on the model."""
    data_info: dict
    """What the checkpoint metadata records about the data (paths, fields, mixture)."""


def shifted_targets(labels):
    """targets[:, t] = labels[:, t + 1] (what logits at t predict); the last position gets -100.

    Shifting before any sequence sharding keeps the boundary target of each shard.
    """
    import torch

    pad = torch.full_like(labels[:, :1], -100)
    return torch.cat([labels[:, 1:], pad], dim=1)


def loss_sum(logits, targets):
    """Sum of token cross-entropies (fp32) over targets != -100."""
    import torch.nn.functional as F

    return F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100, reduction="sum"
    )


def _resolve_kernel(kernel: str, device, sp_size: int = 1) -> str:
    """auto: varlen on CUDA (flex under sequence parallelism, whose shards need the window layout), sdpa-doc on CPU."""
    if kernel == "auto":
        from training.attention import backend_of

        picked = "sdpa-doc" if device.type != "cuda" else ("flex" if sp_size > 1 else "varlen")
        print(f"--kernel auto: {picked} ({backend_of(picked)}) on {device.type}", flush=True)
        return picked
    return kernel


def parse_mixture(spec: str, seed: int):
    """--mixture "tokens=N[,source=FIELD][,long_threshold=4096][,long_weight=5][,SOURCE=SHARE,...]".

    Returns (MixtureConfig, source field or None). A document's source is its FIELD value, else its
    --domain-tags value, else its data file's stem (training.data); without SOURCE=SHARE items each
    source keeps its share of tokens in the original data.
    """
    from harness.core.validate import ascii_float
    from training.mixture import DEFAULT_LONG_THRESHOLD, DEFAULT_LONG_WEIGHT, MixtureConfig, parse_shares

    opts: dict[str, Any] = {
        "tokens": None,
        "long_threshold": DEFAULT_LONG_THRESHOLD,
        "long_weight": DEFAULT_LONG_WEIGHT,
    }
    shares, source_field = [], None
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, _, value = part.partition("=")
        if key.strip() == "source":
            source_field = value.strip() or None
        elif key.strip() in opts:
            try:
                number = ascii_float(value)
                if not math.isfinite(number):
                    raise ValueError(value)
                opts[key.strip()] = number if key.strip() == "long_weight" else int(number)
            except ValueError:
                raise UserError(f"bad --mixture item {part!r}: {key.strip()} takes a finite number") from None
        else:
            shares.append(part)
    if not opts["tokens"] or opts["tokens"] < 1:
        raise UserError(
            f"--mixture {spec!r} needs tokens=N (the mixture's total tokens), e.g. tokens=2000000,C4=0.2,CommonCrawl=0.8"
        )
    if opts["long_threshold"] < 1:
        raise UserError(f"bad --mixture long_threshold={opts['long_threshold']}: give a positive number of tokens")
    config = MixtureConfig(
        total_tokens=opts["tokens"],
        shares=parse_shares(",".join(shares)) if shares else None,
        long_threshold=opts["long_threshold"],
        long_weight=opts["long_weight"],
        seed=seed,
    )
    return config, source_field


def default_pipeline(job: TrainJob, tokenizer, *, report=print) -> Pipeline:
    """Documents (training.data, training.mixture) -> windows (training.packing) -> Batch (training.modes)."""
    from training import attention, modes
    from training.data import anchor_id, load_documents
    from training.packing import pack

    d = job.data
    modes.check_mode(d.mode, d.interleave_chunks)
    aid = anchor_id(tokenizer)
    mixture, source_field = parse_mixture(d.mixture, d.seed) if d.mixture else (None, None)

    def raw_documents():
        for p in d.paths:
            yield from load_documents(
                p,
                tokenizer,
                text_field=d.text_field,
                domain_field=d.domain_tags,
                source_field=source_field,
                limit=d.max_docs,
            )

    # Fail on a bad path or field now, as one line, not at the first step.
    next(
        iter(load_documents(d.paths[0], tokenizer, text_field=d.text_field, domain_field=d.domain_tags, limit=1)), None
    )
    for p in d.paths[1:]:
        next(iter(load_documents(p, tokenizer, text_field=d.text_field, domain_field=d.domain_tags, limit=1)), None)

    def documents(epoch: int):
        if mixture is None:
            return raw_documents()
        from dataclasses import replace

        from training.mixture import build_mixture

        docs, rep = build_mixture(raw_documents(), replace(mixture, seed=mixture.seed + epoch))
        if epoch == 0 and report is not None:
            report(rep.table())
        return iter(docs)

    def windows(epoch: int):
        # Each epoch re-packs with a new seed: other chunk cuts and shuffles when interleaving.
        return pack(documents(epoch), d.window, aid, interleave_chunks=d.interleave_chunks, seed=d.seed + epoch)

    info = {
        "paths": list(d.paths),
        "text_field": d.text_field,
        "domain_field": d.domain_tags,
        "mixture": d.mixture,
        "max_docs": d.max_docs,
        "batch_size": d.batch_size,
        "grad_accum": d.grad_accum,
    }
    return Pipeline(
        windows=windows,
        build_batch=modes.build_batch,
        forward_kwargs=attention.forward_kwargs,
        gather_logits=attention.gather_logits,
        prepare_model=attention.prepare_model,
        data_info=info,
    )


class WindowStream:
    """Windows in a fixed order across epochs, with a position that can be saved and restored."""

    def __init__(self, make: Callable[[int], Iterator], epoch: int = 0, index: int = 0):
        self._make = make
        self.epoch, self.index = epoch, 0
        self._it = iter(make(epoch))
        for _ in range(index):  # resume: the stream is deterministic, so skipping replays it exactly
            self.next()

    def next(self):
        for _ in range(2):
            try:
                w = next(self._it)
                self.index += 1
                return w
            except StopIteration:
                if self.index == 0:
                    raise UserError(
                        "the data yields no training window: check --data, --text-field and --max-docs"
                    ) from None
                self.epoch, self.index = self.epoch + 1, 0
                self._it = iter(self._make(self.epoch))
        raise AssertionError("unreachable")

    def position(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}


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
    from training.logging import parse_log_to
    from training.runlock import RunLock

    _validate(job)
    sinks = parse_log_to(log_to)
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

    rows = [r for r in read_log(run_dir / LOG_NAME) if r.get("step") == step]
    return rows[-1]["loss"] if rows else None


class _StepContext(Protocol):
    """What a step needs of its process context (training.distributed.DistContext or SingleProcess)."""

    @property
    def device(self) -> torch.device: ...

    @property
    def dp_size(self) -> int: ...

    @property
    def dp_rank(self) -> int: ...

    @property
    def grad_scale(self) -> float: ...

    def shard_inputs(self, kw: dict, targets: Any, kernel: str) -> Any: ...

    def all_reduce_sum(self, value: Any) -> Any: ...

    def set_grad_sync(self, model: Any, sync: bool) -> None: ...

    def finish_grads(self, model: Any) -> None: ...


@dataclass
class _Stepper:
    """One optimizer step over grad_accum micro-batches (the loss rule in the module docstring)."""

    job: TrainJob
    ctx: _StepContext
    pipeline: Pipeline
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    kernel: str
    autocast: torch.autocast

    def micro_batches(self, stream: WindowStream) -> list:
        # Every process reads the same global stream and keeps its own share: the order of
        # windows (and so the loss curve) does not depend on the number of processes.
        d, ctx = self.job.data, self.ctx
        micro = []
        for _ in range(d.grad_accum):
            group = [stream.next() for _ in range(d.batch_size * ctx.dp_size)]
            mine = group[ctx.dp_rank * d.batch_size : (ctx.dp_rank + 1) * d.batch_size]
            # On the device before the kernel plans its mask/boundaries, so they land there too.
            batch = self.pipeline.build_batch(mine, d.mode).to(ctx.device)
            try:
                kw = self.pipeline.forward_kwargs(batch, self.kernel)
            except ValueError as exc:  # e.g. the dense reference kernel above its size limit
                raise UserError(f"attention kernel {self.kernel!r}: {exc}") from None
            kw, targets = ctx.shard_inputs(kw, shifted_targets(batch.labels), self.kernel)
            micro.append((batch, kw, targets.to(ctx.device)))
        return micro

    def step(self, step: int, stream: WindowStream, grad_hook: Callable | None) -> dict:
        import torch

        d, ctx, model = self.job.data, self.ctx, self.model
        t0 = time.perf_counter()
        micro = self.micro_batches(stream)
        num_tokens = ctx.all_reduce_sum(sum(int((t != -100).sum()) for _, _, t in micro))
        denom = max(num_tokens, 1)
        # Gradient reducers average over processes; scale so the result is the global token mean.
        scale = ctx.grad_scale / denom
        loss_acc = torch.zeros((), dtype=torch.float64, device=ctx.device)
        for i, (batch, kw, targets) in enumerate(micro):
            ctx.set_grad_sync(model, i == len(micro) - 1)
            kw = {k: (v.to(ctx.device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
            with self.autocast:
                logits = model(**kw).logits
            part = loss_sum(self.pipeline.gather_logits(logits, batch, self.kernel), targets)
            (part * scale).backward()
            loss_acc += part.detach().double()
        ctx.finish_grads(model)
        if grad_hook is not None:
            grad_hook(step, model)
        loss = float(ctx.all_reduce_sum(loss_acc)) / denom
        if not math.isfinite(loss):  # before the update, so no state with NaN weights is ever saved
            raise RuntimeError(f"loss became {loss} at step {step}: lower --lr or use --dtype fp32")
        grad_norm = None
        if self.job.optimizer.max_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.job.optimizer.max_grad_norm)
            grad_norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        seen = d.window * d.batch_size * d.grad_accum * ctx.dp_size
        return {
            "step": step,
            "loss": loss,
            "loss_tokens": num_tokens,
            "tokens": seen,
            "tokens_per_s": seen / dt,
            "lr": lr,
            "grad_norm": grad_norm,
            "elapsed_s": dt,
            "epoch": stream.epoch,
        }


def _train(job: TrainJob, *, pipeline, ctx, progress, stop_after, grad_hook, sinks=("jsonl",)) -> dict:
    import torch

    from training import checkpointing as ck
    from training.logging import StepLog

    d, total = job.data, job.schedule.steps
    is_main = ctx.rank == 0
    run_dir = Path(job.out)
    tokenizer = load_tokenizer_for(job)
    if pipeline is None:  # before the model: bad data fails in seconds, not after loading 7B weights
        pipeline = default_pipeline(
            job, tokenizer, report=(lambda table: _report_mixture(run_dir, table)) if is_main else None
        )
    kernel = _kernel_for(job, ctx)
    _seed_all(d.seed)
    model, rope_theta = load_model(job, ctx.device)
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
    start_step, stream_pos, state_dir, spent = manager.resume(model, optimizer, scheduler)
    budget = None if job.schedule.max_minutes is None else 60.0 * job.schedule.max_minutes
    out_of_time = budget is not None and start_step > 0 and spent >= budget
    meta = ck.training_meta(
        mode=d.mode,
        window=d.window,
        rope_theta=rope_theta,
        domain_tags=d.domain_tags,
        interleave_chunks=d.interleave_chunks,
        kernel=kernel,
        seed=d.seed,
        data=pipeline.data_info,
        job=job.to_json(),
    )
    if start_step >= total or out_of_time:
        if is_main:
            why = f" (its --max-minutes {job.schedule.max_minutes:g} were spent: {spent:.0f}s)" if out_of_time else ""
            print(f"{run_dir}: already trained to step {start_step}{why}; nothing to do")
        if out_of_time and start_step < total:
            # It stops where its state is, and a stopped run has a checkpoint there: the state may come
            # from --save-state-every of an earlier, longer run that did not checkpoint this step.
            manager.end_at(start_step)
            missing = is_main and all(s != start_step for s, _ in ck.list_checkpoints(run_dir))
            if ctx.all_reduce_sum(int(missing)) > 0:  # rank 0 looks; every rank takes part in the write
                manager.write_checkpoint(start_step, model, tokenizer, meta)
            manager.finish()
        return {
            "steps": start_step,
            "losses": [],
            "checkpoints": manager.written,
            "resumed_from": start_step,
            "last_loss": _last_logged_loss(run_dir, start_step),
            "stopped_early": out_of_time and start_step < total,
        }
    if state_dir is not None and is_main:
        print(f"resumed from step {start_step} (state {state_dir})")

    stream = WindowStream(pipeline.windows, stream_pos["epoch"], stream_pos["index"])
    autocast = torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=job.model.dtype == "bf16")
    stepper = _Stepper(job, ctx, pipeline, model, optimizer, scheduler, kernel, autocast)
    log = StepLog(
        run_dir,
        total_steps=total,
        start_step=start_step,
        enabled=is_main,
        progress=progress,
        sinks=sinks,
        config=job.to_json(),
    )
    losses: list[float] = []
    step = start_step
    stopped_early = False
    started = _clock()
    model.train()
    try:
        for step in range(start_step + 1, total + 1):
            row = stepper.step(step, stream, grad_hook)
            log.write(row)
            losses.append(row["loss"])
            seconds = spent + _clock() - started
            if budget is not None and step < total and _time_is_up(ctx, seconds >= budget):
                manager.end_at(step)  # this step gets the checkpoint and the state a last step gets
                stopped_early = True
                # Spent on some rank's clock, maybe not on this one's: the state says spent, so the same
                # command again does nothing (rank 0's own seconds could be a little short of it).
                seconds = max(seconds, budget)
            manager.on_step(step, model, optimizer, scheduler, tokenizer, meta, stream.position(), seconds)
            if stopped_early:
                if is_main:
                    print(
                        f"stopped at step {step} of {total}: --max-minutes {job.schedule.max_minutes:g} reached "
                        f"after {seconds:.0f}s of training"
                    )
                break
            if stop_after is not None and step >= stop_after:
                break
        manager.finish()
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
