"""The error-source emulation matches what transformers and torch compute in each dtype."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from harness.diagnose.precision import (
    HIGH,
    apply_rope,
    canonical_dtype,
    logits,
    low_precision,
    rope_cos_sin,
)


@pytest.fixture(scope="module")
def rotary():
    return LlamaRotaryEmbedding(LlamaConfig(hidden_size=64, num_attention_heads=2, rope_theta=10000.0))


@pytest.mark.parametrize("angles,dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_angles_match_transformers(rotary, angles, dtype):
    positions = torch.arange(1000, 1500)
    cos, sin = rotary(torch.zeros(1, dtype=dtype), positions[None])
    ours = rope_cos_sin(positions, rotary.inv_freq, rotary.attention_scaling, angles)
    assert torch.equal(ours[0], cos[0].double()) and torch.equal(ours[1], sin[0].double())


def test_fp64_angles_are_more_exact(rotary):
    positions = torch.arange(4000, 4096)
    exact = positions.double()[:, None] * rotary.inv_freq.double()[None]
    cos64, _ = rope_cos_sin(positions, rotary.inv_freq, 1.0, "fp64")
    cos32, _ = rope_cos_sin(positions, rotary.inv_freq, 1.0, "fp32")
    half = exact.shape[1]
    err64 = (cos64[:, :half] - exact.cos()).abs().max().item()
    err32 = (cos32[:, :half] - exact.cos()).abs().max().item()
    assert err64 < 1e-12 and err32 > 1e-5


@pytest.mark.parametrize("dtype,name", [(torch.bfloat16, "bf16"), (torch.float32, "fp32"), (torch.float16, "fp16")])
def test_rotation_matches_transformers_in_dtype(rotary, dtype, name):
    torch.manual_seed(0)
    positions = torch.arange(16, 16 + 200)
    q = torch.randn(1, 2, 200, 32).to(dtype)
    k = torch.randn(1, 2, 200, 32).to(dtype)
    cos, sin = rotary(q, positions[None])
    ref_q, ref_k = apply_rotary_pos_emb(q, k, cos, sin)
    c, s = rope_cos_sin(positions, rotary.inv_freq, 1.0, name)
    ours_q = apply_rope(q[0].double(), c, s, name)
    ours_k = apply_rope(k[0].double(), c, s, name)
    assert torch.equal(ours_q, ref_q[0].double()) and torch.equal(ours_k, ref_k[0].double())


def test_rotated_source_alone_rounds_only_the_rotation(rotary):
    torch.manual_seed(1)
    positions = torch.arange(0, 64)
    q = torch.randn(2, 64, 32, dtype=torch.float64)
    c, s = rope_cos_sin(positions, rotary.inv_freq, 1.0, "fp64")
    exact = apply_rope(q, c, s, "fp64")
    low = apply_rope(q, c, s, "bf16")
    assert torch.equal(low, low.to(torch.bfloat16).double())  # representable in bf16
    # Error relative to the size of the two terms (the sum itself may cancel): a few bf16 ulps.
    terms = q.abs() * c.abs() + torch.cat((q[..., 16:], q[..., :16]), -1).abs() * s.abs()
    rel = ((low - exact).abs() / terms.clamp_min(1e-6)).max().item()
    assert 0 < rel < 2**-6


def test_logits_product_matches_torch_in_dtype():
    torch.manual_seed(2)
    q, k = torch.randn(3, 40, 32, dtype=torch.float64), torch.randn(3, 50, 32, dtype=torch.float64)
    scaling = 32**-0.5
    bf = logits(q, k, scaling, "bf16")
    ref = ((q.bfloat16() @ k.bfloat16().transpose(1, 2)) * scaling).double()
    assert torch.equal(bf, ref)
    assert torch.allclose(logits(q, k, scaling, "fp64"), (q @ k.transpose(1, 2)) * scaling, rtol=0, atol=1e-13)
    assert (bf - logits(q, k, scaling, "fp64")).abs().max() > 1e-4


def test_low_precision_follows_transformers():
    assert low_precision("bf16").__dict__ == {"angles": "bf16", "rotated": "bf16", "product": "bf16"}
    assert low_precision("float64").__dict__ == {"angles": "fp32", "rotated": "fp64", "product": "fp64"}
    assert HIGH.__dict__ == {"angles": "fp64", "rotated": "fp64", "product": "fp64"}
    assert canonical_dtype("bfloat16") == "bf16"
    with pytest.raises(ValueError, match="unknown dtype"):
        canonical_dtype("fp8")
