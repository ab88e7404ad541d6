"""Decoding several prompts together at a fixed width: one attention call and one cache append per layer.

    from harness.models.runners.decode import DecodeRows
    rows = DecodeRows(model, width=8, eos_id=2)     # the hf runner's width: common.DECODE_ROWS
    rows.admit(prefix_cache, length, first_token, tag, room=max_new)   # after the prompt's prefill
    for row in rows.step(max_new): ...                                  # one token per active row; the finished

Why this shape. Decoding one row at a time reads every weight once per generated token and pays
transformers' per-forward Python cost each time: on CPU it ran at 14-25 tokens/s on SmolLM2 at
1K-4K, about half of a RULER task's time. Decoding W rows together reads the weights once per W
tokens. Their keys and values live in one buffer per layer (harness/models/runners/rowcache.py), so a
step appends once per layer and attends once per layer: all rows in one SDPA call, each against its
own keys through a per-row key mask (`sdpa-padded-512`). Attending each row alone instead (the engine
before issue 37, kernel `per-row`, kept as the reference) costs W calls and W appends per layer, which
a GPU runs launch-bound (8 rows x 30 layers = 240 of each a step on SmolLM2).

What a row's bits depend on. Padding a row's keys to its longest neighbour's would make its logits
depend on the neighbours; the padded length is a multiple of the CPU flash kernel's key block, at
which the row's output is the same bits whatever the padding (rowcache.py says why): the batched
call equals each row in its own call with its own padding (`per-row-padded-512`) bit for bit.
Against the per-row kernel on exact lengths the sums run in another order: on SmolLM2, fp32 gave
200 of 200 predictions the same, bf16 168 of 200 (195 the same score; benchmarks/decode_agreement.py,
benchmarks/RESULTS.md). The kernel's name is part of every hf record's identity (`decode_attention`).

A linear layer's row is computed identically whatever the other rows hold, but not whatever their
number: BLAS picks its kernel by the matrix shape (measured on this project's CPU: rows of a
1536->576 bf16 matmul differ between 1 and 2 rows; fp32 differs from 1 to 2 rows on every shape,
and for a fixed number of rows no row ever depended on the others' values or its slot). So the width
is fixed: every step runs exactly W rows, empty slots as filler rows. A prompt's tokens then depend
on the prompt and W alone, not on the other prompts, how many are active, or in what order they
came; W is part of every record's identity (`decode_rows`).

Memory. Admitting a row allocates only when the rows' buffers must grow (more slots, or a longer
row): RowsCache.growth_bytes. When the device's free memory (CUDA: the driver's free memory plus the
allocator's unused reserve; CPU: MemAvailable) cannot hold that with half as much again and
MEMORY_MARGIN to spare, the rows decoding finish first (their buffers are freed when the last one
does); if it still cannot, the row takes the prefix cache's own buffers and the next prompt
recomputes its prefix. Either way no output changes, only how much is reused.

The width is a constant of the hf runner (DECODE_ROWS, harness/models/runners/common.py), never measured at
run time: a machine under load must not pick another arithmetic. 8 was measured best of 1-16 on
SmolLM2-135M bf16 on CPU (`benchmarks/decode_width.py`, benchmarks/RESULTS.md "Decode width").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from harness.models.runners.common import DECODE_ATTENTION, keeps_logits, stop_token_ids
from harness.models.runners.kvcache import decode_attention, round_up
from harness.models.runners.rowcache import RowsCache, StepKeys

# Bytes kept free beyond a growth's 1.5x (the step's activations, the allocator's slack).
MEMORY_MARGIN = 256 << 20


def free_bytes(device) -> int | None:
    """Free memory of the device (CPU: the kernel's MemAvailable); None when it cannot be read.

    CUDA: the driver's free memory plus what PyTorch's caching allocator holds reserved but not
    allocated. Buffers freed by torch (the rows' buffers after their last row, the prefix cache's
    outgrown ones) stay reserved by the allocator, which the driver counts as used: reading the
    driver alone, a run at 128K would see ~17 GB less with every row that finished, and decode its
    rows one at a time for no reason."""
    if device.type == "cuda":
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(torch.cuda.mem_get_info(device)[0]) + max(0, int(cached))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# -- the rows' attention ---------------------------------------------------------------------
def padded_attention(query: torch.Tensor, keys: StepKeys, values: StepKeys, scaling) -> torch.Tensor:
    """One step of W rows in one SDPA call: the buffer's rows [S, H, 1, D] against their padded keys
    under the step's key mask, the query heads of a key/value group as that group's query rows (no key
    copied). Rows past the buffer's slots (none admitted there yet) give zeros."""
    w, h, _, d = query.shape
    slots, hk = keys.tensor.shape[:2]
    q = query[:slots].reshape(slots, hk, h // hk, d)
    out = F.scaled_dot_product_attention(q, keys.tensor, values.tensor, attn_mask=keys.mask, scale=scaling)
    out = out.reshape(slots, h, 1, d)
    return out if slots == w else torch.cat((out, out.new_zeros((w - slots, h, 1, d))))


def per_row_attention(query: torch.Tensor, keys: StepKeys, values: StepKeys, scaling) -> torch.Tensor:
    """The reference: each row alone against exactly its own keys (the engine before issue 37)."""
    out = query.new_zeros(query.shape)
    for r, n in enumerate(keys.lengths):
        key, value = keys.tensor[r : r + 1, :, :n], values.tensor[r : r + 1, :, :n]
        out[r : r + 1] = decode_attention(query[r : r + 1], key, value, scaling)
    return out


def per_row_padded_attention(query: torch.Tensor, keys: StepKeys, values: StepKeys, scaling) -> torch.Tensor:
    """Each row alone in its own SDPA call, against its own keys padded to its own multiple of
    KEY_BLOCK under its own mask: the batched kernel's arithmetic one row at a time. A row's logits
    are the same bits as in the batched call (tests/eval_run/test_decode_rows.py), which is the claim
    that batching the rows changes nothing but the number of calls."""
    out = query.new_zeros(query.shape)
    hk = keys.tensor.shape[1]
    h, d = query.shape[1], query.shape[3]
    for r, n in enumerate(keys.lengths):
        span = round_up(n)
        q = query[r : r + 1].reshape(1, hk, h // hk, d)
        key, value = keys.tensor[r : r + 1, :, :span], values.tensor[r : r + 1, :, :span]
        mask = keys.mask[r : r + 1, :, :, :span]
        row = F.scaled_dot_product_attention(q, key, value, attn_mask=mask, scale=scaling)
        out[r : r + 1] = row.reshape(1, h, 1, d)
    return out


# The engine's kernel, and two references: `per-row` (the engine before issue 37: each row against
# exactly its keys, another summation order) and `per-row-padded-512` (each row alone, same arithmetic).
KERNELS = {
    DECODE_ATTENTION: padded_attention,
    "per-row": per_row_attention,
    "per-row-padded-512": per_row_padded_attention,
}


def rows_attention(query: torch.Tensor, keys: StepKeys, values: StepKeys, scaling) -> torch.Tensor:
    """A decoding step's attention, [W, H, 1, D], by the kernel the rows' cache names."""
    return KERNELS[keys.kernel](query, keys, values, scaling)


# -- the rows --------------------------------------------------------------------------------
@dataclass
class _Row:
    tag: object  # the caller's handle (a prompt index)
    length: int  # tokens in the row's cache
    last: int  # the token to feed next
    seconds: float = 0.0  # this row's share of the decoding steps it took part in
    tokens: list[int] = field(default_factory=list)
    # This row's stop ids (the model's, plus its request's stop_tokens ids) and how many tokens it must
    # generate before one of them may be chosen (GenerationRequest.min_new_tokens).
    stop_ids: frozenset = frozenset()
    min_new: int = 0


class DecodeRows:
    """Up to `width` prompts decoding together; every step runs exactly `width` rows. `kernel`: the
    rows' attention (KERNELS; the runner's is common.DECODE_ATTENTION)."""

    def __init__(self, model, width: int, eos_id, kernel: str = DECODE_ATTENTION):
        if kernel not in KERNELS:
            raise ValueError(f"unknown decoding attention {kernel!r}: one of {', '.join(KERNELS)}")
        self.model = model
        self.width = width
        self.stop_ids = frozenset(stop_token_ids(eos_id))  # eos_id: an id, several, or None
        self.slots: list[_Row | None] = [None] * width
        self.device = next(model.parameters()).device
        self.cache = RowsCache(model.config.get_text_config().num_hidden_layers, width, kernel)
        self._keeps_logits = keeps_logits(model)

    @property
    def active(self) -> int:
        return sum(row is not None for row in self.slots)

    def full(self) -> bool:
        return self.active == self.width

    def admit_bytes(self, cache, length: int, room: int) -> int:
        """Bytes that admitting cache[:length] with room for `room` more tokens allocates (0: none)."""
        return self.cache.growth_bytes(cache, self.slots.index(None), length + room)

    def can_hold(self, nbytes: int) -> bool:
        """Whether an allocation of nbytes fits in the device's free memory with room to spare."""
        if nbytes == 0:
            return True
        free = free_bytes(self.device)
        return free is None or nbytes * 3 // 2 + MEMORY_MARGIN <= free

    def admit(
        self,
        cache,
        length: int,
        first: int,
        tag: object,
        room: int = 0,
        take: bool = False,
        stop_ids: frozenset | None = None,
        min_new: int = 0,
    ) -> None:
        """A prompt whose prefill left its keys and values in cache[:length] and chose `first` goes into
        a free slot, to be decoded from `first` on, with space for `room` more tokens. Its keys are
        copied into the rows' buffers; `take`: the row takes the cache's buffers themselves (no copy;
        only when no row decodes, and the cache must not be used again). `stop_ids`: the row's own stop
        ids (default: the model's); `min_new`: stop ids are masked until it has that many tokens."""
        import time

        t0 = time.perf_counter()
        slot = self.slots.index(None)
        if take:
            self.cache.adopt(cache, length + room)
        else:
            self.cache.put(slot, cache, length, room)
        stops = self.stop_ids if stop_ids is None else frozenset(stop_ids)
        row = _Row(tag, length, first, tokens=[first], stop_ids=stops, min_new=min_new)
        row.seconds = time.perf_counter() - t0  # the copy is this prompt's own work
        self.slots[slot] = row

    def _logits(self) -> torch.Tensor:
        """The step's forward pass: every slot's next-token logits, [W, vocab]."""
        ids = [[row.last if row else 0] for row in self.slots]
        pos = [[row.length if row else 0] for row in self.slots]
        self.cache.begin_step([p[0] for p in pos[: self.cache.slots]])
        kwargs = {"logits_to_keep": 1} if self._keeps_logits else {}
        out = self.model(
            input_ids=torch.tensor(ids, dtype=torch.long, device=self.device),
            position_ids=torch.tensor(pos, dtype=torch.long, device=self.device),
            past_key_values=self.cache,
            use_cache=True,
            **kwargs,
        )
        logits = out.logits[:, -1]
        # Rows short of their min_new tokens cannot choose a stop id (transformers' min-length processors
        # set those scores to -inf). Masking a row's own logits leaves every other row's argmax as it was,
        # and with no such row the logits are not touched: outputs without min_new stay bit-identical.
        floor = [
            r for r, row in enumerate(self.slots) if row is not None and row.stop_ids and len(row.tokens) < row.min_new
        ]
        if floor:
            logits = logits.clone()
            for r in floor:
                row = self.slots[r]
                assert row is not None
                logits[r, sorted(row.stop_ids)] = float("-inf")
        return logits

    def step(self, max_new: dict) -> Iterator[_Row]:
        """One token for every active row; yields the rows that finished (a stop id, or max_new[tag] tokens)."""
        import time

        t0 = time.perf_counter()
        chosen = self._logits().argmax(-1).tolist()
        share = (time.perf_counter() - t0) / max(1, self.active)
        for r, row in enumerate(self.slots):
            if row is None:
                continue
            row.length += 1
            row.seconds += share
            tok = int(chosen[r])
            done = tok in row.stop_ids
            if not done:
                row.tokens.append(tok)
                row.last = tok
                done = len(row.tokens) >= max_new[row.tag]
            if done:
                self.slots[r] = None
                if not self.active:
                    self.cache.clear()  # the last row: its buffers go back before anyone resumes
                yield row
