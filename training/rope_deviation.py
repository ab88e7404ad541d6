"""The RoPE deviation D of arXiv:2411.13476, Eq. 4: how much attention changes when every position is shifted.

    from training.rope_deviation import window_deviation
    dev = window_deviation(bf16_model, token_ids, delta1=0, delta2=16)   # dev.d, dev.per_token

RoPE makes the logit q_i·k_j depend only on i − j, so running a window at positions Δ, Δ+1, …
should give the same attention for every Δ; in bf16 it does not (the paper's Section 2):

  D(X, Δ1, Δ2) = Σ_{l,h} Σ_{j=1..L} n_j Σ_{i=1..L} |ATTN^{l,h}_ij(X, Δ1) − ATTN^{l,h}_ij(X, Δ2)|
                 with n_j = 1/(L − j + 1), the number of unmasked entries of causal column j.

This module holds the one computation of D: the column sums of |softmax rows(Δ1) − softmax
rows(Δ2)| per layer (`attention_differences`, in blocks of rows, batched over shifts, float64
softmax and differences), their weighting by n (`key_weights`, `LayerDiff.head_d`), and
`window_deviation`, D of one window on a model, which the in-loop probe (training.probes) logs
during training. The RoPE diagnostic (harness.diagnose.rope: many shifts, samples, error sources,
Eq. 5) builds on the same functions, so the probe and `harness diagnose rope` agree on the same
weights (tests/training_loop/test_probes.py).

Memory stays bounded: rows are built one layer at a time, in blocks of query rows sized by
`max_bytes`, never a layers × heads × L × L tensor.

Legend: q_HLD = H heads × L positions × head dim D; cols_HL = per-head column sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# Names users type -> torch dtype names. fp64 is the reference precision.
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}
_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "float64": "fp64",
    "double": "fp64",
}


def canonical_dtype(name: str) -> str:
    """'bfloat16' -> 'bf16'; raises ValueError for unknown names."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}")
    return key


def torch_dtype(name: str):
    import torch

    return getattr(torch, DTYPES[canonical_dtype(name)])


DEFAULT_MAX_BYTES = 1 << 28
# On CUDA: this share of the free memory for row blocks, the same again for stored q/k.
CUDA_MEMORY_SHARE = 0.3
# On CPU a block of rows larger than this leaves the caches: several shifts at 16-32 MB per block
# ran 1.6-4x faster than one shift per 256 MB block (L=256-512, 4 heads, one thread).
CPU_BLOCK_BYTES = 1 << 25
# On CPU the float64 steps after each block's product run on chunks of heads of at most this many
# bytes of rows (a core's L2 on current x86 server parts): see attention_differences.
CPU_CHUNK_BYTES = 1 << 21


def working_bytes(batch_bytes: int | None, device) -> int:
    """The memory for batching shifts in one measure(): `batch_bytes` when given, else by device.

    On a GPU the CPU budget would hold one 7B/L=4096 layer's q/k for a single shift at a time: one
    batch per shift, the Δ2 rows rebuilt per shift, hundreds of thousands of small kernels. A share
    of the free memory lets all 19 shifts of a layer go through each block of rows together.
    """
    if batch_bytes is not None:
        return int(batch_bytes)
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return max(DEFAULT_MAX_BYTES, int(free * CUDA_MEMORY_SHARE))
    return DEFAULT_MAX_BYTES


@dataclass
class LayerDiff:
    cols_HL: torch.Tensor  # Σ_i |P1_ij − P2_ij| per head and key position j (float64)
    logit_first_H: torch.Tensor  # Σ_i |A1_i1 − A2_i1| per head (float64)

    def head_d(self):
        """Eq. 4 restricted to this layer, per head."""
        return (self.cols_HL * key_weights(self.cols_HL.shape[-1], self.cols_HL.device)).sum(-1)


def key_weights(length: int, device=None):
    """n = [1/L, 1/(L−1), …, 1]: column j (0-based) of a causal L×L matrix has L − j entries."""
    import torch

    return 1.0 / torch.arange(length, 0, -1, dtype=torch.float64, device=device)


