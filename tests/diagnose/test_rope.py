"""The RoPE diagnostic against the paper's properties and against brute-force full matrices."""

from __future__ import annotations

import pytest
import torch
from diagnose_reference import apply_rotary_pos_emb, full_logits, layer_inputs, metrics, model_metrics, tiny_llama

from harness.diagnose.capture import capture_projections
from harness.diagnose.precision import apply_rope, low_precision, rope_cos_sin
from harness.diagnose.rope import DEFAULT_SHIFTS, Settings, measure
from training.attention_capture import capture_attention
from training.rope_deviation import attention_difference

L = 96


def _samples(num=2, length=L, vocab=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [[1] + torch.randint(3, vocab, (length - 1,), generator=g).tolist() for _ in range(num)]


@pytest.fixture(scope="module")
def fp64_model():
    return tiny_llama(torch.float64)


@pytest.fixture(scope="module")
def bf16_model():
    return tiny_llama(torch.bfloat16, kv_heads=1)


@pytest.fixture(scope="module")
def fp64_exact(fp64_model):
    settings = Settings(shifts=DEFAULT_SHIFTS, seq_len=L, logit_lengths=(32, L), rope_angles="fp64")
    return measure(fp64_model, _samples(), settings, "fp64", progress=False)


@pytest.fixture(scope="module")
def bf16_run(bf16_model):
    settings = Settings(shifts=(0, 16, 100, 2000), seq_len=L, logit_lengths=(32, L))
    return measure(bf16_model, _samples(), settings, "bf16", progress=False)


def test_float64_everywhere_keeps_the_relative_property(fp64_exact):
    d = fp64_exact["D"]
    assert d["shifts"] == list(DEFAULT_SHIFTS) and len(d["mean"]) == 19
    assert max(max(row) for row in d["per_sample"]) < 1e-12
    assert max(fp64_exact["D_logit"]["mean"]) < 1e-12
    assert max(fp64_exact["sources"]["baseline"]) < 1e-12


def test_equal_shifts_give_exactly_zero(bf16_run, fp64_model):
    i = bf16_run["D"]["shifts"].index(16)
    assert all(row[i] == 0.0 for row in bf16_run["D"]["per_sample"])
    for name in ("baseline", "angles", "rotated", "product", "all_low"):
        assert bf16_run["sources"][name][i] == 0.0
    run = measure(
        fp64_model, _samples(1), Settings(shifts=(5,), delta2=5, seq_len=L, logit_lengths=()), "fp64", progress=False
    )
    assert run["D"]["mean"] == [0.0]


def test_bf16_is_clearly_above_float64(bf16_run, fp64_exact):
    worst64 = max(fp64_exact["D"]["mean"])
    d = bf16_run["D"]
    for shift, value in zip(d["shifts"], d["mean"]):
        if shift != 16:
            assert value > 1e-5 and value > 1e6 * worst64
    assert min(bf16_run["D_logit"]["mean"]) > 1e6 * max(fp64_exact["D_logit"]["mean"])


def test_transformers_float32_angles_break_float64(fp64_model, fp64_exact):
    """The issue's observation: fp32 cos/sin alone give D ≈ 1e-7 on a float64 model."""
    run = measure(
        fp64_model, _samples(), Settings(shifts=(0, 100), seq_len=L, logit_lengths=()), "fp64", progress=False
    )
    assert all(1e-9 < v < 1e-5 for v in run["D"]["mean"])
    assert max(fp64_exact["D"]["mean"]) < 1e-6 * min(run["D"]["mean"])
    # Only the angles are low in a float64 model, and the source breakdown finds the same size.
    src = run["sources"]
    for i in range(2):
        assert src["angles"][i] == pytest.approx(run["D"]["mean"][i], rel=0.05)
        assert max(src["rotated"][i], src["product"][i]) < 1e-12


@pytest.mark.parametrize("dtype,angles", [("fp64", "model"), ("bf16", "model"), ("fp64", "fp64")])
def test_model_metrics_match_brute_force(fp64_model, bf16_model, dtype, angles):
    model = fp64_model if dtype == "fp64" else bf16_model
    torch_dtype = torch.float64 if dtype == "fp64" else torch.bfloat16
    samples = _samples(2)
    run = measure(
        model,
        samples,
        Settings(shifts=(0, 300), seq_len=L, logit_lengths=(40, L), rope_angles=angles, sources=False),
        dtype,
        progress=False,
    )
    for s, tokens in enumerate(samples):
        ids = torch.tensor([tokens])
        for i, shift in enumerate((0, 300)):
            d, _per_token, _ = model_metrics(model, ids, shift, 16, torch_dtype, fp64_angles=angles == "fp64")
            assert run["D"]["per_sample"][s][i] == pytest.approx(d, rel=1e-6, abs=1e-14)
    # per-token (Δ1 = 0) and D_logit are means over samples
    refs = [model_metrics(model, torch.tensor([t]), 0, 16, torch_dtype, fp64_angles=angles == "fp64") for t in samples]
    mean_tokens = sum(r[1] for r in refs) / len(refs)
    assert torch.allclose(
        torch.tensor(run["per_token"]["mean"], dtype=torch.float64), mean_tokens, rtol=1e-6, atol=1e-16
    )
    assert sum(run["per_token"]["mean"]) == pytest.approx(run["D"]["mean"][0], rel=1e-9)
    for i, length in enumerate((40, L)):
        ref = [
            model_metrics(model, torch.tensor([t[:length]]), 0, 16, torch_dtype, fp64_angles=angles == "fp64")[2]
            for t in samples
        ]
        assert run["D_logit"]["mean"][i] == pytest.approx(sum(ref) / len(ref), rel=1e-6, abs=1e-16)


def test_sources_match_brute_force_and_add_up(bf16_model, bf16_run):
    model, shift = bf16_model, 100
    scaling = model.model.layers[0].self_attn.scaling
    i = bf16_run["D"]["shifts"].index(shift)
    totals = {"angles": 0.0, "product": 0.0, "all_low": 0.0}
    for tokens in _samples():
        ids = torch.tensor([tokens])
        pre = layer_inputs(model, ids, 16)  # pre-RoPE q/k of the Δ2 run (as the diagnostic keeps them)
        rotary = model.model.rotary_emb
        for name in totals:
            logits = {1: [], 2: []}
            for q, k, _, _ in pre:
                for which, pos in ((1, shift), (2, 16)):
                    positions = torch.arange(pos, pos + L)[None]
                    if name == "product":
                        cos, sin = (t.double() for t in _fp64(rotary, positions))
                        qr, kr = apply_rotary_pos_emb(q.double(), k.double(), cos, sin)
                        logits[which].append(full_logits(qr, kr, scaling, torch.bfloat16))
                    elif name == "angles":  # transformers' bf16 cos/sin, rotation and product in float64
                        cos, sin = rotary(q, positions)
                        qr, kr = apply_rotary_pos_emb(q.double(), k.double(), cos.double(), sin.double())
                        logits[which].append(full_logits(qr, kr, scaling, torch.float64))
                    else:  # everything as transformers does it in bf16
                        cos, sin = rotary(q, positions)
                        qr, kr = apply_rotary_pos_emb(q, k, cos, sin)
                        logits[which].append(full_logits(qr, kr, scaling, torch.bfloat16))
            totals[name] += metrics(logits[1], logits[2])[0] / 2
    src = bf16_run["sources"]
    for name, value in totals.items():
        assert src[name][i] == pytest.approx(value, rel=1e-6), name
    for j in range(len(src["shifts"])):
        parts = src["angles"][j] + src["rotated"][j] + src["product"][j]
        assert src["interaction"][j] == pytest.approx(src["all_low"][j] - parts, rel=1e-12, abs=1e-300)
        if src["shifts"][j] != 16:
            assert (
                min(src["angles"][j], src["rotated"][j], src["product"][j], src["all_low"][j])
                > 1e6 * src["baseline"][j]
            )


def _fp64(rotary, positions):
    freqs = positions.double()[..., None] * rotary.inv_freq.double()
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def test_captured_qk_are_what_the_emulation_predicts(bf16_model):
    """Post-RoPE q/k in the bf16 model equal the all-low emulation applied to the pre-RoPE q/k."""
    ids = torch.tensor([_samples(1)[0]])
    post, pre = {}, {}
    rotary = bf16_model.model.rotary_emb
    with (
        torch.no_grad(),
        capture_attention(bf16_model, "sdpa", lambda l, q, k: post.__setitem__(l, (q, k))),
        capture_projections(bf16_model, lambda l, q, k: pre.__setitem__(l, (q, k))),
    ):
        bf16_model.model(input_ids=ids, position_ids=torch.arange(7, 7 + L)[None], use_cache=False)
    low = low_precision("bf16")
    cos, sin = rope_cos_sin(torch.arange(7, 7 + L), rotary.inv_freq, rotary.attention_scaling, low.angles)
    assert sorted(post) == sorted(pre) == [0, 1]
    for layer, outs in post.items():
        for got, raw in zip(outs, pre[layer]):
            assert torch.equal(apply_rope(raw[0].double(), cos, sin, low.rotated), got[0].double())
    assert bf16_model.config._attn_implementation == "eager"  # restored after the context


def test_row_blocks_do_not_change_the_result():
    torch.manual_seed(3)
    q1, q2 = torch.randn(4, 70, 16, dtype=torch.float64), torch.randn(4, 70, 16, dtype=torch.float64)
    k1, k2 = torch.randn(2, 70, 16, dtype=torch.float64), torch.randn(2, 70, 16, dtype=torch.float64)
    whole = attention_difference(q1, k1, q2, k2, 0.25, "fp64", max_bytes=1 << 30)
    rows = attention_difference(q1, k1, q2, k2, 0.25, "fp64", max_bytes=1)  # one query row per block
    assert torch.allclose(whole.cols_HL, rows.cols_HL, rtol=1e-12, atol=1e-15)
    assert torch.allclose(whole.logit_first_H, rows.logit_first_H, rtol=1e-12)
    # and both equal the dense computation with grouped keys repeated
    k1r, k2r = k1.repeat_interleave(2, 0), k2.repeat_interleave(2, 0)
    mask = torch.ones(70, 70, dtype=torch.bool).triu(1)
    p1 = torch.softmax((q1 @ k1r.mT * 0.25).masked_fill(mask, float("-inf")), -1)
    p2 = torch.softmax((q2 @ k2r.mT * 0.25).masked_fill(mask, float("-inf")), -1)
    assert torch.allclose(whole.cols_HL, (p1 - p2).abs().sum(1), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kernel", ["eager", "sdpa"])
def test_capture_leaves_the_forward_pass_unchanged(kernel):
    model = tiny_llama(torch.float32, kv_heads=1)
    ids = torch.tensor([_samples(1)[0]])
    positions = torch.arange(3, 3 + L)[None]
    with torch.no_grad():
        model.set_attn_implementation(kernel)  # transformers' own kernel of that name
        ref = model(input_ids=ids, position_ids=positions).logits
        seen = []
        with capture_attention(model, kernel, lambda l, q, k: seen.append(l)):
            got = model(input_ids=ids, position_ids=positions).logits
    assert seen == [0, 1] and model.config._attn_implementation == kernel
    assert torch.allclose(got, ref, rtol=0, atol=1e-6)
    if kernel == "eager":
        assert torch.equal(got, ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_eager_in_row_blocks_matches_the_whole_matrix(dtype, monkeypatch):
    """The eager kernel computes its weights a block of query rows at a time (capture.EAGER_BLOCK_BYTES):
    down to one row per block, the forward pass equals the whole-matrix kernel to rounding (and, in
    float32, transformers' own eager)."""
    from training import attention_capture as capture

    model = tiny_llama(dtype, kv_heads=1)
    ids = torch.tensor([_samples(1)[0]])
    tol = 1e-6 if dtype == torch.float32 else 1e-13

    def run(block_bytes):
        monkeypatch.setattr(capture, "EAGER_BLOCK_BYTES", block_bytes)
        with torch.no_grad(), capture_attention(model, "eager", lambda *a: None):
            return model(input_ids=ids).logits

    whole = run(1 << 62)
    for block_bytes in (1, 4 * 2 * L * 7):  # one row per block; 7 rows (the last block shorter)
        assert (run(block_bytes) - whole).abs().max() <= tol * whole.abs().max()
    if dtype == torch.float32:
        with torch.no_grad():
            model.set_attn_implementation("eager")
            assert torch.equal(model(input_ids=ids).logits, whole)


def test_small_row_blocks_give_the_same_measurement(bf16_model):
    settings = Settings(shifts=(0, 100), seq_len=L, logit_lengths=())
    whole = measure(bf16_model, _samples(1), settings, "bf16", progress=False)
    blocks = measure(
        bf16_model,
        _samples(1),
        Settings(shifts=(0, 100), seq_len=L, logit_lengths=(), max_bytes=1),
        "bf16",
        progress=False,
    )
    assert whole["D"]["mean"] == pytest.approx(blocks["D"]["mean"], rel=1e-9)
    assert whole["sources"]["all_low"] == pytest.approx(blocks["sources"]["all_low"], rel=1e-9)


def test_sliding_window_models_are_refused():
    from harness.core.errors import UserError

    model = tiny_llama(torch.float32, layers=1)
    model.config.sliding_window = 32
    with pytest.raises(UserError, match="sliding-window"):
        measure(model, _samples(1), Settings(shifts=(0,), seq_len=L, logit_lengths=()), "fp32", progress=False)
