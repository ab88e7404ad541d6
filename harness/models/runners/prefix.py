"""Greedy generation: prompts prefilled one at a time on a fixed grid, shared prefixes computed once.

    from harness.models.runners.prefix import PrefixEngine
    engine = PrefixEngine(model, eos_id=2, chunk=256, reuse=True)   # eos_id: an id or several
    for done in engine.run(prompt_ids, max_new_tokens):              # as each prompt finishes
        done.index, done.tokens, done.seconds, done.reused_tokens

After its prefill a prompt's keys and values are copied into the decoding rows' buffers; rows
decode together at a fixed width, one attention call per layer and step
(harness/models/runners/decode.py), so the shared prefix cache below only ever holds prompts.

Why this shape. Long-context evaluation is prefill-bound and many prompts of a task share a long
prefix (the instruction and the haystack up to the first needle). Each prompt runs alone, unpadded
(batch of one row: no padding work and no [rows, 1, L, L] mask), and is prefilled in chunks on a
grid fixed by position alone: tokens [0, C), [C, 2C), ... The computation of a chunk depends only
on its tokens and the tokens before it, so a chunk that two prompts share is the same computation
in both. The prompts are run in lexicographic order of their token ids (the depth-first order of
their prefix tree), which puts prompts sharing a prefix next to each other: the KV cache of the
previous prompt is cut back to the last grid chunk both prompts share, and the new prompt continues
from there. Reusing a chunk skips recomputing exactly what would have been recomputed, so reuse
on or off gives bit-identical logits in every dtype, and a prompt's output never depends on which
other prompts ran with it (or how many). The only price is the grid: a prefix shorter than C, or
the part of a shared prefix past its last full chunk, is recomputed.

The KV cache is one growing buffer per layer, stored [batch, seq, heads, dim] so that the prefix
[:, :n] a chunk attends to has the same strides whatever the buffer's capacity; cutting it back is
setting a length (the decoding rows' buffers are head-major instead: rowcache.py says why). No mask is built:
the attention function registered here (`harness_prefix`) attends a chunk to the cached prefix
without a mask and to itself causally, and merges the two by their log-sum-exp on CPU (lower-right
causal attention elsewhere).

Architectures with sliding-window, linear-attention or other non-full cache layers, or attention
modules outside transformers' AttentionInterface, are refused (`PrefixEngine.supported` says why)
and the runner falls back to one plain `generate` per prompt.
"""

from __future__ import annotations

import sys
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from harness.models.runners.common import DECODE_ATTENTION, DECODE_ROWS, keeps_logits, stop_token_ids
from harness.models.runners.decode import DecodeRows, rows_attention
from harness.models.runners.kvcache import GrowingLayer, decode_attention
from harness.models.runners.rowcache import StepKeys

ATTENTION = "harness_prefix"
# The prefill grid, in tokens. A fixed constant per device kind, never tuned per run: the grid shapes
# the arithmetic (bf16 logits depend on where chunks start), so it must not vary between runs.
# 256 on CPU: measured on SmolLM2-135M bf16 at 4K, a chunk of 256 costs no more per token than
# one whole-prompt pass (benchmarks/RESULTS.md), and reuse loses at most 255 tokens per prompt.
# 4096 on CUDA: there a forward pass has a fixed launch cost of milliseconds; measured on an H200
# (benchmarks/RESULTS.md, a ~110M Llama in bf16), prefill of a 4K prompt took 30.4 ms in chunks of
# 1024, 7.9 ms in one of 4096; a 32K prompt 252 ms / 104 ms (66 ms whole).
CHUNK_TOKENS = {"cpu": 256, "cuda": 4096}
DEFAULT_CHUNK = 4096  # other accelerators (mps, xpu): unmeasured, launch-bound like CUDA


def chunk_for(device: str | torch.device) -> int:
    return CHUNK_TOKENS.get(torch.device(device).type, DEFAULT_CHUNK)


# -- KV cache --------------------------------------------------------------------------------
class PrefixCache(Cache):
    def __init__(self) -> None:
        super().__init__(layer_class_to_replicate=GrowingLayer)

    def truncate(self, length: int) -> None:
        for layer in self.layers:
            assert isinstance(layer, GrowingLayer)
            layer.truncate(length)


# -- attention -------------------------------------------------------------------------------
# Where a chunk's attention is two kernel calls merged by log-sum-exp (CPU: its flash kernel returns
# the log-sum-exp, and a materialised lower-right mask would cost a [q, kv] tensor and a key copy per
# query head). Elsewhere PyTorch's lower-right causal bias dispatches to a fused kernel.
LSE_MERGE_DEVICES = {"cpu"}


