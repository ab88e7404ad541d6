"""The varlen adapter (training/attention/varlen.py) against every known varlen signature.

Each fake below has the exact signature of one release (torch 2.10, 2.11, 2.13, flash-attn 2), records
what it receives and computes causal varlen attention with per-sequence SDPA the way that release
would (its causal argument, its scale argument or the default 1/sqrt(D), its GQA support). The
adapter's output must equal an independent per-sequence causal SDPA on the GQA-expanded heads, and
the recorded keywords must be the ones that release takes — a signature change fails here.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from training.attention import varlen

T_LENS = (5, 3, 7)
CU = torch.tensor([0, 5, 8, 15], dtype=torch.int32)


def _attend(q, k, v, cu, causal: bool, scale: float | None, gqa: bool):
    """[T, H, D] per-sequence SDPA as a kernel would compute it; refuses unequal heads unless gqa."""
    if k.shape[1] != q.shape[1] and not gqa:
        raise RuntimeError("number of heads differs and this kernel has no GQA")
    b = cu.tolist()
    outs = []
    for s, e in itertools.pairwise(b):
        qs, ks, vs = (t[s:e].transpose(0, 1)[None] for t in (q, k, v))
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=scale, enable_gqa=gqa)
        outs.append(o[0].transpose(0, 1))
    return torch.cat(outs)


class Recorder:
    def __init__(self):
        self.calls: list[dict] = []


def torch_210(rec):
    def varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, return_aux=None):
        rec.calls.append({"is_causal": is_causal, "heads_k": key.shape[1], "max": (max_q, max_k)})
        return _attend(query, key, value, cu_seq_q, is_causal, None, gqa=False)

    return varlen_attn


def torch_211(rec):
    def varlen_attn(
        query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None, window_size=(-1, -1)
    ):
        rec.calls.append({"window_size": window_size, "scale": scale, "heads_k": key.shape[1]})
        assert tuple(window_size) in ((-1, -1), (-1, 0))
        return _attend(query, key, value, cu_seq_q, tuple(window_size) == (-1, 0), scale, gqa=False)

    return varlen_attn


def torch_213(rec):
    def varlen_attn(
        query,
        key,
        value,
        cu_seq_q,
        cu_seq_k,
        max_q,
        max_k,
        *,
        return_aux=None,
        scale=None,
        window_size=(-1, -1),
        enable_gqa=False,
        seqused_k=None,
        block_table=None,
        num_splits=None,
    ):
        rec.calls.append(
            {"window_size": window_size, "scale": scale, "enable_gqa": enable_gqa, "heads_k": key.shape[1]}
        )
        return _attend(query, key, value, cu_seq_q, tuple(window_size) == (-1, 0), scale, gqa=enable_gqa)

    return varlen_attn


def flash_attn_2(rec):
    def flash_attn_varlen_func(
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        dropout_p=0.0,
        softmax_scale=None,
        causal=False,
        window_size=(-1, -1),
        softcap=0.0,
        alibi_slopes=None,
        deterministic=False,
        return_attn_probs=False,
        block_table=None,
    ):
        rec.calls.append(
            {
                "causal": causal,
                "window_size": window_size,
                "softmax_scale": softmax_scale,
                "dropout_p": dropout_p,
                "heads_k": k.shape[1],
            }
        )
        # flash-attn 2 handles MQA/GQA natively; a window of (-1, -1) plus causal=True is causal.
        return _attend(q, k, v, cu_seqlens_q, causal, softmax_scale, gqa=True)

    return flash_attn_varlen_func


FAKES = {
    "torch 2.10": (torch_210, "torch.nn.attention.varlen.varlen_attn"),
    "torch 2.11": (torch_211, "torch.nn.attention.varlen.varlen_attn"),
    "torch 2.13": (torch_213, "torch.nn.attention.varlen.varlen_attn"),
    "flash-attn 2": (flash_attn_2, "flash_attn.flash_attn_varlen_func"),
}


def _inputs(heads: int, kv_heads: int, d: int = 8):
    g = torch.Generator().manual_seed(0)
    T = int(CU[-1])
    q = torch.randn(T, heads, d, generator=g, dtype=torch.float64)
    k = torch.randn(T, kv_heads, d, generator=g, dtype=torch.float64)
    v = torch.randn(T, kv_heads, d, generator=g, dtype=torch.float64)
    return q, k, v


def _reference(q, k, v, scale):
    groups = q.shape[1] // k.shape[1]
    return _attend(
        q, k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1), CU, True, scale, gqa=False
    )


@pytest.mark.parametrize("release", list(FAKES))
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_adapter_matches_causal_reference(release, kv_heads, scale):
    make, backend = FAKES[release]
    rec = Recorder()
    fn = make(rec)
    q, k, v = _inputs(4, kv_heads)
    out = varlen.call_varlen(fn, backend, q, k, v, CU, CU, max(T_LENS), max(T_LENS), scale=scale)
    torch.testing.assert_close(out, _reference(q, k, v, scale), rtol=1e-10, atol=1e-10)
    (call,) = rec.calls
    gqa = kv_heads != 4
    if release == "torch 2.10":
        assert call["is_causal"] is True
        assert call["heads_k"] == 4  # no GQA argument: KV heads repeated
    elif release == "torch 2.11":
        assert call["window_size"] == (-1, 0) and call["scale"] == scale and call["heads_k"] == 4
    elif release == "torch 2.13":
        assert call["window_size"] == (-1, 0) and call["scale"] == scale
        assert call["enable_gqa"] is gqa and call["heads_k"] == kv_heads  # the kernel's own GQA
    else:
        assert call["causal"] is True and call["softmax_scale"] == scale and call["heads_k"] == kv_heads
        assert call["window_size"] == (-1, -1)  # left at its default: causal comes from `causal`


def test_dropout_only_where_the_kernel_takes_it():
    rec = Recorder()
    q, k, v = _inputs(2, 2)
    varlen.call_varlen(flash_attn_2(rec), "flash_attn.flash_attn_varlen_func", q, k, v, CU, CU, 7, 7, dropout=0.0)
    assert rec.calls[-1]["dropout_p"] == 0.0
    rec2 = Recorder()
    # torch's varlen_attn has no dropout: training with dropout > 0 still calls it without the keyword.
    varlen.call_varlen(torch_211(rec2), "torch", q, k, v, CU, CU, 7, 7, dropout=0.1)
    assert set(rec2.calls[-1]) == {"window_size", "scale", "heads_k"}


def test_unknown_signature_fails_with_a_message():
    def varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, mask_mod=None):
        raise AssertionError("must not be called")

    q, k, v = _inputs(2, 2)
    with pytest.raises(RuntimeError, match="window_size/is_causal/causal"):
        varlen.call_varlen(varlen_attn, "torch", q, k, v, CU, CU, 7, 7)


def test_prescaled_query_equals_scale_argument():
    # torch 2.10 has no scale argument: the adapter folds the scale into q.
    q, k, v = _inputs(2, 2, d=16)
    a = varlen.call_varlen(torch_210(Recorder()), "torch", q, k, v, CU, CU, 7, 7, scale=0.1)
    b = varlen.call_varlen(torch_211(Recorder()), "torch", q, k, v, CU, CU, 7, 7, scale=0.1)
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    assert not math.isclose(0.1, 1 / math.sqrt(16))


def test_installed_torch_signature_is_understood():
    """The torch in this environment: its varlen_attn's signature has a causal argument we know."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        pytest.skip("this torch has no torch.nn.attention.varlen")
    plan = varlen.call_plan(varlen_attn, "torch.nn.attention.varlen.varlen_attn")
    assert plan.causal in ({"window_size": (-1, 0)}, {"is_causal": True})