def model_product(kernel: str, dtype: str) -> str:
    """Precision of the q·k product each kernel uses for a model in `dtype`."""
    d = canonical_dtype(dtype)
    if kernel == "eager" or d in ("fp32", "fp64"):
        return d
    return "fp32"  # sdpa / FlashAttention accumulate and keep scores in float32


def expand_kv(k_HLD, num_heads: int):
    groups = num_heads // k_HLD.shape[0]
    return k_HLD if groups == 1 else k_HLD.repeat_interleave(groups, dim=0)


# Query rows per block at most: past the first blocks, a block's keys stop at its last row, so
# small blocks skip most of the masked upper triangle (about half the work at long L).
MAX_BLOCK_ROWS = 256


def attention_difference(
    q1_HLD, k1_HLD, q2_HLD, k2_HLD, scaling: float, product: str, max_bytes: int = DEFAULT_MAX_BYTES
) -> LayerDiff:
    """Column sums of |softmax rows(Δ1) − softmax rows(Δ2)| for one layer, in blocks of rows.

    k may have fewer (grouped) heads than q. Softmax and differences are in float64.
    """
    return attention_differences([(q1_HLD, k1_HLD)], q2_HLD, k2_HLD, scaling, product, max_bytes)[0]


def attention_differences(
    qk1,
    q2_HLD,
    k2_HLD,
    scaling: float,
    product: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    batch_bytes=None,
    chunk_bytes: int | None = None,
) -> list[LayerDiff]:
    """attention_difference for several (q1, k1) against one (q2, k2), the shifts batched.

    The Δ2 rows of a block are built once for all shifts, and the shifts go through each block's
    product, softmax and difference together, in batches of at most `batch_bytes` of float64 rows
    (None: all at once). The block of rows is sized by `max_bytes` alone, as for one shift: the
    product's rounding depends on the block's shape (not on the batch), so results do not depend
    on how many shifts share a batch.

    `chunk_bytes` (CPU): the float64 steps after the product (mask, softmax, difference, column
    sums) go through a block a few heads at a time, at most this many bytes of rows per chunk, so
    their five passes over the rows stay in the core's cache instead of streaming a whole block
    (9 heads x 256 rows x 1024 keys is 19 MB) through memory each time: 1.6-1.8x on these steps
    alone; end to end on SmolLM2 (CPU, sources on) 1.00-1.01x (benchmarks/RESULTS.md). These steps work row by row and head by head, so the chunking
    changes no rounding (tests check equality). None: all heads at once (GPUs).
    """
    import torch

    num_heads, length, _ = q2_HLD.shape
    p = torch_dtype(product)
    # Cast before expanding grouped kv heads: the same values, a third of the conversions.
    q2, k2 = q2_HLD.to(p), expand_kv(k2_HLD.to(p), num_heads)
    device = q2_HLD.device
    rows, per_batch = _block_sizes(num_heads, length, len(qk1), max_bytes, batch_bytes)
    batches = _stack_shifts(qk1, per_batch, p, num_heads)
    cols = torch.zeros(len(qk1), num_heads, length, dtype=torch.float64, device=device)
    firsts = torch.zeros(len(qk1), num_heads, dtype=torch.float64, device=device)
    keys = torch.arange(length, device=device)
    for r0 in range(0, length, rows):
        r1 = min(length, r0 + rows)
        future = keys[None, :r1] > keys[r0:r1, None]  # [rows, r1]: keys after the query
        a2 = _block_logits(q2[:, r0:r1], k2[:, :r1], scaling)
        a2_first = a2[..., 0].to(torch.float64)
        p2 = torch.empty(a2.shape, dtype=torch.float64, device=device)
        for h0, h1 in _head_chunks(num_heads, 1, r1 - r0, r1, chunk_bytes):
            p2[h0:h1] = torch.softmax(a2[h0:h1].masked_fill_(future, float("-inf")).to(torch.float64), dim=-1)
        del a2
        for n, (q1, k1) in enumerate(batches):
            s0, s1 = n * per_batch, n * per_batch + q1.shape[0]
            a1 = _block_logits(q1[:, :, r0:r1], k1[:, :, :r1], scaling)  # [s, H, rows, r1]
            firsts[s0:s1] += (a1[..., 0].to(torch.float64) - a2_first).abs_().sum(-1)
            if _fuses(device):
                cols[s0:s1, :, :r1] += _diff_colsum_cuda(a1, p2, future)
                del a1
                continue
            for h0, h1 in _head_chunks(num_heads, s1 - s0, r1 - r0, r1, chunk_bytes):
                p1 = torch.softmax(a1[:, h0:h1].masked_fill_(future, float("-inf")).to(torch.float64), dim=-1)
                cols[s0:s1, h0:h1, :r1] += p1.sub_(p2[h0:h1]).abs_().sum(-2)
                del p1
            del a1
    return [LayerDiff(cols[i], firsts[i]) for i in range(len(qk1))]


