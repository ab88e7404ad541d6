"""Attention kernels for packed-window training, chosen by name, registered with transformers.

    from training.attention import prepare_model, forward_kwargs, gather_logits
    prepare_model(model, "sdpa-doc")              # registers + selects our attention function
    batch = batch.to(device)                      # forward_kwargs builds masks on the batch's device
    out = model(**forward_kwargs(batch, "sdpa-doc"))
    logits = gather_logits(out.logits, batch, "sdpa-doc")   # [B, L, V] in window order

| kernel   | module      | where                          | mask / boundaries passed as            |
|----------|-------------|--------------------------------|----------------------------------------|
| dense    | dense.py    | reference, any device, L<=16K  | 4D bool attention_mask                 |
| sdpa-doc | sdpa_doc.py | CPU training (fwd + bwd)       | `harness_segments` plan                |
| flex     | flex.py     | GPU training, CPU inference    | BlockMask as attention_mask            |
| varlen   | varlen.py   | GPU (varlen_attn / flash-attn) | cu_seq_lens_q/k on the anchor-copy layout |

Registration goes through transformers' AttentionInterface (no monkey patching). Masks and
boundaries are always explicit: with attention_mask=None and packed position ids transformers
would guess the packing and cut the anchor off its documents. "varlen-cpu-emulation" is the
varlen layout run with per-sequence SDPA on CPU, for tests.

The loop computes its loss on `gather_logits(...)` with `batch.labels` (shift by one), never by
passing labels to the model: on the varlen layout the model's outputs are in expanded order.
With Ulysses sequence parallelism the kernels run after the all-to-all (full sequence, a slice of
the heads), so the same plan/mask/boundaries apply unchanged.
"""

from __future__ import annotations

from types import ModuleType

from harness.core.errors import UserError

KERNELS = ("dense", "sdpa-doc", "flex", "varlen")
_TEST_KERNELS = ("varlen-cpu-emulation",)


def _module(kernel: str) -> ModuleType:
    m: ModuleType  # one of the kernel modules below
    if kernel == "dense":
        from training.attention import dense as m
    elif kernel == "sdpa-doc":
        from training.attention import sdpa_doc as m
    elif kernel == "flex":
        from training.attention import flex as m
    elif kernel in ("varlen", "varlen-cpu-emulation"):
        from training.attention import varlen as m
    else:
        raise UserError(f"unknown attention kernel {kernel!r}: choose one of {', '.join(KERNELS)}")
    return m


def backend_of(kernel: str) -> str:
    """What computes `kernel`'s attention on this machine, for logs (varlen: the installed function)."""
    if kernel in ("varlen", "varlen-cpu-emulation"):
        from training.attention.varlen import backend_name

        return backend_name() if kernel == "varlen" else "per-sequence SDPA (CPU emulation)"
    return {
        "dense": "eager matmul with a 4D bool mask",
        "sdpa-doc": "torch scaled_dot_product_attention per segment plan",
        "flex": "torch FlexAttention",
    }[kernel]


def attention_name(kernel: str) -> str:
    """The name our function is registered under in transformers' AttentionInterface."""
    m = _module(kernel)
    return m.EMULATED_NAME if kernel == "varlen-cpu-emulation" else m.NAME


def register(kernel: str) -> str:
    from transformers import AttentionInterface

    m = _module(kernel)
    fn = m.emulated_attention if kernel == "varlen-cpu-emulation" else m.attention
    name = attention_name(kernel)
    AttentionInterface.register(name, fn)
    return name


def prepare_model(model, kernel: str) -> None:
    """Register `kernel` with transformers and make `model` use it (all its attention layers)."""
    if kernel == "varlen":
        device = next(model.parameters()).device
        if device.type != "cuda":
            from training.attention.varlen import cpu_message

            raise ValueError(cpu_message())
    name = register(kernel)
    model.set_attn_implementation(name)


def forward_kwargs(batch, kernel: str) -> dict:
    """Everything model(**kw) needs besides labels: ids, positions and the kernel's explicit mask."""
    return _module(kernel).forward_kwargs(batch)


def gather_logits(logits, batch, kernel: str):
    """Model outputs mapped back to the [B, L] window (only the varlen layout differs)."""
    if kernel in ("varlen", "varlen-cpu-emulation"):
        from training.attention.varlen import gather_logits as g

        return g(logits, batch)
    return logits
