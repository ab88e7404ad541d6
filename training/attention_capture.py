"""Capturing each layer's post-RoPE q/k from a Hugging Face model, without monkey patching.

    with capture_attention(model, "eager", lambda layer, q, k: seen.append((layer, q, k))):
        model.model(input_ids=ids, position_ids=positions, use_cache=False)

`capture_attention(model, kernel, on_attention)` registers an attention function through
transformers' `AttentionInterface` and switches the model to it (undone when the context exits).
The function hands the rotated (post-RoPE) q [B, H, L, D] and k [B, Hkv, L, D] of each layer to
`on_attention(layer, q, k)`, then computes the layer's output with the chosen kernel so the forward
pass continues as the model would run it: "eager" (matmul, float32 softmax, like transformers'
eager path; float64 softmax for a float64 model), "sdpa" (torch scaled_dot_product_attention) or
"varlen" (torch's FlashAttention varlen kernel, CUDA only). Inputs are one unpadded sequence; the
causal mask is applied by the kernel. Callbacks run inside the forward pass; they see tensors on
the model's device in its dtype.

The RoPE deviation (training.rope_deviation: the in-loop probe of training.probes) and the RoPE
diagnostic (harness.diagnose) both capture through this module.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from types import SimpleNamespace

from harness.core.errors import UserError

KERNELS = ("eager", "sdpa", "varlen")
_names = itertools.count()


def attention_layers(model) -> list:
    """The attention modules in layer order (those with q_proj, k_proj and a layer_idx)."""
    found = [m for m in model.modules() if hasattr(m, "q_proj") and hasattr(m, "k_proj") and hasattr(m, "layer_idx")]
    if not found:
        raise UserError(
            f"{type(model).__name__} has no Llama-style attention layers (q_proj/k_proj): "
            "the RoPE diagnostic and the RoPE probe support Llama, Mistral, Qwen and similar models"
        )
    return sorted(found, key=lambda m: m.layer_idx)


def _repeat_kv(x, groups: int):
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


# Query rows per eager block: a block's float32 weights [H, rows, L] stay under this many bytes. The
# whole [H, L, L] matrix is 2.4 GB per layer for SmolLM2 at 8K (allocating it was most of an 8K pass's
# time on CPU: 5.5 of 18.5 minutes were system time) and 137 GB for a 32-head model at 32K, past any
# GPU; a row's softmax needs only its own row.
EAGER_BLOCK_BYTES = 1 << 28


def _eager(query, key, value, scaling):
    import torch

    groups = query.shape[1] // key.shape[1]
    key, value = _repeat_kv(key, groups), _repeat_kv(value, groups)
    heads, length = query.shape[1], query.shape[2]
    rows = max(1, EAGER_BLOCK_BYTES // (4 * heads * length))
    # float32 softmax like transformers' eager, except that a float64 model keeps float64 (its
    # eager path would round probabilities to float32, and "float64 everywhere" would not hold).
    soft_dtype = torch.promote_types(query.dtype, torch.float32)
    keys_t = key.transpose(2, 3)
    cols = torch.arange(length, device=query.device)
    out = []
    for r0 in range(0, length, rows):
        r1 = min(length, r0 + rows)
        weights = torch.matmul(query[:, :, r0:r1], keys_t) * scaling
        # An additive mask, as transformers' eager path uses (a boolean mask would be added as 0/1).
        future = cols[None, :] > torch.arange(r0, r1, device=query.device)[:, None]
        weights = weights.masked_fill(future, torch.finfo(weights.dtype).min)
        weights = torch.softmax(weights, dim=-1, dtype=soft_dtype).to(query.dtype)
        out.append(torch.matmul(weights, value))
    return torch.cat(out, dim=2).transpose(1, 2).contiguous(), None


def _sdpa(query, key, value, scaling):
    import torch

    groups = query.shape[1] // key.shape[1]
    out = torch.nn.functional.scaled_dot_product_attention(
        query, _repeat_kv(key, groups), _repeat_kv(value, groups), is_causal=True, scale=scaling
    )
    return out.transpose(1, 2).contiguous(), None


def _varlen(query, key, value, scaling):
    import torch

    batch, _, length, _ = query.shape
    assert batch == 1, "the capture runs one sequence at a time"
    cu = torch.tensor([0, length], dtype=torch.int32, device=query.device)
    # The training module's kernel (flash-attn when installed, else torch's varlen_attn).
    from training.attention.varlen import attention as training_varlen

    return training_varlen(
        SimpleNamespace(training=False),
        query,
        key,
        value,
        None,
        scaling=scaling,
        cu_seq_lens_q=cu,
        cu_seq_lens_k=cu,
        max_length_q=length,
        max_length_k=length,
    )


_KERNEL_FNS = {"eager": _eager, "sdpa": _sdpa, "varlen": _varlen}


@contextmanager
def capture_attention(model, kernel: str, on_attention):
    """Run `model` with `kernel` and call on_attention(layer_idx, q, k) with post-RoPE q/k."""
    from transformers import AttentionInterface

    compute = _KERNEL_FNS[kernel]

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        # No mask function is registered for this name, so transformers builds none: causal
        # masking is the kernel's job, which is right for one unpadded sequence.
        assert attention_mask is None and query.shape[0] == 1, "the capture feeds one unpadded sequence"
        on_attention(module.layer_idx, query, key)
        return compute(query, key, value, module.scaling if scaling is None else scaling)

    name = f"harness_capture_{next(_names)}"
    AttentionInterface.register(name, attention)
    previous = model.config._attn_implementation
    model.set_attn_implementation(name)
    if model.config._attn_implementation != name:
        raise UserError(
            f"{type(model).__name__} does not dispatch attention through AttentionInterface; its q/k cannot be captured"
        )
    try:
        yield
    finally:
        model.set_attn_implementation(previous)
