"""Varlen FlashAttention on the per-document anchor-copy layout (GPU).

The batch is expanded into one packed sequence of T tokens (training/attention/segments.py):
each document becomes its own sequence, in anchor mode with a copy of the anchor (same token,
RoPE position 0) at its start; positions elsewhere are the window's. Plain causal varlen attention
over those sequences (cu_seqlens at segment starts) is then exactly the shared-anchor mask, at the
cost of one extra token per document. The whole model runs on the expanded sequence;
`gather_logits` maps its outputs back to the [B, L] window.

Backends: torch.nn.attention.varlen.varlen_attn (CUDA only), or flash_attn_varlen_func when the
flash-attn package is installed. Their signatures differ across releases (causal flag, scale and GQA
keywords): `call_varlen` reads the installed function's signature (`call_plan`) and calls it
accordingly, repeating KV heads only when the kernel has no GQA support of its own. On CPU the kernel raises ValueError. `emulated_attention` (kernel
"varlen-cpu-emulation", for tests) runs per-sequence causal SDPA on the same expanded layout, so
the layout itself is checked on CPU.
Registered with transformers as "harness_varlen"; the boundaries travel as the usual
cu_seq_lens_q/k and max_length_q/k kwargs.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

NAME = "harness_varlen"
EMULATED_NAME = "harness_varlen_cpu_emulation"


@dataclass
class Expanded:
    input_ids: torch.Tensor  # [1, T]
    position_ids: torch.Tensor  # [1, T]
    cu_seqlens: torch.Tensor  # [num_seqs + 1], int32
    max_seqlen: int
    gather: torch.Tensor  # [B * L]: index in T of each window token
    source: torch.Tensor  # [T]: flat window index (b * L + j) each expanded token copies


def expand(batch) -> Expanded:
    import torch

    from training.attention.segments import row_segments

    B, L = batch.input_ids.shape
    src, lens, gather = [], [], torch.empty(B * L, dtype=torch.long)
    offset = 0
    for b, row in enumerate(batch.doc_ids.tolist()):
        for seg in row_segments(row, batch.mode):
            idx = torch.tensor(seg.indices)
            src.append(idx + b * L)
            kept = idx if seg.keep_first else idx[1:]
            gather[kept + b * L] = torch.arange(offset, offset + len(idx))[(0 if seg.keep_first else 1) :]
            lens.append(len(idx))
            offset += len(idx)
    src_t = torch.cat(src).to(batch.input_ids.device)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=batch.input_ids.device)
    return Expanded(
        batch.input_ids.reshape(-1)[src_t][None],
        batch.position_ids.reshape(-1)[src_t][None],
        cu,
        max(lens),
        gather.to(batch.input_ids.device),
        src_t,
    )


def kernel_function() -> tuple[Callable, str]:
    """(varlen function, backend name): flash-attn's flash_attn_varlen_func when installed, else torch's."""
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        from torch.nn.attention.varlen import varlen_attn

        return varlen_attn, "torch.nn.attention.varlen.varlen_attn"
    return flash_attn_varlen_func, "flash_attn.flash_attn_varlen_func"


def backend_name() -> str:
    """Which varlen function this machine would use (for logs); 'unavailable' when neither imports."""
    try:
        return kernel_function()[1]
    except ImportError:
        return "unavailable"


@dataclass(frozen=True)
class CallPlan:
    """How to call one varlen function, read from its signature (names differ across releases).

    torch 2.9/2.10: varlen_attn(q, k, v, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, return_aux=None)
    torch 2.11:     ... *, return_aux=None, scale=None, window_size=(-1, -1)       (causal = window (-1, 0))
    torch 2.13:     ... *, ..., window_size=(-1, -1), enable_gqa=False, ...
    flash-attn 2:   flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                    dropout_p=0.0, softmax_scale=None, causal=False, ...)          (GQA built in)
    """

    causal: dict  # the keyword argument(s) that make the call causal
    scale_name: str | None  # keyword for the softmax scale; None: pre-scale q instead
    gqa_name: str | None  # keyword that enables grouped KV heads; None: see native_gqa
    native_gqa: bool  # the kernel takes fewer KV heads as they are (flash-attn)
    dropout_name: str | None


@functools.lru_cache(maxsize=16)
def call_plan(fn: Callable, backend: str = "") -> CallPlan:
    """Read `fn`'s signature; raise RuntimeError when it has no known way to ask for causal attention."""
    params = inspect.signature(fn).parameters
    # An explicit causal flag first (flash-attn has both it and a sliding window_size).
    if "causal" in params:
        causal: dict = {"causal": True}
    elif "is_causal" in params:
        causal = {"is_causal": True}
    elif "window_size" in params:
        causal = {"window_size": (-1, 0)}  # no limit to the left, none to the right = causal
    else:
        raise RuntimeError(
            f"{backend or fn!r} takes none of window_size/is_causal/causal (parameters: {', '.join(params)}): "
            "this varlen kernel's signature is unknown to training/attention/varlen.py"
        )
    scale_name = next((n for n in ("scale", "softmax_scale") if n in params), None)
    gqa_name = "enable_gqa" if "enable_gqa" in params else None
    native = gqa_name is None and backend.startswith("flash_attn")
    dropout_name = "dropout_p" if "dropout_p" in params else None
    return CallPlan(causal, scale_name, gqa_name, native, dropout_name)


