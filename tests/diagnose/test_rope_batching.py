"""Batching the shifts (issue 16's speed-up) leaves every number of the RoPE diagnostic unchanged.

The reference is the one-shift-at-a-time path: `attention_difference` per shift, and measure()
with a batching budget of one byte (one shift per batch, one Δ1 run per group). Equality is exact:
batching must not change a single rounding.
"""

from __future__ import annotations

import pytest
import torch
from diagnose_reference import tiny_llama

from harness.diagnose.rope import Settings, measure
from training.rope_deviation import attention_difference, attention_differences, working_bytes

L = 80


def _qk(seed: int, heads=4, kv=2, length=70, d=16):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(heads, length, d, generator=g, dtype=torch.float64),
        torch.randn(kv, length, d, generator=g, dtype=torch.float64),
    )


@pytest.mark.parametrize("product", ["bf16", "fp32", "fp64"])
@pytest.mark.parametrize("max_bytes", [1 << 28, 4 * 8 * 4 * 70 * 9])
@pytest.mark.parametrize("batch_bytes", [None, 1, 4 * 8 * 4 * 70 * 70 * 2])
# None: all heads at once; 1: one head per chunk; the last: 3 of the 4 heads, then 1
@pytest.mark.parametrize("chunk_bytes", [None, 1, 8 * 2 * 70 * 70 * 3])
def test_batched_shifts_equal_one_at_a_time(product, max_bytes, batch_bytes, chunk_bytes):
    q2, k2 = _qk(0)
    pairs = [_qk(s) for s in range(1, 6)] + [(q2.clone(), k2.clone())]  # the last: an equal shift
    batched = attention_differences(pairs, q2, k2, 0.25, product, max_bytes, batch_bytes, chunk_bytes)
    for (q1, k1), got in zip(pairs, batched):
        one = attention_difference(q1, k1, q2, k2, 0.25, product, max_bytes)
        assert torch.equal(got.cols_HL, one.cols_HL) and torch.equal(got.logit_first_H, one.logit_first_H)
    assert batched[-1].cols_HL.abs().sum() == 0 and batched[-1].logit_first_H.abs().sum() == 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_measure_is_independent_of_the_batching_budget(dtype):
    model = tiny_llama(dtype, kv_heads=1)
    g = torch.Generator().manual_seed(0)
    samples = [[1] + torch.randint(3, 300, (L - 1,), generator=g).tolist()]
    settings = {"shifts": (0, 4, 16, 100, 2000), "seq_len": L, "logit_lengths": (32, L)}
    name = "bf16" if dtype == torch.bfloat16 else "fp32"
    batched = measure(model, samples, Settings(**settings), name, progress=False)
    single = measure(model, samples, Settings(**settings, batch_bytes=1), name, progress=False)
    assert batched == single


def test_working_bytes():
    assert working_bytes(12345, "cpu") == 12345
    assert working_bytes(None, "cpu") == 1 << 28


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_measure_is_independent_of_the_head_chunks(dtype, monkeypatch):
    """On CPU the float64 rows go through chunks of heads (CPU_CHUNK_BYTES): one head per chunk
    and all heads at once give the same numbers, sources included."""
    from harness.diagnose import rope

    model = tiny_llama(dtype, kv_heads=1)
    g = torch.Generator().manual_seed(1)
    samples = [[1] + torch.randint(3, 300, (L - 1,), generator=g).tolist()]
    settings = Settings(shifts=(0, 4, 100), seq_len=L, logit_lengths=(L,))
    name = "bf16" if dtype == torch.bfloat16 else "fp32"
    monkeypatch.setattr(rope, "CPU_CHUNK_BYTES", 1)
    one_head = measure(model, samples, settings, name, progress=False)
    monkeypatch.setattr(rope, "CPU_CHUNK_BYTES", 1 << 40)
    all_heads = measure(model, samples, settings, name, progress=False)
    assert one_head == all_heads


@pytest.mark.parametrize("product", ["bf16", "fp32", "fp64"])
def test_the_cuda_path_gives_the_same_numbers(product, monkeypatch):
    """The path CUDA takes (every head at once, the float64 steps in one function) equals the CPU's
    head chunks exactly when that function runs eagerly, and within 1e-12 compiled (only the order of
    float64 sums changes). The compiled one runs here on CPU; on CUDA it is the same graph."""
    from training import rope_deviation as rope

    q2, k2 = _qk(0)
    pairs = [_qk(s) for s in range(1, 4)]
    cpu = attention_differences(pairs, q2, k2, 0.25, product, 4 * 8 * 4 * 70 * 9, None, 1)
    monkeypatch.setattr(rope, "_fuses", lambda device: True)
    monkeypatch.setattr(rope, "_fused_diff_colsum", lambda: rope._softmax_diff_colsum)
    eager = attention_differences(pairs, q2, k2, 0.25, product, 4 * 8 * 4 * 70 * 9, None, 1)
    for a, b in zip(cpu, eager):
        assert torch.equal(a.cols_HL, b.cols_HL) and torch.equal(a.logit_first_H, b.logit_first_H)
    if product != "bf16":
        return  # one compile is enough: the product dtype only changes the logits' input
    monkeypatch.setattr(rope, "_fused_diff_colsum", lambda: torch.compile(rope._softmax_diff_colsum, dynamic=True))
    fused = attention_differences(pairs, q2, k2, 0.25, product, 4 * 8 * 4 * 70 * 9, None, 1)
    for a, b in zip(cpu, fused):
        assert torch.allclose(a.cols_HL, b.cols_HL, rtol=1e-12, atol=1e-15)
        assert torch.equal(a.logit_first_H, b.logit_first_H)


def test_a_compile_failure_falls_back_to_the_eager_steps(monkeypatch):
    from training import rope_deviation as rope

    def broken(*args):
        raise RuntimeError("no Triton here")

    q2, k2 = _qk(0)
    pairs = [_qk(1)]
    want = attention_differences(pairs, q2, k2, 0.25, "fp32")
    monkeypatch.setattr(rope, "_fuses", lambda device: True)
    monkeypatch.setattr(rope, "_fused", {"fn": broken})
    with pytest.warns(UserWarning, match="fused float64 steps unavailable"):
        got = attention_differences(pairs, q2, k2, 0.25, "fp32")
    assert rope._fused["fn"] is None  # not tried again
    assert torch.equal(want[0].cols_HL, got[0].cols_HL)
