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

The computation of D itself (the q/k capture, the float64 row differences, the weights n) is
training.rope_deviation's, and training.attention_capture's: the in-loop RoPE probe of `harness
train` (training.probes) logs D with the same functions, so both give the same number on the same
weights. This module adds the shifts, samples, Eq. 5 and the error sources.

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
from harness.diagnose.capture import capture_projections, rope_angles_fp64, rotary_module
from harness.diagnose.precision import HIGH, SOURCES, Precision, apply_rope, logits, low_precision, rope_cos_sin
from harness.diagnose.summary import LOGIT_DELTA1, PER_TOKEN_DELTA1, summarise
from training.attention_capture import attention_layers, capture_attention
from training.rope_deviation import (
    CPU_BLOCK_BYTES,
    CPU_CHUNK_BYTES,
    attention_differences,
    canonical_dtype,
    check_full_attention,
    expand_kv,
    key_weights,
    model_product,
    working_bytes,
)

if TYPE_CHECKING:
    import torch

# Figure 1 (left): Δ1 values with Δ2 = 16 fixed.
DEFAULT_SHIFTS = (0, 2, 4, 6, 8, 10, 12, 14, 15, 17, 18, 20, 22, 50, 100, 200, 500, 1000, 2000)
DEFAULT_DELTA2 = 16
# Figure 1 (right): the sequence lengths of the logit difference.
DEFAULT_LOGIT_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


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


def first_logit_difference(q1_HLD, k1_HLD, q2_HLD, k2_HLD, scaling: float, product: str):
    """Σ_i |A1_i1 − A2_i1| per head: the first-key logits only (Eq. 5 before the 1/T)."""
    num_heads = q1_HLD.shape[0]
    a1 = logits(q1_HLD, expand_kv(k1_HLD[:, :1], num_heads), scaling, product)[..., 0]
    a2 = logits(q2_HLD, expand_kv(k2_HLD[:, :1], num_heads), scaling, product)[..., 0]
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
        check_full_attention(model, settings.needed_length(), "pass --seq-len and --logit-lengths")
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
