"""FlexAttention with a BlockMask: GPU training, CPU inference only.

mask_mod is training.modes.attention_allowed on the batch's segment ids, turned into a BlockMask
once per batch (forward_kwargs) and passed as the 4D attention_mask, which transformers forwards
untouched. Fully masked blocks are skipped by the kernel, so the cost follows the kept pairs.
On CUDA the kernel is torch.compile'd (dynamic=False: new lengths recompile, but fixed windows
compile once). On CPU flex has no backward, so training there raises; inference runs eager for
small windows (compile time dominates) and compiled above EAGER_MAX_TOKENS.
Registered with transformers as "harness_flex".
"""

from __future__ import annotations

import warnings
from functools import lru_cache

NAME = "harness_flex"
EAGER_MAX_TOKENS = 2048


@lru_cache(maxsize=1)
def _compiled():
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def block_mask(doc_ids_BL, mode: str):
    from torch.nn.attention.flex_attention import create_block_mask

    from training.modes import attention_allowed

    B, L = doc_ids_BL.shape
    doc = doc_ids_BL
    from training.attention.dense import MAX_DENSE_TOKENS

    if doc.device.type == "cpu" and L > MAX_DENSE_TOKENS:
        # uncompiled on CPU the mask is LxL booleans: refuse rather than allocate GBs
        raise ValueError(
            f"the flex kernel on CPU builds an LxL mask and refuses windows above {MAX_DENSE_TOKENS} tokens "
            f"(got {L}): use --kernel sdpa-doc on CPU"
        )

    def mask_mod(b, h, q, kv):
        return attention_allowed(doc[b, q], doc[b, kv], q, kv, mode)

    # Uncompiled, create_block_mask evaluates mask_mod on all LxL pairs at once (GBs at 64K), so the
    # GPU compiles it (block by block); on CPU (inference, <= 16K) compiling costs ~1 min per call
    # while the LxL booleans stay a few hundred MB.
    return create_block_mask(mask_mod, B, None, L, L, device=doc.device, _compile=doc.device.type == "cuda")


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: q [B,H,L,D], k/v [B,Hkv,L,D] -> ([B,L,H,D], None)."""
    import torch
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    if not isinstance(attention_mask, BlockMask):
        # ValueError like the other kernels' missing-plan guard: the call, not the mask's type, is wrong
        raise ValueError(  # noqa: TRY004
            "the flex kernel needs its BlockMask: call the model with training.attention.forward_kwargs(batch, 'flex')"
        )
    if query.device.type == "cpu" and torch.is_grad_enabled() and query.requires_grad:
        raise ValueError(
            "FlexAttention has no backward on CPU: train with --kernel sdpa-doc on CPU (flex is inference-only there)"
        )
    L = query.shape[2]
    gqa = query.shape[1] != key.shape[1]
    if query.device.type == "cpu" and L <= EAGER_MAX_TOKENS:
        with warnings.catch_warnings():  # eager is deliberate here; silence the "use torch.compile" advice
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            out = flex_attention(query, key, value, block_mask=attention_mask, scale=scaling, enable_gqa=gqa)
    else:
        out = _compiled()(query, key, value, block_mask=attention_mask, scale=scaling, enable_gqa=gqa)
    return out.transpose(1, 2).contiguous(), None


def forward_kwargs(batch) -> dict:
    return {
        "input_ids": batch.input_ids,
        "position_ids": batch.position_ids,
        "attention_mask": block_mask(batch.doc_ids, batch.mode),
    }
