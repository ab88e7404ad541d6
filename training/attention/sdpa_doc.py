"""Per-document SDPA over the varlen layout: the CPU training kernel (forward and backward).

For each row it gathers q/k/v once at the concatenated window indices of all its segments
(training/attention/segments.py: one per document, with the anchor copy at its start in anchor mode),
splits that into one view per segment and runs causal
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
        raise ValueError(
            "the sdpa-doc kernel needs its segment plan: call the model with training.attention.forward_kwargs(batch, 'sdpa-doc')"
        )
    gqa = query.shape[1] != key.shape[1]
    p = dropout if module.training else 0.0
    rows = []
    for b, (segs, drops, inv) in enumerate(
        zip(harness_segments.rows, harness_segments.drops, harness_segments.inverse)
    ):
        # One gather per row, then split into segment views: indexing once per segment makes each
        # index backward zero-fill a full [H, L, D] gradient per segment (~30% of an anchor step at 16K);
        # one gather does that once per tensor per row and the split views' gradients cat for free.
        lens = [len(idx) for idx in segs]
        flat = segs[0] if len(segs) == 1 else torch.cat(segs)
        q_s, k_s, v_s = (t[b][:, flat].split(lens, dim=1) for t in (query, key, value))
        outs = []
        for q_i, k_i, v_i, drop in zip(q_s, k_s, v_s, drops):
            o = F.scaled_dot_product_attention(
                q_i[None],
                k_i[None],
                v_i[None],
                dropout_p=p,
                is_causal=True,
                scale=scaling,
                enable_gqa=gqa,
            )[0]
            outs.append(o[:, drop:] if drop else o)
        rows.append(torch.cat(outs, dim=1)[:, inv])
    return torch.stack(rows).transpose(1, 2).contiguous(), None


def forward_kwargs(batch) -> dict:
    from training.attention.segments import plan

    return {
        "input_ids": batch.input_ids,
        "position_ids": batch.position_ids,
        "harness_segments": plan(batch.doc_ids, batch.mode, device=batch.input_ids.device),
    }
