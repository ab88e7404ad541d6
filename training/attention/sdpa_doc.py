"""Per-document SDPA over the varlen layout: the CPU training kernel (forward and backward).

For each row and each segment (training/attention/segments.py: one per document, with the anchor
copy at its start in anchor mode) it gathers q/k/v at the segment's window indices and runs causal
scaled_dot_product_attention, then scatters the outputs back by one inverse permutation. Only the
pairs each mode keeps are computed, so the cost follows the document lengths, not L^2, and no LxL
mask is ever built. Gather/cat/index are differentiable, so autograd gives the backward.
Registered with transformers as "harness_sdpa_doc"; the plan travels as the `harness_segments`
model kwarg (transformers builds no mask for a name it has no mask function for).
"""

from __future__ import annotations

NAME = "harness_sdpa_doc"


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, harness_segments=None, **kwargs):
    """transformers attention function: q [B,H,L,D], k/v [B,Hkv,L,D] -> ([B,L,H,D], None)."""
    import torch
    import torch.nn.functional as F

    if harness_segments is None:
        raise ValueError("the sdpa-doc kernel needs its segment plan: call the model with training.attention.forward_kwargs(batch, 'sdpa-doc')")
    gqa = query.shape[1] != key.shape[1]
    p = dropout if module.training else 0.0
    rows = []
    for b, (segs, drops, inv) in enumerate(zip(harness_segments.rows, harness_segments.drops, harness_segments.inverse)):
        q_b, k_b, v_b = query[b], key[b], value[b]
        outs = []
        for idx, drop in zip(segs, drops):
            o = F.scaled_dot_product_attention(
                q_b[:, idx][None], k_b[:, idx][None], v_b[:, idx][None], dropout_p=p, is_causal=True, scale=scaling,
                enable_gqa=gqa,
            )[0]
            outs.append(o[:, drop:] if drop else o)
        rows.append(torch.cat(outs, dim=1)[:, inv])
    return torch.stack(rows).transpose(1, 2).contiguous(), None


def forward_kwargs(batch) -> dict:
    from training.attention.segments import plan

    return {"input_ids": batch.input_ids, "position_ids": batch.position_ids,
            "harness_segments": plan(batch.doc_ids, batch.mode, device=batch.input_ids.device)}
