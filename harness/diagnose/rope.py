"""The RoPE relative-position check of arXiv:2411.13476, Section 2 (Eq. 4 and 5, Figure 1).

Run it through the CLI: `harness diagnose rope --ckpt PATH --out DIR` (harness/commands/diagnose.py),
or call `measure(model, samples, Settings(...), "bf16")` on a loaded model (its per-sample numbers
are reduced over samples by harness.diagnose.summary).

RoPE makes the logit q_i·k_j depend only on i − j, so adding the same shift Δ to every position
id should not change attention. What this module measures (positions Δ, Δ+1, …, Δ+L−1):

  D(X, Δ1, Δ2) = Σ_{l,h} Σ_{j=1..L} n_j Σ_{i=1..L} |ATTN^{l,h}_ij(X, Δ1) − ATTN^{l,h}_ij(X, Δ2)|
                 with n = [1/L, 1/(L−1), …, 1], i.e. n_j = 1/(L − j + 1)              (Eq. 4)

  where ATTN is the causal softmax attention matrix (rows i = queries, columns j = keys), so n_j
  divides column j by its number of unmasked entries.

  per-token difference at key position j: Σ_{l,h} n_j Σ_i |ATTN_ij(Δ1) − ATTN_ij(Δ2)|, the terms
  of Eq. 4 before the sum over j (they add up to D); reported for Δ1 = 0 (Figure 1, middle).

  D_logit = (1/T) Σ_{l,h} Σ_{i=1..T} |A^{l,h}_{i,1}(Δ1) − A^{l,h}_{i,1}(Δ2)|                (Eq. 5)

  with A the logits as softmax sees them, q_i·k_j/√d (the model's scaling), for the first key
  j = 1, Δ1 = 0, Δ2 = --delta2, at each length T of `logit_lengths` (Figure 1, right).

Two measurements per (checkpoint, dtype), both averaged over text samples:

- "model": the model runs at Δ2 and then at each Δ1, in its dtype and with the chosen kernel;
  q/k are captured after RoPE in every layer (so errors carried through earlier layers count) and
  the rows are rebuilt from them. The logit product is taken at the precision of the kernel:
  the model dtype for eager (a bf16 matmul), at least float32 for sdpa/varlen (FlashAttention-style
  fp32 scores). Softmax and differences are always in float64.
- "sources": the pre-RoPE q/k captured in the Δ2 run are fixed, and RoPE plus the logit product
  are redone by harness.diagnose.precision with each error source alone at the model's precision
  (the rest float64), all of them low, and none (baseline). interaction = all_low − Σ single.

Memory stays bounded: rows are built one layer at a time, in blocks of query rows sized by
`max_bytes`, never a layers × heads × L × L tensor.

Speed (issue 16): the Δ1 runs go in groups whose captured q/k fit the budget; then each layer
compares the whole group with its Δ2 rows in one batch (`attention_differences`: one batched
product, softmax and difference per block of rows for all shifts), and the error sources do the
same per precision config. The Δ2 rows are built once per layer (per config), not once per shift,
and the number of kernel launches no longer grows with the shifts. On CUDA the batching budget is a
share of the free memory (`working_bytes`). Blocks of rows keep their size (`max_bytes`, per
shift): the product's rounding depends on the block's shape, so results are unchanged.

Legend: q_HLD = H heads × L positions × head dim D; cols_HL = per-head column sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.core.errors import UserError
from harness.diagnose.capture import (
    attention_layers,
    capture_attention,
    capture_projections,
    rope_angles_fp64,
    rotary_module,
)
from harness.diagnose.precision import (
    HIGH,
    SOURCES,
    Precision,
    apply_rope,
    canonical_dtype,
    logits,
    low_precision,
    rope_cos_sin,
    torch_dtype,
)
from harness.diagnose.summary import LOGIT_DELTA1, PER_TOKEN_DELTA1, summarise

if TYPE_CHECKING:
    import torch

# Figure 1 (left): Δ1 values with Δ2 = 16 fixed.
DEFAULT_SHIFTS = (0, 2, 4, 6, 8, 10, 12, 14, 15, 17, 18, 20, 22, 50, 100, 200, 500, 1000, 2000)
DEFAULT_DELTA2 = 16
# Figure 1 (right): the sequence lengths of the logit difference.
DEFAULT_LOGIT_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
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


@dataclass(frozen=True)
class Settings:
    shifts: tuple[int, ...] = DEFAULT_SHIFTS
    delta2: int = DEFAULT_DELTA2
    seq_len: int = 4096
    logit_lengths: tuple[int, ...] = DEFAULT_LOGIT_LENGTHS
    kernel: str = "eager"
    rope_angles: str = "model"  # "model": transformers' own (float32) angles; "fp64": recomputed in float64
    sources: bool = True
    max_bytes: int = 1 << 28  # working memory of one block of attention rows (of one shift)
    # Working memory for batching shifts (stored q/k, rotated q/k, batched row blocks); None: by
    # device (DEFAULT_MAX_BYTES on CPU, a share of the free memory on CUDA; see working_bytes).
    batch_bytes: int | None = None

    def needed_length(self) -> int:
        return max([self.seq_len, *self.logit_lengths])


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


def _expand_kv(k_HLD, num_heads: int):
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
    q2, k2 = q2_HLD.to(p), _expand_kv(k2_HLD.to(p), num_heads)
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
            torch.stack([_expand_kv(k.to(p), num_heads) for _, k in qk1[b : b + per_batch]]),
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


def first_logit_difference(q1_HLD, k1_HLD, q2_HLD, k2_HLD, scaling: float, product: str):
    """Σ_i |A1_i1 − A2_i1| per head: the first-key logits only (Eq. 5 before the 1/T)."""
    num_heads = q1_HLD.shape[0]
    a1 = logits(q1_HLD, _expand_kv(k1_HLD[:, :1], num_heads), scaling, product)[..., 0]
    a2 = logits(q2_HLD, _expand_kv(k2_HLD[:, :1], num_heads), scaling, product)[..., 0]
    return (a1 - a2).abs().sum(-1)


@dataclass
class _Sample:
    """One text sample's results."""

    d: list = field(default_factory=list)  # D per shift
    d_layer: list = field(default_factory=list)  # [shift][layer]
    per_token: object = None  # [L] for Δ1 = PER_TOKEN_DELTA1
    d_logit: list = field(default_factory=list)  # per logit length
    sources: dict = field(default_factory=dict)  # config name -> D per shift


