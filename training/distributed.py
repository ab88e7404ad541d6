"""Multi-process training: FSDP2 sharding and Ulysses sequence parallelism over torch.distributed.

    torchrun --nproc-per-node 8 -m harness train ... --sp 8      # one node, 8 GPUs, Ulysses over 8
    torchrun --nnodes 2 --nproc-per-node 8 ... -m harness train ... --sp 8
    accelerate launch --num_processes 8 -m harness train ...    # accelerate sets the same env vars

`init_from_env` reads the launcher's environment (RANK, WORLD_SIZE, LOCAL_RANK) and returns None
for a single process, so the loop has one code path. Ranks form a grid [dp, sp]: consecutive
ranks share one sequence (Ulysses group), groups split the windows (data parallel). Parameters
are sharded over all ranks with FSDP2 `fully_shard` (ZeRO-3, what the paper ran with DeepSpeed),
or replicated with a gradient all-reduce (`shard="none"`).

Ulysses (Jacobs et al. 2023): each rank holds L/P tokens of every layer's input. Around the
attention kernel, an all_to_all_single turns [B, H, L/P, D] into [B, H/P, L, D] (all tokens, a
slice of heads), the kernel runs on whole sequences exactly as on one process (document masks
need the whole window), and a second all_to_all_single turns the output back. It is installed as
a transformers attention function wrapping the kernel the model already uses: no patching.

Gradients: each rank's loss is its own token-CE sum over the global number of loss tokens; FSDP
averages gradients over ranks, so the loss is scaled by the world size to give the global sum.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.core.errors import UserError

if TYPE_CHECKING:
    import torch


def _a2a_function():
    import torch
    import torch.distributed as dist

    class AllToAll(torch.autograd.Function):
        """all_to_all_single over dim 0 (split in equal chunks); its own adjoint, so backward is one more."""

        @staticmethod
        def forward(ctx, x, group):
            ctx.group = group
            x = x.contiguous()
            out = torch.empty_like(x)
            dist.all_to_all_single(out, x, group=group)
            return out

        @staticmethod
        def backward(ctx, grad):
            grad = grad.contiguous()
            out = torch.empty_like(grad)
            dist.all_to_all_single(out, grad, group=ctx.group)
            return out, None

    return AllToAll


def seq_to_heads(x, group, P: int):
    """[B, H, L/P, D] on each rank -> [B, H/P, L, D]: all tokens, this rank's slice of heads."""
    B, H, Ls, D = x.shape
    assert H % P == 0, "heads must split evenly over the sequence-parallel ranks"
    chunks = x.reshape(B, P, H // P, Ls, D).permute(1, 0, 2, 3, 4)  # chunk p: head slice p, goes to rank p
    got = _a2a_function().apply(chunks, group)  # got[p]: rank p's tokens for my head slice
    return got.permute(1, 2, 0, 3, 4).reshape(B, H // P, P * Ls, D)


def heads_to_seq(x, group, P: int):
    """[B, L, H/P, D] (a kernel's output layout) -> [B, L/P, H, D]: this rank's tokens, all heads."""
    B, L, Hp, D = x.shape
    chunks = x.reshape(B, P, L // P, Hp, D).permute(1, 0, 2, 3, 4)  # chunk p: token slice p, goes to rank p
    got = _a2a_function().apply(chunks, group)  # got[p]: my tokens of head slice p
    return got.permute(1, 2, 0, 3, 4).reshape(B, L // P, P * Hp, D)


def ulysses_attention(inner, group, P: int):
    """A transformers attention function running `inner` on whole sequences of H/P heads."""

    def attention(module, query, key, value, attention_mask, **kwargs):
        from transformers.integrations.sdpa_attention import repeat_kv

        if key.shape[1] % P:  # too few KV heads to split: replicate them to the query heads first
            groups = query.shape[1] // key.shape[1]
            key, value = repeat_kv(key, groups), repeat_kv(value, groups)
        q, k, v = (seq_to_heads(t, group, P) for t in (query, key, value))
        out, _ = inner(module, q, k, v, attention_mask, **kwargs)
        return heads_to_seq(out, group, P), None

    return attention


def install_ulysses(model, group, P: int) -> str:
    """Wrap the model's current attention implementation with Ulysses; returns the new name."""
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    inner_name = model.config._attn_implementation
    if inner_name == "eager" or inner_name not in ALL_ATTENTION_FUNCTIONS:
        raise UserError(
            f"sequence parallelism needs a registered attention kernel, not {inner_name!r}: pass --kernel sdpa-doc, flex or varlen"
        )
    name = f"ulysses{P}_{inner_name}"
    AttentionInterface.register(name, ulysses_attention(ALL_ATTENTION_FUNCTIONS[inner_name], group, P))
    model.set_attn_implementation(name)
    return name


@dataclass
class DistContext:
    rank: int
    world: int
    device: torch.device
    sp_size: int = 1
    shard: str = "fsdp"
    sp_group: object = None
    _owns_group: bool = field(default=False, repr=False)

    @property
    def dp_size(self) -> int:
        return self.world // self.sp_size

    @property
    def dp_rank(self) -> int:
        return self.rank // self.sp_size

    @property
    def sp_rank(self) -> int:
        return self.rank % self.sp_size

    @property
    def grad_scale(self) -> float:
        # FSDP's reduce-scatter averages over ranks; the all-reduce path sums.
        return float(self.world) if self.shard == "fsdp" else 1.0

    # ---- model

    def wrap_model(self, model):
        import torch.distributed as dist

        if self.sp_size > 1:
            install_ulysses(model, self.sp_group, self.sp_size)
        if self.shard == "fsdp":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            mesh = init_device_mesh(self.device.type, (self.world,))
            # One unit per decoder layer (gathered just in time), then the rest (embeddings, head).
            for layer in model.model.layers:
                fully_shard(layer, mesh=mesh)
            fully_shard(model, mesh=mesh)
        else:
            for p in model.parameters():  # replicas must start equal; rank 0's copy wins
                dist.broadcast(p.data, src=0)
        return model

    def set_grad_sync(self, model, sync: bool) -> None:
        """Reduce gradients only after the last micro-batch of a step (FSDP2)."""
        if self.shard == "fsdp":
            model.set_requires_gradient_sync(sync)

    def finish_grads(self, model) -> None:
        import torch.distributed as dist

        if self.shard == "none":
            for p in model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad)

    # ---- inputs

    def shard_inputs(self, kw: dict, targets, kernel: str):
        """This rank's slice of the sequence for Ulysses; kernel kwargs (segment plans) stay whole."""
        if self.sp_size == 1:
            return kw, targets
        if kernel.startswith("varlen"):
            # Its anchor copies make the sequence longer than the window and uneven to split.
            raise UserError(
                "the anchor-copy varlen layout cannot be split for sequence parallelism yet: pass --kernel flex or sdpa-doc with --sp"
            )
        L = targets.shape[1]
        n = L // self.sp_size
        sl = slice(self.sp_rank * n, (self.sp_rank + 1) * n)
        out = dict(kw)
        for key in ("input_ids", "position_ids"):
            out[key] = kw[key][:, sl]
        return out, targets[:, sl]

    # ---- collectives

    def all_reduce_sum(self, value):
        import torch
        import torch.distributed as dist

        if isinstance(value, int):
            t = torch.tensor([value], dtype=torch.long, device=self.device)
            dist.all_reduce(t)
            return int(t.item())
        t = value.clone()
        dist.all_reduce(t)
        return t

    def gather_objects(self, obj) -> list:
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier()

    # ---- state

    def full_state_dict(self, model) -> dict:
        """Unsharded weights on CPU (a collective: every rank calls it)."""
        if self.shard != "fsdp":
            return {k: v.detach().cpu() for k, v in model.state_dict().items()}
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def full_train_state(self, model, optimizer) -> dict:
        if self.shard != "fsdp":
            return {"model": self.full_state_dict(model), "optimizer": optimizer.state_dict()}
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return {
            "model": self.full_state_dict(model),
            "optimizer": get_optimizer_state_dict(model, optimizer, options=opts),
        }

    def load_state(self, model, optimizer, state: dict) -> None:
        if self.shard != "fsdp":
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        opts = StateDictOptions(full_state_dict=True)
        set_model_state_dict(model, state["model"], options=opts)
        set_optimizer_state_dict(model, optimizer, state["optimizer"], options=opts)

    def close(self) -> None:
        import torch.distributed as dist

        if self._owns_group and dist.is_initialized():
            dist.destroy_process_group()


class SingleProcess:
    """The DistContext interface for one process: no sharding, collectives are identities.

    The training loop talks to this or a DistContext the same way, so it has one code path."""

    rank, world, sp_size, dp_size, dp_rank, sp_rank = 0, 1, 1, 1, 0, 0
    grad_scale = 1.0

    def __init__(self, device):
        self.device = device

    def wrap_model(self, model):
        return model

    def set_grad_sync(self, model, sync: bool) -> None:
        pass

    def finish_grads(self, model) -> None:
        pass

    def shard_inputs(self, kw: dict, targets, kernel: str):
        return kw, targets

    def all_reduce_sum(self, value):
        return value

    def gather_objects(self, obj) -> list:
        return [obj]

    def barrier(self) -> None:
        pass

    def full_state_dict(self, model) -> dict:
        return model.state_dict()

    def full_train_state(self, model, optimizer) -> dict:
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict()}

    def load_state(self, model, optimizer, state: dict) -> None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])

    def close(self) -> None:
        pass


