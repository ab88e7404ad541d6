"""Varlen FlashAttention on the per-document anchor-copy layout (GPU).

The batch is expanded into one packed sequence of T tokens (training/attention/segments.py):
each document becomes its own sequence, in anchor mode with a copy of the anchor (same token,
RoPE position 0) at its start; positions elsewhere are the window's. Plain causal varlen attention
over those sequences (cu_seqlens at segment starts) is then exactly the shared-anchor mask, at the
cost of one extra token per document. The whole model runs on the expanded sequence;
`gather_logits` maps its outputs back to the [B, L] window.

Backends: torch.nn.attention.varlen.varlen_attn (CUDA only), or flash_attn_varlen_func when the
flash-attn package is installed. On CPU the kernel raises ValueError. `emulated_attention` (kernel
"varlen-cpu-emulation", for tests) runs per-sequence causal SDPA on the same expanded layout, so
the layout itself is checked on CPU.
Registered with transformers as "harness_varlen"; the boundaries travel as the usual
cu_seq_lens_q/k and max_length_q/k kwargs.
"""

from __future__ import annotations

import itertools
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
    if query.device.type != "cuda":
        raise ValueError(cpu_message())
    dtype = query.dtype
    # Flash kernels take fp16/bf16 only; fp32 callers (no autocast) get bf16 attention, cast back.
    low = dtype if dtype in (torch.float16, torch.bfloat16) else torch.bfloat16
    q, k, v = (t[0].transpose(0, 1).to(low) for t in (query, key, value))  # [T, H, D]
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        from torch.nn.attention.varlen import varlen_attn

        out = varlen_attn(
            q,
            k,
            v,
            cu_seq_lens_q,
            cu_seq_lens_k,
            max_length_q,
            max_length_k,
            scale=scaling,
            window_size=(-1, 0),
            enable_gqa=k.shape[1] != q.shape[1],
        )  # (-1, 0) = causal
    else:
        out = flash_attn_varlen_func(
            q,
            k,
            v,
            cu_seq_lens_q,
            cu_seq_lens_k,
            max_length_q,
            max_length_k,
            dropout_p=dropout if module.training else 0.0,
            softmax_scale=scaling,
            causal=True,
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