def source_configs(model_dtype: str) -> dict[str, Precision]:
    """baseline (all float64), each source alone at the model's precision, and all of them."""
    low = low_precision(model_dtype)
    configs = {"baseline": HIGH}
    for s in SOURCES:
        configs[s] = HIGH.with_(**{s: getattr(low, s)})
    configs["all_low"] = low
    return configs


class _Recorder:
    """The callbacks of one model: stores the Δ2 run, compares each Δ1 run against it."""

    def __init__(self, scaling: float, product: str, max_bytes: int):
        self.scaling, self.product, self.max_bytes = scaling, product, max_bytes
        self.mode = "off"
        self.ref: dict[int, tuple[Any, Any]] = {}  # layer -> (q, k) of the stored Δ2 run
        self.pre: dict[int, tuple[Any, Any]] = {}
        self.logit_first = 0.0
        self.want_pre = False
        self.pending: dict[int, list] = {}  # layer -> (q, k) of each Δ1 run since the last flush

    def on_attention(self, layer, q, k):
        q, k = q[0], k[0]
        if self.mode == "store":
            self.ref[layer] = (q, k)
        elif self.mode == "compare":
            # Kept until a group of shifts has run: then each layer compares them in one batch.
            self.pending.setdefault(layer, []).append((q, k))
        elif self.mode == "store_first":
            self.ref[layer] = (q, k[:, :1])
        elif self.mode == "compare_first":
            self.logit_first += float(first_logit_difference(q, k, *self.ref[layer], self.scaling, self.product).sum())

    def on_projection(self, layer, q, k):
        if self.mode == "store" and self.want_pre:
            self.pre[layer] = (q[0], k[0])