def call_varlen(
    fn: Callable,
    backend: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_q: torch.Tensor,
    cu_k: torch.Tensor,
    max_q: int,
    max_k: int,
    scale: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Causal varlen attention on [T, H, D] q and [T, Hkv, D] k/v through `fn`, whatever its signature."""
    plan = call_plan(fn, backend)
    kwargs: dict = dict(plan.causal)
    if k.shape[1] != q.shape[1]:
        if plan.gqa_name:
            kwargs[plan.gqa_name] = True
        elif not plan.native_gqa:
            # Query head h reads KV head h // groups (transformers' repeat_kv order).
            groups = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    if scale is not None:
        if plan.scale_name:
            kwargs[plan.scale_name] = scale
        else:
            # No scale argument: the kernel uses 1/sqrt(D); pre-scaling q gives scale overall.
            q = q * (scale * math.sqrt(q.shape[-1]))
    if dropout and plan.dropout_name:
        kwargs[plan.dropout_name] = dropout
    return fn(q, k, v, cu_q, cu_k, max_q, max_k, **kwargs)


def _require_cuda(query: torch.Tensor) -> None:
    if query.device.type != "cuda":
        raise ValueError(cpu_message())


def _check_kwargs(cu_seq_lens_q):
    if cu_seq_lens_q is None:
        raise ValueError(
            "the varlen kernel needs sequence boundaries: call the model with training.attention.forward_kwargs(batch, 'varlen')"
        )


def attention(
    module,
    query,
    key,
    value,
    attention_mask,
    scaling=None,
    dropout=0.0,
    cu_seq_lens_q=None,
    cu_seq_lens_k=None,
    max_length_q=None,
    max_length_k=None,
    **kwargs,
):
    """transformers attention function on [1,H,T,D] -> ([1,T,H,D], None)."""
    import torch

    _check_kwargs(cu_seq_lens_q)
    _require_cuda(query)
    dtype = query.dtype
    # Flash kernels take fp16/bf16 only; fp32 callers (no autocast) get bf16 attention, cast back.
    low = dtype if dtype in (torch.float16, torch.bfloat16) else torch.bfloat16
    q, k, v = (t[0].transpose(0, 1).to(low) for t in (query, key, value))  # [T, H, D]
    fn, backend = kernel_function()
    out = call_varlen(
        fn,
        backend,
        q,
        k,
        v,
        cu_seq_lens_q,
        cu_seq_lens_k,
        max_length_q,
        max_length_k,
        scale=scaling,
        dropout=dropout if module.training else 0.0,
    )
    return out.to(dtype)[None], None


def emulated_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, cu_seq_lens_q=None, **kwargs
):
    """CPU stand-in for the varlen kernel: causal SDPA per sequence of the expanded layout."""
    import torch
    import torch.nn.functional as F

    _check_kwargs(cu_seq_lens_q)
    bounds = cu_seq_lens_q.tolist()
    outs = [
        F.scaled_dot_product_attention(
            query[:, :, s:e],
            key[:, :, s:e],
            value[:, :, s:e],
            is_causal=True,
            scale=scaling,
            enable_gqa=query.shape[1] != key.shape[1],
        )
        for s, e in itertools.pairwise(bounds)
    ]
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), None


def cpu_message() -> str:
    return (
        "the varlen kernel needs a CUDA GPU (torch.nn.attention.varlen.varlen_attn and flash-attn are CUDA-only): "
        "on CPU use --kernel sdpa-doc for training or flex for inference"
    )


def forward_kwargs(batch) -> dict:
    ex = expand(batch)
    return {
        "input_ids": ex.input_ids,
        "position_ids": ex.position_ids,
        "cu_seq_lens_q": ex.cu_seqlens,
        "cu_seq_lens_k": ex.cu_seqlens,
        "max_length_q": ex.max_seqlen,
        "max_length_k": ex.max_seqlen,
    }


def gather_logits(logits, batch):
    """[1, T, V] outputs on the expanded layout -> [B, L, V] on the window."""
    B, L = batch.input_ids.shape
    return logits[0, expand(batch).gather].reshape(B, L, *logits.shape[2:])