def setup(rank: int, world: int, *, sp_size: int = 1, shard: str = "fsdp", backend: str | None = None) -> DistContext:
    """Join (or reuse) the default process group and build the [dp, sp] grid."""
    import torch
    import torch.distributed as dist

    if world % sp_size:
        raise UserError(f"--sp {sp_size} does not divide the {world} processes: pass a divisor of {world}")
    cuda = torch.cuda.is_available()
    device = (
        torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', rank)) % max(torch.cuda.device_count(), 1)}")
        if cuda
        else torch.device("cpu")
    )
    if cuda:
        torch.cuda.set_device(device)
    owns = not dist.is_initialized()
    if owns:
        dist.init_process_group(backend or ("nccl" if cuda else "gloo"), rank=rank, world_size=world)
    sp_group = None
    if sp_size > 1:
        for start in range(0, world, sp_size):  # every rank must create every group, in the same order
            g = dist.new_group(list(range(start, start + sp_size)))
            if start <= rank < start + sp_size:
                sp_group = g
    return DistContext(
        rank=rank, world=world, device=device, sp_size=sp_size, shard=shard, sp_group=sp_group, _owns_group=owns
    )


def init_from_env(*, sp_size: int = 1, shard: str = "fsdp") -> DistContext | None:
    """A DistContext under torchrun/accelerate (WORLD_SIZE > 1), else None (plain single process)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        if sp_size > 1:
            raise UserError(
                f"--sp {sp_size} needs {sp_size} processes: launch with torchrun --nproc-per-node {sp_size}"
            )
        return None
    return setup(int(os.environ["RANK"]), world, sp_size=sp_size, shard=shard)