def measure(model, samples, settings: Settings, model_dtype: str, progress: bool = True) -> dict:
    """Run the diagnostic on `model` (already in `model_dtype`, eval mode) over token-id samples.

    Each sample is a list of at least settings.needed_length() token ids. Returns the JSON-ready
    result of harness.diagnose.report's "runs" entries (without the checkpoint name).
    """
    import contextlib

    import torch
    from tqdm.auto import tqdm

    model_dtype = canonical_dtype(model_dtype)
    run = _Measurement(model, samples, settings, model_dtype)
    bar = tqdm(
        total=len(samples) * run.steps_per_sample(),
        desc=f"rope diagnostic {model_dtype}",
        disable=not progress,
        unit="step",
    )
    per_sample: list[_Sample] = []
    with contextlib.ExitStack() as stack, torch.no_grad():
        stack.enter_context(capture_attention(model, settings.kernel, run.rec.on_attention))
        if settings.sources:
            stack.enter_context(capture_projections(model, run.rec.on_projection))
        if settings.rope_angles == "fp64":
            stack.enter_context(rope_angles_fp64(model))
        for tokens in samples:
            per_sample.append(run.sample(tokens, bar))
    bar.close()
    return summarise(per_sample, settings, run.configs, model_dtype, run.product, run.num_layers, run.layers)


