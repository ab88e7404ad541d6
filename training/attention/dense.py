"""Dense-mask SDPA: the reference every other kernel is checked against.

Builds the full [B, 1, L, L] boolean mask from training.modes.attention_allowed and runs one
scaled_dot_product_attention. Memory is O(L^2), so it refuses windows above MAX_DENSE_TOKENS.
Registered with transformers as "harness_dense"; the mask reaches it as a 4D attention_mask, which
transformers passes through untouched (no packing guesses).
"""

from __future__ import annotations

MAX_DENSE_TOKENS = 16384
NAME = "harness_dense"


def dense_mask(doc_ids_BL, mode: str):
    """Boolean mask [B, 1, L, L]; True = may attend."""
    import torch

    from training.modes import attention_allowed

    L = doc_ids_BL.shape[-1]
    if L > MAX_DENSE_TOKENS:
        raise ValueError(
            f"the dense attention kernel builds an LxL mask and refuses windows above {MAX_DENSE_TOKENS} tokens "
            f"(got {L}): use --kernel sdpa-doc, flex or varlen"
        )
    pos = torch.arange(L, device=doc_ids_BL.device)
    mask = attention_allowed(doc_ids_BL[:, :, None], doc_ids_BL[:, None, :], pos[:, None], pos[None, :], mode)
    return mask.expand(doc_ids_BL.shape[0], L, L)[:, None]  # "full" ignores doc ids: give it the batch dim


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: q [B,H,L,D], k/v [B,Hkv,L,D] -> ([B,L,H,D], None)."""
    import torch.nn.functional as F

    if attention_mask is None or attention_mask.dim() != 4:
        raise ValueError(
            "the dense kernel needs its 4D mask: call the model with training.attention.forward_kwargs(batch, 'dense')"
        )
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout if module.training else 0.0,
        scale=scaling,
        enable_gqa=query.shape[1] != key.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


def forward_kwargs(batch) -> dict:
    return {
        "input_ids": batch.input_ids,
        "position_ids": batch.position_ids,
        "attention_mask": dense_mask(batch.doc_ids, batch.mode),
    }