def _block_sizes(num_heads: int, length: int, shifts: int, max_bytes: int, batch_bytes) -> tuple[int, int]:
    """(query rows per block, shifts per batch): a block's rows sized by `max_bytes` for one shift,
    as many shifts per batch as `batch_bytes` of float64 rows hold (None: all of them)."""
    # About five float64 [H, rows, L] tensors live at once per shift (logits, probabilities, diff).
    rows = max(1, min(length, MAX_BLOCK_ROWS, max_bytes // (5 * 8 * num_heads * length)))
    per_batch = shifts
    if batch_bytes is not None:
        per_batch = max(1, min(per_batch, batch_bytes // (4 * 8 * num_heads * rows * length)))
    return rows, per_batch


def _stack_shifts(qk1, per_batch: int, p, num_heads: int) -> list:
    """[S, H, L, D] stacks of q and (expanded) k in the product dtype, one pair per batch of shifts."""
    import torch

    return [
        (
            torch.stack([q.to(p) for q, _ in qk1[b : b + per_batch]]),
            torch.stack([expand_kv(k.to(p), num_heads) for _, k in qk1[b : b + per_batch]]),
        )
        for b in range(0, len(qk1), per_batch)
    ]


def _head_chunks(
    num_heads: int, shifts: int, block_rows: int, width: int, chunk_bytes: int | None
) -> list[tuple[int, int]]:
    """Head ranges whose float64 rows [shifts, heads, block_rows, width] fit chunk_bytes (None: all heads)."""
    step = num_heads
    if chunk_bytes is not None:
        step = max(1, min(num_heads, chunk_bytes // (8 * shifts * block_rows * width)))
    return [(h0, min(num_heads, h0 + step)) for h0 in range(0, num_heads, step)]


def _softmax_diff_colsum(a1, p2, future):
    """Σ over a block's rows of |softmax(a1, future keys masked, in float64) − p2|: [s, H, rows, keys]
    logits in the product dtype and [H, rows, keys] float64 Δ2 rows give [s, H, keys] float64."""
    import torch

    p1 = torch.softmax(a1.masked_fill(future, float("-inf")).to(torch.float64), dim=-1)
    return (p1 - p2).abs().sum(-2)


# CUDA: the float64 steps after each block's product are memory-bound (about 90 bytes moved per
# logit in eager mode: a float64 copy, softmax, difference, abs, sum); torch.compile fuses them into
# a few kernels that read the logits and the Δ2 rows once or twice. Only the order of float64 sums
# changes (tests/diagnose: equal to the eager steps within 1e-12 relative). Set to False, or any
# compile failure, and the eager steps run.
FUSE_ON_CUDA = True
_fused: dict[str, Any] = {}


def _fused_diff_colsum():
    """The compiled _softmax_diff_colsum (shapes dynamic: each block has its own key count), or None
    once compiling has failed on this machine (then the eager steps run, saying so once)."""
    if "fn" not in _fused:
        import torch

        _fused["fn"] = torch.compile(_softmax_diff_colsum, dynamic=True)
    return _fused["fn"]


def _fuses(device) -> bool:
    return device.type == "cuda"


def _diff_colsum_cuda(a1, p2, future):
    fn = _fused_diff_colsum() if FUSE_ON_CUDA else None
    if fn is not None:
        try:
            return fn(a1, p2, future)
        except Exception as exc:  # noqa: BLE001 - no Triton / compiler here: the eager steps give the same numbers
            import warnings

            warnings.warn(f"diagnose: fused float64 steps unavailable ({type(exc).__name__}); running them eagerly")
            _fused["fn"] = None
    return _softmax_diff_colsum(a1, p2, future)


def _block_logits(q, k, scaling: float):
    """q·kᵀ·scaling in q's dtype, as precision.logits computes it (before its float64 cast).

    -inf is exact in every product dtype, so callers mask future keys before casting to float64.
    """
    import torch

    return torch.matmul(q, k.transpose(-1, -2)).mul_(scaling)


def check_full_attention(model, length: int, fix: str) -> None:
    """Refuse a sliding-window model measured past its window: the capture's causal kernels do not
    apply the window, so D would describe attention the model never computes."""
    from harness.core.errors import UserError

    window = getattr(model.config, "sliding_window", None)
    if window and getattr(model.config, "use_sliding_window", True) and window < length:
        raise UserError(
            f"the model uses sliding-window attention ({window} tokens), which the RoPE measurement's causal "
            f"kernels do not apply: {fix} up to {window}"
        )


@dataclass
class Deviation:
    """D of one window (Eq. 4) and its terms per key position (they add up to D)."""

    d: float
    per_token: list[float]

    @property
    def first_token_share(self) -> float:
        """The share of D at the first key (the paper's Figure 1, middle: it dominates in bf16)."""
        return self.per_token[0] / self.d if self.d else 0.0


def window_deviation(model, ids, delta1: int, delta2: int, *, kernel: str = "eager", model_dtype: str = "bf16"):
    """D(ids, Δ1, Δ2) of Eq. 4 on `model` (already in `model_dtype`, eval mode): one window of token ids.

    The base model (no LM head) runs at positions Δ2, Δ2 + 1, … and then at Δ1, …, with `kernel`
    (training.attention_capture: eager as the paper, the product in the model dtype), its post-RoPE
    q/k captured in every layer; each layer's rows are compared in float64 by
    `attention_differences` and weighted by `key_weights`. The same numbers, bit for bit, as
    harness.diagnose.rope.measure with shifts=(Δ1,), delta2=Δ2, seq_len=len(ids), no sources.
    """
    import torch

    from training.attention_capture import attention_layers, capture_attention

    layers = attention_layers(model)
    check_full_attention(model, len(ids), "pass a --probe-rope-len")
    device = next(model.parameters()).device
    product = model_product(kernel, model_dtype)
    budget = working_bytes(None, device)
    block = budget if device.type == "cuda" else min(budget, CPU_BLOCK_BYTES)
    head_bytes = None if device.type == "cuda" else CPU_CHUNK_BYTES
    base = getattr(model, model.base_model_prefix, model)
    window = torch.tensor([list(ids)], device=device)
    captured: dict[int, dict[int, tuple[Any, Any]]] = {delta2: {}, delta1: {}}
    for shift, seen in captured.items():

        def keep(n, q, k, seen=seen):
            seen[n] = (q[0], k[0])

        positions = torch.arange(shift, shift + window.shape[1], device=device)[None]
        with torch.no_grad(), capture_attention(model, kernel, keep):
            base(input_ids=window, position_ids=positions, use_cache=False)
    heads, cols = [], None
    for layer in layers:
        n = layer.layer_idx
        (diff,) = attention_differences(
            [captured[delta1][n]], *captured[delta2][n], layer.scaling, product, DEFAULT_MAX_BYTES, block, head_bytes
        )
        heads.append(diff.head_d().sum().item())
        cols = diff.cols_HL.sum(0) if cols is None else cols + diff.cols_HL.sum(0)
    assert cols is not None
    per_token = (cols * key_weights(window.shape[1], device)).cpu().tolist()
    return Deviation(sum(heads), per_token)