class _Measurement:
    """One model's measurement: its layers, the precision and memory budgets, the recorder its
    hooks feed, and the runs and comparisons of each text sample. Refuses a model or samples it
    cannot measure."""

    def __init__(self, model, samples, settings: Settings, model_dtype: str):
        self.settings = settings
        self.layers = attention_layers(model)
        self.num_layers, self.scaling = len(self.layers), self.layers[0].scaling
        self.device = next(model.parameters()).device
        self.base = getattr(model, model.base_model_prefix, model)
        self.product = model_product(settings.kernel, model_dtype)
        self.budget = working_bytes(settings.batch_bytes, self.device)
        # Float64 rows of the shifts batched in one block; on CPU kept small enough to stay in cache.
        self.block = self.budget if self.device.type == "cuda" else min(self.budget, CPU_BLOCK_BYTES)
        self.head_bytes = None if self.device.type == "cuda" else CPU_CHUNK_BYTES
        self.rec = _Recorder(self.scaling, self.product, settings.max_bytes)
        self.rec.want_pre = settings.sources
        self.rotary = rotary_module(model) if settings.sources else None
        if self.rotary is not None and self.rotary.inv_freq.numel() * 2 != self.layers[0].head_dim:
            raise UserError(
                "partial rotary embeddings are not supported by the source decomposition: pass --no-sources"
            )
        window = getattr(model.config, "sliding_window", None)
        if window and getattr(model.config, "use_sliding_window", True) and window < settings.needed_length():
            raise UserError(
                f"the model uses sliding-window attention ({window} tokens), which the diagnostic's causal kernels "
                f"do not apply: pass --seq-len and --logit-lengths up to {window}"
            )
        if any(len(t) < settings.needed_length() for t in samples):
            raise ValueError(
                f"every sample needs {settings.needed_length()} tokens (the longest of --seq-len and --logit-lengths)"
            )
        self.configs = source_configs(model_dtype)

    def steps_per_sample(self) -> int:
        """Progress units: forward passes, plus one per (layer, precision config, shift) of the source breakdown."""
        s = self.settings
        sources = self.num_layers * len(self.configs) * len(s.shifts) if s.sources else 0
        return 1 + len(s.shifts) + 2 * len(s.logit_lengths) + sources

    def forward(self, ids, shift: int, mode: str) -> None:
        """The model at positions shift, shift + 1, ..., its hooks recording in `mode`."""
        import torch

        self.rec.mode = mode
        positions = torch.arange(shift, shift + ids.shape[1], device=self.device)[None]
        self.base(input_ids=ids, position_ids=positions, use_cache=False)
        self.rec.mode = "off"

    def sample(self, tokens, bar) -> _Sample:
        """Every measurement of one text sample."""
        import torch

        s, rec = self.settings, self.rec
        shifts = list(s.shifts)
        res = _Sample()
        ids = torch.tensor([tokens[: s.seq_len]], device=self.device)
        self.forward(ids, s.delta2, "store")
        bar.update()
        # Δ1 runs in groups whose captured q/k fit the budget; each layer then compares the
        # whole group against its Δ2 rows in one batch (attention_differences).
        per_shift = sum(q.numel() * q.element_size() + k.numel() * k.element_size() for q, k in rec.ref.values())
        group = max(1, self.budget // max(1, per_shift))
        for g0 in range(0, len(shifts), group):
            self._shift_group(res, ids, shifts[g0 : g0 + group], bar)
        rec.ref = {}
        if s.sources:
            res.sources = _sources(
                rec.pre,
                self.rotary,
                self.scaling,
                shifts,
                s.delta2,
                self.configs,
                s.max_bytes,
                bar.update,
                self.budget,
                self.block,
                self.head_bytes,
            )
            rec.pre = {}
        self._logit_differences(res, tokens, bar)
        return res

    def _shift_group(self, res: _Sample, ids, chunk: list[int], bar) -> None:
        """D (per layer, and per token at Δ1 = PER_TOKEN_DELTA1) for a group of shifts run together."""
        rec, num_layers = self.rec, self.num_layers
        rec.pending = {}
        for shift in chunk:
            self.forward(ids, shift, "compare")
        diffs = []
        for i in range(num_layers):
            diffs.append(
                attention_differences(
                    rec.pending.pop(i),
                    *rec.ref[i],
                    self.scaling,
                    self.product,
                    self.settings.max_bytes,
                    self.block,
                    self.head_bytes,
                )
            )
            bar.update(len(chunk) / num_layers)
        for j, shift in enumerate(chunk):
            heads = [diffs[i][j].head_d().sum().item() for i in range(num_layers)]
            res.d_layer.append(heads)
            res.d.append(sum(heads))
            if shift == PER_TOKEN_DELTA1:
                cols = sum(diffs[i][j].cols_HL.sum(0) for i in range(num_layers))
                res.per_token = (cols * key_weights(self.settings.seq_len, self.device)).cpu().tolist()

    def _logit_differences(self, res: _Sample, tokens, bar) -> None:
        """D_logit (Eq. 5) at each of the logit lengths."""
        import torch

        for length in self.settings.logit_lengths:
            part = torch.tensor([tokens[:length]], device=self.device)
            self.forward(part, self.settings.delta2, "store_first")
            self.rec.logit_first = 0.0
            self.forward(part, LOGIT_DELTA1, "compare_first")
            res.d_logit.append(self.rec.logit_first / length)
            self.rec.ref = {}
            bar.update(2)


def _sources(
    pre,
    rotary,
    scaling,
    shifts,
    delta2,
    configs,
    max_bytes,
    progress=None,
    group_bytes=None,
    batch_bytes=None,
    chunk_bytes=None,
) -> dict[str, list[float]]:
    """D per shift for each precision config, from the fixed pre-RoPE q/k of every layer."""
    import torch

    out = {name: [0.0] * len(shifts) for name in configs}
    device = rotary.inv_freq.device
    inv_freq, attention_scaling = rotary.inv_freq, rotary.attention_scaling
    cache: dict = {}

    def cos_sin(shift, angles, length) -> tuple[torch.Tensor, torch.Tensor]:
        key = (shift, angles)
        if key not in cache:
            positions = torch.arange(shift, shift + length, device=device)
            cache[key] = rope_cos_sin(positions, inv_freq, attention_scaling, angles)
        return cache[key]

    for layer in sorted(pre):
        q, k = (t.to(torch.float64) for t in pre[layer])
        num_heads, length, head_dim = q.shape
        # Rotated q/k of this many shifts at once (float64, and once more stacked by
        # attention_differences), so the Δ2 rows are shared by them.
        group = max(1, (group_bytes or max_bytes) // (2 * (num_heads + k.shape[0]) * length * head_dim * 8))
        for name, prec in configs.items():
            q2 = apply_rope(q, *cos_sin(delta2, prec.angles, length), prec.rotated)
            k2 = apply_rope(k, *cos_sin(delta2, prec.angles, length), prec.rotated)
            for g0 in range(0, len(shifts), group):
                qk1 = []
                for shift in shifts[g0 : g0 + group]:
                    cos, sin = cos_sin(shift, prec.angles, length)
                    qk1.append((apply_rope(q, cos, sin, prec.rotated), apply_rope(k, cos, sin, prec.rotated)))
                diffs = attention_differences(qk1, q2, k2, scaling, prec.product, max_bytes, batch_bytes, chunk_bytes)
                for s, diff in enumerate(diffs, start=g0):
                    out[name][s] += diff.head_d().sum().item()
            if progress is not None:
                progress(len(shifts))
    return out
