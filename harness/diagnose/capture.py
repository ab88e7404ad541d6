"""Capturing pre-RoPE q/k and recomputing RoPE angles in a Hugging Face model, without monkey patching.

The post-RoPE capture, `capture_attention(model, kernel, on_attention)`, lives in
training.attention_capture (the in-loop RoPE probe uses it too); this module adds what only the
diagnostic's error-source breakdown needs. Both are undone when their context exits:

- `capture_projections(model, on_projection)`: forward hooks on each attention layer's q/k
  projections (or its q_norm/k_norm when the model has them) that hand the pre-RoPE q, k.
- `rope_angles_fp64(model)`: a forward hook on the rotary embedding that recomputes cos/sin with
  float64 angles (transformers computes them in float32 even for a float64 model).

Callbacks run inside the forward pass; they see tensors on the model's device in its dtype.
"""

from __future__ import annotations

from contextlib import contextmanager

from harness.core.errors import UserError
from training.attention_capture import KERNELS, attention_layers


def rotary_module(model):
    """The model's single rotary embedding module (with inv_freq and attention_scaling)."""
    found = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding") and hasattr(m, "inv_freq")]
    if len(found) != 1:
        raise UserError(
            f"{type(model).__name__} has {len(found)} rotary embedding modules; the RoPE diagnostic "
            "needs exactly one (a model with one RoPE for all layers)"
        )
    return found[0]


def check_kernel(kernel: str, device) -> None:
    """Raise UserError when `kernel` cannot run on `device`."""
    if kernel not in KERNELS:
        raise UserError(f"unknown attention kernel {kernel!r}: use one of {', '.join(KERNELS)}")
    if kernel == "varlen":
        import torch

        if str(device).split(":")[0] != "cuda" or not torch.cuda.is_available():
            raise UserError(
                "the varlen kernel (FlashAttention varlen) runs only on CUDA: use --kernel eager or sdpa here"
            )
        try:
            from torch.nn.attention.varlen import varlen_attn  # noqa: F401
        except ImportError:
            raise UserError("this torch has no torch.nn.attention.varlen: upgrade torch or use --kernel sdpa") from None


@contextmanager
def capture_projections(model, on_projection):
    """Call on_projection(layer_idx, q, k) with the pre-RoPE q [B, H, L, D] and k [B, Hkv, L, D]."""
    handles = []
    pending: dict[int, dict] = {}

    def hook_for(layer: int, which: str, head_dim: int):
        def hook(_module, _args, output):
            batch, length = output.shape[0], output.shape[1]
            part = pending.setdefault(layer, {})
            part[which] = output.detach().reshape(batch, length, -1, head_dim).transpose(1, 2)
            if len(part) == 2:
                on_projection(layer, pending.pop(layer)["q"], part["k"])

        return hook

    try:
        for attn in attention_layers(model):
            head_dim = attn.head_dim
            # Models with per-head q/k norms (Qwen3, OLMo2) rotate the normed vectors.
            q_mod = getattr(attn, "q_norm", None) or attn.q_proj
            k_mod = getattr(attn, "k_norm", None) or attn.k_proj
            handles.append(q_mod.register_forward_hook(hook_for(attn.layer_idx, "q", head_dim)))
            handles.append(k_mod.register_forward_hook(hook_for(attn.layer_idx, "k", head_dim)))
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def rope_angles_fp64(model):
    """Make the model's rotary embedding return cos/sin computed from float64 angles."""
    import torch

    rotary = rotary_module(model)

    def hook(module, args, kwargs, output):
        x = args[0] if args else kwargs["x"]
        position_ids = args[1] if len(args) > 1 else kwargs["position_ids"]
        freqs = position_ids.to(torch.float64)[..., None] * module.inv_freq.to(device=x.device, dtype=torch.float64)
        emb = torch.cat((freqs, freqs), dim=-1)
        scale = module.attention_scaling
        return (emb.cos() * scale).to(x.dtype), (emb.sin() * scale).to(x.dtype)

    handle = rotary.register_forward_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()
