"""The three switchable error sources of RoPE attention, each emulated at a chosen precision.

Attention logits with RoPE go through three steps, and each can round:

1. angles   cos(p·θ_k), sin(p·θ_k) for every position p and frequency θ_k.
            transformers computes them in float32 whatever the model dtype (even float64), then
            casts them to the model dtype; "fp64" computes them in float64 instead.
2. rotated  q·cos + rotate_half(q)·sin (and the same for k): each product and the sum are rounded
            to this precision, as torch does when the model runs in it.
3. product  the logit q_i·k_j·scaling: q and k are rounded to this precision, multiplied with a
            torch matmul in it and scaled in it (float32 accumulation, output rounded, as bf16
            eager attention does; FlashAttention keeps fp32 scores, i.e. product "fp32" on
            bf16-rounded q/k).

Everything here returns float64 tensors that hold values representable at the requested
precision, so errors are only those the precision causes; the softmax and the differences are
then taken in float64 by harness.diagnose.rope.

The precisions are kept separable: the rotation rounds its own products and sum but uses the
cos/sin values of the angle setting unchanged, so "rotated" alone never rounds the angles. With
both at bf16 the emulation equals transformers' own bf16 `apply_rotary_pos_emb` (tested).

Legend: q_HLD = query of H heads, L positions, head dim D.
"""

from __future__ import annotations

from dataclasses import dataclass

from training.rope_deviation import canonical_dtype, torch_dtype

# The precision names (bf16, fp16, fp32, fp64) and their torch dtypes are the RoPE measurement's
# (training.rope_deviation), shared with the in-loop probe.
SOURCES = ("angles", "rotated", "product")


@dataclass(frozen=True)
class Precision:
    """One setting of the three error sources (each a name from DTYPES)."""

    angles: str = "fp64"
    rotated: str = "fp64"
    product: str = "fp64"

    def with_(self, **changes) -> Precision:
        return Precision(**{**self.__dict__, **changes})


HIGH = Precision()


def low_precision(model_dtype: str) -> Precision:
    """What a model running in `model_dtype` gets from transformers for each source.

    Angles are computed in float32 and cast to the model dtype, so a float64 model still gets
    float32 angles; the rotation and the product run in the model dtype.
    """
    d = canonical_dtype(model_dtype)
    return Precision(angles="fp32" if d in ("fp32", "fp64") else d, rotated=d, product=d)


def round_to(x, name: str):
    """x (float64) rounded to precision `name`, returned as float64."""
    import torch

    if canonical_dtype(name) == "fp64":
        return x
    return x.to(torch_dtype(name)).to(torch.float64)


def rope_cos_sin(positions, inv_freq, attention_scaling: float, angles: str):
    """cos, sin [L, D] (float64 tensors) for integer `positions` [L] at angle precision `angles`.

    "fp64": positions·inv_freq, cos and sin all in float64 (inv_freq itself is the model's buffer,
    the same for every shift, so its own rounding cannot break the relative property).
    "fp32": exactly transformers' computation (float32 product, float32 cos/sin, scaling).
    "bf16"/"fp16": the float32 values cast to that dtype, as transformers does for such models.
    """
    import torch

    angles = canonical_dtype(angles)
    if angles == "fp64":
        freqs = positions.to(torch.float64)[:, None] * inv_freq.to(torch.float64)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * attention_scaling, emb.sin() * attention_scaling
    freqs = positions.to(torch.float32)[:, None] * inv_freq.to(torch.float32)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * attention_scaling, emb.sin() * attention_scaling
    return round_to(cos.to(torch.float64), angles), round_to(sin.to(torch.float64), angles)


def rotate_half(x):
    half = x.shape[-1] // 2
    return __import__("torch").cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x_HLD, cos_LD, sin_LD, rotated: str):
    """RoPE on float64 x with each product and the sum rounded to precision `rotated`.

    x is first rounded to `rotated` (a no-op when it came from a model in that dtype; the same
    for every shift either way). Products of two values of at most 24-bit mantissa are exact in
    float64, so rounding them once matches torch's own arithmetic in `rotated`.
    """
    x = round_to(x_HLD, rotated)
    return round_to(round_to(x * cos_LD, rotated) + round_to(rotate_half(x) * sin_LD, rotated), rotated)


def logits(q_RD, k_CD, scaling: float, product: str):
    """Attention logits q·kᵀ·scaling [R, C] (float64) with the product at precision `product`."""
    import torch

    p = torch_dtype(product)
    # Scaled in `product` too, as eager attention (matmul * scaling) and FlashAttention (fp32) do.
    return ((q_RD.to(p) @ k_CD.to(p).transpose(-1, -2)) * scaling).to(torch.float64)
