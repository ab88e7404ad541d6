"""One optimizer step of the training loop, and the loss it takes.

    from training.step import Stepper, loss_sum, shifted_targets
    row = Stepper(job, ctx, pipeline, model, optimizer, scheduler, kernel, autocast).step(step, stream, None)

Loss: for every micro-batch, the sum of token cross-entropies over targets whose label is not
-100 (labels are HF-aligned: logits at t predict labels at t+1), divided by the number of loss
tokens over ALL micro-batches of the step and all data-parallel processes. Gradient accumulation
therefore averages over accumulated tokens, not over micro-batches, and N processes give the
gradient of one process that saw all their windows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from harness.core.errors import UserError
from training.config import TrainJob

if TYPE_CHECKING:
    import torch

    from training.windows import Pipeline, WindowStream


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


class StepContext(Protocol):
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
class Stepper:
    """One optimizer step over grad_accum micro-batches (the loss rule in the module docstring)."""

    job: TrainJob
    ctx: StepContext
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
