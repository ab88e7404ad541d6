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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from harness.errors import UserError
from training.config import TrainJob

# ---------------------------------------------------------------- pieces the loop plugs together


@dataclass
class Pipeline:
    """How windows become model inputs; `default_pipeline` wires in training.packing/modes/attention."""

    windows: Callable[[int], Iterator]
    """epoch -> iterator of PackedWindow, the same every call for the same epoch."""
    build_batch: Callable[[list, str], object]
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
        if device.type != "cuda":
            return "sdpa-doc"
        return "flex" if sp_size > 1 else "varlen"
    return kernel


def _check_model_path(path: str) -> bool:
    """Whether `path` is local; a path-like name that is not a directory is a user error."""
    local = Path(path).is_dir()
    if not local and (path.startswith((".", "/", "~")) or path.count("/") > 1):
        raise UserError(
            f"model not found: {path} is not a directory; pass --model with a save_pretrained directory or a hub name"
        )
    return local


def load_tokenizer_for(job: TrainJob):
    from tasks.tokenization import load_tokenizer

    _check_model_path(job.model.path)
    return load_tokenizer(job.model.path)


def load_model(job: TrainJob, device):
    """(model, rope_theta) with window and rope theta written into the config before init."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    path = job.model.path
    local = _check_model_path(path)
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=local)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"cannot load model config from {path!r} ({first}); pass --model with a save_pretrained directory"
        ) from None
    config.max_position_embeddings = job.data.window
    rope = dict(getattr(config, "rope_parameters", None) or {})
    if job.model.rope_theta is not None:
        rope["rope_theta"] = float(job.model.rope_theta)
        config.rope_parameters = rope
    rope_theta = rope.get("rope_theta", getattr(config, "rope_theta", None))
    config.use_cache = False
    # fp32 master weights: bf16 runs use autocast, so the optimizer never rounds updates away.
    model = AutoModelForCausalLM.from_pretrained(path, config=config, local_files_only=local, dtype=torch.float32)
    model.to(device)
    if job.model.grad_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model, rope_theta


def parse_mixture(spec: str, seed: int):
    """--mixture "tokens=N[,source=FIELD][,long_threshold=4096][,long_weight=5][,SOURCE=SHARE,...]".

    Returns (MixtureConfig, source field or None). A document's source is its FIELD value, else its
    --domain-tags value, else its data file's stem (training.data); without SOURCE=SHARE items each
    source keeps its share of tokens in the original data.
    """
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
                opts[key.strip()] = float(value) if key.strip() == "long_weight" else int(float(value))
            except ValueError:
                raise UserError(f"bad --mixture item {part!r}: {key.strip()} takes a number") from None
        else:
            shares.append(part)
    if not opts["tokens"] or opts["tokens"] < 1:
        raise UserError(
            f"--mixture {spec!r} needs tokens=N (the mixture's total tokens), e.g. tokens=2000000,C4=0.2,CommonCrawl=0.8"
        )
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


def _rng_state() -> dict:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _report_mixture(run_dir: Path, table: str) -> None:
    """Print the mixture table (paper's Appendix C layout) and keep it beside the checkpoints."""
    print(table)
    (run_dir / "mixture.txt").write_text(table + "\n")


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
) -> dict:
    """Run (or resume) the job; returns {"steps", "losses", "checkpoints", "resumed_from"}.

    `dist` is a training.distributed.DistContext (None: one process). `stop_after` ends the run
    after that step as if killed, and `grad_hook(step, model)` sees the reduced gradients before
    clipping (tests use both: resume, and equality of gradients across process layouts).
    """
    from transformers.utils import logging as hf_logging

    # Our bar is the run's progress; transformers' weight-loading/saving bars would break it up.
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return _train(job, pipeline=pipeline, dist=dist, progress=progress, stop_after=stop_after, grad_hook=grad_hook)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _train(job: TrainJob, *, pipeline, dist, progress, stop_after, grad_hook) -> dict:
    import torch

    from training import checkpointing as ck
    from training.logging import StepLog

    d, sched_cfg = job.data, job.schedule
    if sched_cfg.steps < 1:
        raise UserError(f"--steps {sched_cfg.steps} must be at least 1")
    if d.batch_size < 1 or d.grad_accum < 1:
        raise UserError("--batch-size and --grad-accum must be at least 1")
    if d.window < 16:
        raise UserError(f"--window {d.window} is too small to train on: pass at least 16 tokens")
    if job.model.dtype not in ("bf16", "fp32"):
        raise UserError(f"--dtype {job.model.dtype} is not supported: pass bf16 or fp32")

    rank = dist.rank if dist else 0
    world = dist.world if dist else 1
    is_main = rank == 0
    device = dist.device if dist else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    run_dir = Path(job.out)
    tokenizer = load_tokenizer_for(job)
    if pipeline is None:  # before the model: bad data fails in seconds, not after loading 7B weights
        pipeline = default_pipeline(
            job, tokenizer, report=(lambda table: _report_mixture(run_dir, table)) if is_main else None
        )
    if is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
    kernel = _resolve_kernel(job.model.kernel, device, dist.sp_size if dist else 1)
    if kernel in ("flex", "varlen") and device.type != "cuda":  # known before loading any weights
        why = "FlexAttention has no backward on CPU" if kernel == "flex" else "varlen attention is CUDA-only"
        raise UserError(f"the {kernel} kernel cannot train on CPU ({why}): pass --kernel sdpa-doc (or auto)")
    _seed_all(d.seed)
    model, rope_theta = load_model(job, device)
    try:
        pipeline.prepare_model(model, kernel)
    except ValueError as exc:  # a kernel the hardware or window cannot run (e.g. varlen on CPU)
        raise UserError(f"attention kernel {kernel!r}: {exc}") from None
    if dist:
        if d.window % dist.sp_size:
            raise UserError(
                f"--window {d.window} does not split over {dist.sp_size} sequence-parallel ranks: pass a multiple of {dist.sp_size}"
            )
        model = dist.wrap_model(model)
    optimizer = make_optimizer(model, job)
    scheduler = make_scheduler(optimizer, job)

    # ---- resume
    start_step, stream_pos = 0, {"epoch": 0, "index": 0}
    state = ck.load_latest_state(run_dir)
    if state is not None:
        if state["signature"] != _resume_signature(job, world):
            diff = [k for k in state["signature"] if state["signature"][k] != _resume_signature(job, world).get(k)]
            raise UserError(
                f"{run_dir} holds a run with other settings ({', '.join(diff)}): pass a new --out or the original flags"
            )
        if dist:
            dist.load_state(model, optimizer, state)
        else:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        _set_rng_state(state["rng"][rank] if isinstance(state["rng"], list) else state["rng"])
        start_step, stream_pos = state["step"], state["data"]
    if start_step >= sched_cfg.steps:
        if is_main:
            print(f"{run_dir}: already trained to step {start_step}; nothing to do")
        return {"steps": start_step, "losses": [], "checkpoints": [], "resumed_from": start_step}

    stream = WindowStream(pipeline.windows, stream_pos["epoch"], stream_pos["index"])
    ckpt_steps = ck.checkpoint_steps(sched_cfg.steps, job.checkpoint.save_every, job.checkpoint.keep_last)
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
    dp_size, dp_rank = (dist.dp_size, dist.dp_rank) if dist else (1, 0)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=job.model.dtype == "bf16")
    log = StepLog(run_dir, total_steps=sched_cfg.steps, start_step=start_step, enabled=is_main, progress=progress)
    losses, written = [], []
    model.train()
    try:
        for step in range(start_step + 1, sched_cfg.steps + 1):
            t0 = time.perf_counter()
            # Every process reads the same global stream and keeps its own share: the order of
            # windows (and so the loss curve) does not depend on the number of processes.
            micro = []
            for _ in range(d.grad_accum):
                group = [stream.next() for _ in range(d.batch_size * dp_size)]
                mine = group[dp_rank * d.batch_size : (dp_rank + 1) * d.batch_size]
                # On the device before the kernel plans its mask/boundaries, so they land there too.
                batch = pipeline.build_batch(mine, d.mode).to(device)
                try:
                    kw = pipeline.forward_kwargs(batch, kernel)
                except ValueError as exc:  # e.g. the dense reference kernel above its size limit
                    raise UserError(f"attention kernel {kernel!r}: {exc}") from None
                targets = shifted_targets(batch.labels)
                if dist:
                    kw, targets = dist.shard_inputs(kw, targets, kernel)
                micro.append((batch, kw, targets.to(device)))
            local_tokens = sum(int((t != -100).sum()) for _, _, t in micro)
            num_tokens = dist.all_reduce_sum(local_tokens) if dist else local_tokens
            denom = max(num_tokens, 1)
            # Gradient reducers average over processes; scale so the result is the global token mean.
            scale = (dist.grad_scale if dist else 1.0) / denom
            loss_acc = torch.zeros((), dtype=torch.float64, device=device)
            for i, (batch, kw, targets) in enumerate(micro):
                if dist:
                    dist.set_grad_sync(model, i == len(micro) - 1)
                kw = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
                with autocast:
                    logits = model(**kw).logits
                part = loss_sum(pipeline.gather_logits(logits, batch, kernel), targets)
                (part * scale).backward()
                loss_acc += part.detach().double()
            if dist:
                dist.finish_grads(model)
            if grad_hook is not None:
                grad_hook(step, model)
            loss_total = dist.all_reduce_sum(loss_acc) if dist else loss_acc
            loss = float(loss_total) / denom
            if not math.isfinite(loss):  # before the update, so no state with NaN weights is ever saved
                raise RuntimeError(f"loss became {loss} at step {step}: lower --lr or use --dtype fp32")
            grad_norm = None
            if job.optimizer.max_grad_norm is not None:
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), job.optimizer.max_grad_norm)
                grad_norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            dt = time.perf_counter() - t0
            seen = d.window * d.batch_size * d.grad_accum * dp_size
            row = {
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
            log.write(row)
            losses.append(loss)

            if step in ckpt_steps:
                sd = dist.full_state_dict(model) if dist else None
                if is_main:
                    written.append(
                        str(
                            ck.save_checkpoint(
                                run_dir,
                                step,
                                model,
                                tokenizer,
                                meta,
                                state_dict=sd,
                                dtype="bfloat16" if job.model.dtype == "bf16" else None,
                            )
                        )
                    )
            every = job.checkpoint.save_state_every
            if (every and step % every == 0) or step == sched_cfg.steps:
                payload = {
                    "signature": _resume_signature(job, world),
                    "scheduler": scheduler.state_dict(),
                    "data": stream.position(),
                }
                rngs = dist.gather_objects(_rng_state()) if dist else _rng_state()
                if dist:
                    payload.update(dist.full_train_state(model, optimizer))
                else:
                    payload.update(model=model.state_dict(), optimizer=optimizer.state_dict())
                if is_main:
                    ck.save_state(run_dir, step, {**payload, "rng": rngs})
                if dist:
                    dist.barrier()
            if stop_after is not None and step >= stop_after:
                break
        if is_main:
            ck.prune_checkpoints(run_dir, [s for s, _ in ck.list_checkpoints(run_dir) if s in ckpt_steps])
    finally:
        log.close()
    return {"steps": step, "losses": losses, "checkpoints": written, "resumed_from": start_step}