def test_attention_function_goes_through_the_adapter(monkeypatch):
    """The transformers attention function: [1, H, T, D] in, [1, T, H, D] out, via call_varlen."""
    rec = Recorder()
    monkeypatch.setattr(varlen, "kernel_function", lambda: (torch_211(rec), "torch.nn.attention.varlen.varlen_attn"))
    q, k, v = (t.transpose(0, 1)[None].to(torch.bfloat16) for t in _inputs(4, 2))

    # The device check is the only CUDA-specific step: skip it to run the rest on CPU.
    monkeypatch.setattr(varlen, "_require_cuda", lambda query: None)
    out, weights = varlen.attention(
        type("M", (), {"training": False})(),
        q,
        k,
        v,
        None,
        scaling=0.25,
        cu_seq_lens_q=CU,
        cu_seq_lens_k=CU,
        max_length_q=7,
        max_length_k=7,
    )
    assert weights is None and out.shape == (1, int(CU[-1]), 4, 8) and out.dtype == torch.bfloat16
    ref = _reference(*(t[0].transpose(0, 1) for t in (q, k, v)), 0.25)
    torch.testing.assert_close(out[0], ref, rtol=2e-2, atol=2e-2)
    assert rec.calls[0]["window_size"] == (-1, 0) and rec.calls[0]["heads_k"] == 4


def test_auto_kernel_is_logged(capsys):
    from training.loop import _resolve_kernel

    assert _resolve_kernel("auto", torch.device("cpu")) == "sdpa-doc"
    # stdout, with the run's other progress lines: stderr holds only error lines
    out = capsys.readouterr().out
    assert "--kernel auto: sdpa-doc (torch scaled_dot_product_attention" in out
    assert _resolve_kernel("flex", torch.device("cpu")) == "flex"
    assert capsys.readouterr().out == ""