def _lse_attention_cpu(query, key, value, scale):
    """A chunk of q queries at the end of kv keys: the cached prefix without a mask (query heads of a
    key/value group folded into the query length, so no key is copied), the chunk itself causally,
    merged by log-sum-exp in float32."""
    b, h, q, d = query.shape
    hk = key.shape[1]
    g, prefix = h // hk, key.shape[2] - q
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    folded = query.reshape(b, hk, g * q, d)
    out1, lse1 = flash(folded, key[:, :, :prefix], value[:, :, :prefix], 0.0, False, scale=scale)
    out1, lse1 = out1.reshape(b, h, q, -1), lse1.reshape(b, h, q)
    k2, v2 = key[:, :, prefix:], value[:, :, prefix:]
    if g > 1:
        k2, v2 = k2.repeat_interleave(g, dim=1), v2.repeat_interleave(g, dim=1)
    out2, lse2 = flash(query, k2, v2, 0.0, True, scale=scale)
    top = torch.maximum(lse1, lse2)
    w1, w2 = (lse1 - top).exp()[..., None], (lse2 - top).exp()[..., None]
    return ((out1.float() * w1 + out2.float() * w2) / (w1 + w2)).to(query.dtype)


def _no_cudnn_attention(device: torch.device):
    """CUDA: SDPA without its cuDNN backend. cuDNN builds an execution plan for every new key length,
    and every decoding step has one: measured on an H200, a step of one row took 67 ms while the
    plans were built and 6.7 ms once they were cached (benchmarks/RESULTS.md). FlashAttention and
    the memory-efficient kernel take any length at no set-up cost. Elsewhere: no change."""
    from contextlib import nullcontext

    if device.type != "cuda":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def prefix_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers attention function for one unpadded row: [1, H, q, D] queries at the end of
    [1, Hkv, kv, D] keys (the cache followed by the chunk's own); or a step of the decoding rows,
    whose cache hands over StepKeys (harness/models/runners/decode.py)."""
    if isinstance(key, StepKeys):
        return rows_attention(query, key, value, scaling).transpose(1, 2).contiguous(), None
    if attention_mask is not None or query.shape[0] != 1:
        raise ValueError("harness_prefix attention takes one unpadded row and no mask")
    h, q = query.shape[1], query.shape[2]
    hk, kv = key.shape[1], key.shape[2]
    if q == 1 and h % hk == 0:
        out = decode_attention(query, key, value, scaling)
    elif q == kv:  # a whole prompt in one chunk
        out = F.scaled_dot_product_attention(query, key, value, is_causal=q > 1, scale=scaling, enable_gqa=h != hk)
    elif query.device.type in LSE_MERGE_DEVICES and h % hk == 0:
        out = _lse_attention_cpu(query, key, value, scaling)
    else:
        from torch.nn.attention.bias import causal_lower_right

        g = query.shape[1] // key.shape[1]
        if g > 1:
            key, value = key.repeat_interleave(g, dim=1), value.repeat_interleave(g, dim=1)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=causal_lower_right(q, kv), scale=scaling)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTENTION, prefix_attention)


# -- the engine ------------------------------------------------------------------------------
@dataclass
class Generated:
    index: int  # position in the prompts given to run()
    tokens: list[int]  # greedy continuation, cut before a stop id, at most max_new_tokens
    seconds: float  # own chunks + decoding + an equal share of every chunk it shares with others
    prompt_tokens: int
    reused_tokens: int  # prompt tokens whose KV came from a previous prompt
    prefill_seconds: float = 0.0  # the part of `seconds` spent on the prompt (the rest: decoding)


def token_key(ids: Sequence[int]) -> bytes:
    """ids as 4-byte big-endian words: bytes order is the ids' lexicographic order, and a common
    prefix of k ids is a common prefix of 4k bytes (compared by memcmp, 4 bytes held per token)."""
    words = array("I", ids)
    if sys.byteorder == "little":
        words.byteswap()
    return words.tobytes()


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of a and b (binary search over memcmp'd slices)."""
    lo, hi = 0, min(len(a), len(b))
    va, vb = memoryview(a), memoryview(b)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if va[:mid] == vb[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def reuse_plan(prompts: Sequence[Sequence[int]], chunk: int, reuse: bool) -> tuple[list[int], list[int]]:
    """(order, reused chunks per position in order): lexicographic order, and how many grid chunks
    each prompt takes from the one before it (full chunks inside their common prefix; never the
    chunk holding a prompt's last token, whose logits are needed). In lexicographic order a prompt
    shares at least as long a prefix with the one before it as with any earlier one."""
    keys = [token_key(p) for p in prompts]
    order = sorted(range(len(prompts)), key=keys.__getitem__)
    reused = [0] * len(order)
    if not reuse:
        return order, reused
    for k in range(1, len(order)):
        a, b = order[k - 1], order[k]
        shared = _common_prefix(keys[a], keys[b]) // 4
        reused[k] = min(shared, len(prompts[b]) - 1) // chunk
    return order, reused


def chunk_users(prompts: Sequence[Sequence[int]], order: list[int], reused: list[int], chunk: int) -> list[list[int]]:
    """For each position in order, how many prompts use each of its chunks (its own and reused)."""
    users_of: list[list[int]] = []  # per position in order: a list of node ids, one per chunk
    count: list[int] = []
    chain: list[int] = []
    for k, i in enumerate(order):
        n_chunks = -(-len(prompts[i]) // chunk)
        chain = chain[: reused[k]]
        for _ in range(len(chain), n_chunks):
            count.append(0)
            chain.append(len(count) - 1)
        for node in chain:
            count[node] += 1
        users_of.append(list(chain))
    return [[count[node] for node in nodes] for nodes in users_of]


class PrefixEngine:
    def __init__(
        self, model, eos_id, chunk: int, reuse: bool = True, rows: int | None = None, kernel: str = DECODE_ATTENTION
    ):
        self.model = model
        self.rows = rows or DECODE_ROWS  # the decode width (harness/models/runners/decode.py)
        self.kernel = kernel  # the decoding rows' attention (decode.KERNELS)
        self.stop_ids = frozenset(stop_token_ids(eos_id))  # eos_id: an id, several, or None
        self.chunk = chunk
        self.reuse = reuse
        self._keeps_logits = keeps_logits(model)
        self.device = next(model.parameters()).device

    @staticmethod
    def unsupported_reason(model) -> str | None:
        """Why this model cannot run on the engine (None: it can)."""
        config = model.config
        try:
            layers = DynamicCache(config=config).layers
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # an exotic config the cache cannot read
            return f"its cache layout is unknown ({type(exc).__name__})"
        odd = sorted({type(layer).__name__ for layer in layers if type(layer) is not DynamicLayer})
        if odd:
            return f"it has {', '.join(odd)} cache layers (sliding window or linear attention)"
        if not getattr(model, "_can_set_attn_implementation", lambda: False)():
            return "its attention does not go through transformers' AttentionInterface"
        return None

    def _forward(self, cache: PrefixCache, ids: Sequence[int]) -> torch.Tensor:
        """Run ids after the cache; the logits of the last position ([vocab])."""
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        kwargs = {"logits_to_keep": 1} if self._keeps_logits else {}
        out = self.model(input_ids=x, past_key_values=cache, use_cache=True, **kwargs)
        return out.logits[0, -1]

    def prefill(self, cache: PrefixCache, ids: Sequence[int], start: int) -> torch.Tensor:
        """Chunks of ids from `start` (a grid point, cache already holding ids[:start]); last logits."""
        logits = None
        for s in range(start, len(ids), self.chunk):
            logits = self._forward(cache, ids[s : s + self.chunk])
        assert logits is not None
        return logits

    def run(
        self,
        prompts: Sequence[Sequence[int]],
        max_new: list[int],
        extra_stops: Sequence[frozenset[int]] | None = None,
        min_new: Sequence[int] | None = None,
    ) -> Iterator[Generated]:
        """Every prompt's greedy continuation, yielded as each finishes: prompts are prefilled one at a
        time in prefix order, then decode `rows` at a time (harness/models/runners/decode.py).

        extra_stops[i]: ids that end prompt i's generation besides the engine's (GenerationRequest.
        stop_tokens); min_new[i]: during its first min_new[i] tokens every stop id is masked to -inf."""
        extras = extra_stops or [frozenset()] * len(prompts)
        stops = [self.stop_ids | extra for extra in extras]
        floors = list(min_new or [0] * len(prompts))
        for i in range(len(prompts)):
            if max_new[i] <= 0 or not prompts[i]:  # nothing to generate (or nothing to condition on)
                yield Generated(i, [], 0.0, len(prompts[i]), 0)
        todo = [i for i in range(len(prompts)) if max_new[i] > 0 and prompts[i]]
        order, reused = reuse_plan([prompts[i] for i in todo], self.chunk, self.reuse)
        yield from _Run(self, prompts, max_new, stops, floors, [todo[k] for k in order], reused).generate()

    def model_attention(self):
        """Context: the model attends with `harness_prefix` inside, and as before after."""
        from contextlib import contextmanager

        @contextmanager
        def switched():
            before = self.model.config._attn_implementation
            self.model.set_attn_implementation(ATTENTION)
            try:
                with _no_cudnn_attention(self.device):
                    yield
            finally:
                self.model.set_attn_implementation(before)

        return switched()


class _Run:
    """One call of PrefixEngine.run over prompts in prefix order: the prefix cache, the decoding rows,
    and each prompt's seconds (its own chunks, an equal share of every chunk it shares, its decoding)."""

    def __init__(self, engine: PrefixEngine, prompts, max_new, stops, floors, order: list[int], reused: list[int]):
        self.engine, self.prompts, self.max_new, self.stops, self.floors = engine, prompts, max_new, stops, floors
        self.order, self.reused = order, reused
        self.users = chunk_users(prompts, order, reused, engine.chunk)
        self.cache = PrefixCache()
        self.rows = DecodeRows(engine.model, engine.rows, engine.stop_ids, kernel=engine.kernel)
        self.limits = {i: max_new[i] for i in order}
        self.prefilled: dict[int, tuple[float, int]] = {}  # prompt -> (its share of prefill seconds, reused tokens)
        self.node_seconds: list[float] = []  # seconds of each chunk in the current chain
        self.handed_over = False  # the prefix cache went to a decoding row (memory): nothing left to reuse

    def generate(self) -> Iterator[Generated]:
        for k, i in enumerate(self.order):
            tok, shared, keep = self._prefill(k, i)
            if tok in self.stops[i] or self.max_new[i] <= 1:
                yield Generated(i, [] if tok in self.stops[i] else [tok], shared, len(self.prompts[i]), keep, shared)
            else:
                self.prefilled[i] = (shared, keep)
                yield from self._admit(i, tok)
            while self.rows.full() or (k == len(self.order) - 1 and self.rows.active):
                yield from self._step()

    def _prefill(self, k: int, i: int) -> tuple[int, float, int]:
        """Prompt i (k-th in order) prefilled after what it shares with the one before: (its first
        token, its share of the prefill seconds, the tokens it reused)."""
        engine, ids = self.engine, self.prompts[i]
        keep = 0 if self.handed_over else self.reused[k] * engine.chunk
        self.node_seconds = [] if self.handed_over else self.node_seconds[: self.reused[k]]
        self.handed_over = False
        self.cache.truncate(keep)
        # The model attends with harness_prefix only while this engine computes, never across
        # a yield: whoever consumes the results may use the model meanwhile.
        with engine.model_attention(), torch.inference_mode():
            t0 = time.perf_counter()
            logits = engine.prefill(self.cache, ids, keep)
            if self.floors[i] > 0 and self.stops[i]:  # the first token may not be a stop id (see run's docstring)
                logits = logits.clone()
                logits[sorted(self.stops[i])] = float("-inf")
            tok = int(logits.argmax())
            t1 = time.perf_counter()
        # The prefill's seconds split over its new chunks by tokens (attention makes later
        # chunks dearer, so this is an approximation), then shared among each chunk's users.
        own = len(ids) - keep
        for s in range(keep, len(ids), engine.chunk):
            self.node_seconds.append((t1 - t0) * min(engine.chunk, len(ids) - s) / max(1, own))
        return tok, sum(sec / n for sec, n in zip(self.node_seconds, self.users[k])), keep

    def _admit(self, i: int, tok: int) -> Iterator[Generated]:
        """Prompt i into a decoding row. When its memory does not fit, the rows decoding finish first
        (their buffers go with the last); if it still does not, the row takes the prefix cache itself."""
        rows, n, room = self.rows, len(self.prompts[i]), self.max_new[i]
        while rows.active and not rows.can_hold(rows.admit_bytes(self.cache, n, room)):
            yield from self._step()
        self.handed_over = not rows.can_hold(rows.admit_bytes(self.cache, n, room))
        with torch.inference_mode():
            rows.admit(
                self.cache, n, tok, i, room=room, take=self.handed_over, stop_ids=self.stops[i], min_new=self.floors[i]
            )
        if self.handed_over:
            self.cache = PrefixCache()

    def _step(self) -> Iterator[Generated]:
        """One decoding step; the prompts it finished."""
        with self.engine.model_attention(), torch.inference_mode():
            done = list(self.rows.step(self.limits))
        for row in done:
            i = cast(int, row.tag)  # the prompt's index: what _admit gave the row
            shared, keep = self.prefilled.pop(i)
            yield Generated(i, row.tokens, shared + row.seconds, len(self.prompts[i]), keep, shared)
