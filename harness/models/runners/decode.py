"""Decoding several prompts together at a fixed width, each row on its own KV cache.

    from harness.models.runners.decode import DecodeRows
    rows = DecodeRows(model, width=8, eos_id=2)     # the hf runner's width: common.DECODE_ROWS
    slot = rows.admit(prefix_cache, length, first_token, tag)   # after the prompt's prefill
    for row in rows.step(max_new): ...                           # one token per active row; the finished

Why this shape. Decoding one row at a time reads every weight once per generated token and pays
transformers' per-forward Python cost each time: on CPU it ran at 14-25 tokens/s on SmolLM2 at
1K-4K, about half of a RULER task's time. Decoding W rows together reads the weights once per W
tokens. A padded batch would make a row's arithmetic depend on its neighbours (a mask, a longer
key length), so each row keeps its own cache and attends alone (the same kernel call, shapes and
strides as decoding it by itself); only the linear layers see all W rows.

A linear layer's row is computed identically whatever the other rows hold, but not whatever their
number: BLAS picks its kernel by the matrix shape (measured on this project's CPU: rows of a
1536->576 bf16 matmul differ between 1 and 2 rows; fp32 differs from 1 to 2 rows on every shape,
and for a fixed number of rows no row ever depended on the others' values or its slot). So the width
is fixed: every step runs exactly W rows, empty slots as filler rows that attend to nothing. A
prompt's tokens then depend on the prompt and W alone, not on the other prompts, how many are
active, or in what order they came; W is part of every record's identity (`decode_rows`).

Memory. A row's copy holds its prompt's keys and values once more, reserved up front for the tokens
it may generate. When the device's free memory (CUDA: mem_get_info; CPU: MemAvailable) cannot hold
the copy with half as much again and MEMORY_MARGIN to spare, the rows decoding finish first; if it
still cannot, the row takes the prefix cache's own buffers and the next prompt recomputes its prefix.
Either way no output changes, only how much is reused.

The width is a constant of the hf runner (DECODE_ROWS, harness/models/runners/common.py), never measured at
run time: a machine under load must not pick another arithmetic. 8 was measured best of 1-16 on
SmolLM2-135M bf16 on CPU (`benchmarks/decode_width.py`, benchmarks/RESULTS.md "Decode width").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

# Bytes kept free beyond a row copy's 1.5x (the step's activations, the allocator's slack).
MEMORY_MARGIN = 256 << 20


def free_bytes(device) -> int | None:
    """Free memory of the device (CPU: the kernel's MemAvailable); None when it cannot be read."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@dataclass
class _Row:
    tag: object  # the caller's handle (a prompt index)
    caches: list  # per model layer: a GrowingLayer holding this row's keys and values
    length: int  # tokens in the row's cache
    last: int  # the token to feed next
    seconds: float = 0.0  # this row's share of the decoding steps it took part in
    tokens: list[int] = field(default_factory=list)
    # This row's stop ids (the model's, plus its request's stop_tokens ids) and how many tokens it must
    # generate before one of them may be chosen (GenerationRequest.min_new_tokens).
    stop_ids: frozenset = frozenset()
    min_new: int = 0


class RowsCache:
    """The cache object the model is called with during a step: each layer's `update` appends every
    active row's new key and value to that row's own buffer and hands the attention function the
    per-row views (a list, one [1, kv_heads, length, dim] pair per slot; None for a filler slot)."""

    def __init__(self, rows: list[_Row | None], n_layers: int):
        self.rows = rows
        self.layers = [None] * n_layers

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        keys: list[torch.Tensor | None] = []
        values: list[torch.Tensor | None] = []
        for r, row in enumerate(self.rows):
            if row is None:
                keys.append(None)
                values.append(None)
                continue
            k, v = row.caches[layer_idx].update(key_states[r : r + 1], value_states[r : r + 1])
            keys.append(k)
            values.append(v)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return max((row.length for row in self.rows if row is not None), default=0)

    # transformers' mask helpers ask these; the engine's attention builds no mask
    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def get_query_offset(self, layer_idx: int = 0) -> int:
        return self.get_seq_length()


def rows_attention(query: torch.Tensor, keys: list, values: list, scaling) -> torch.Tensor:
    """One decoding step of W rows: row r's query [1, H, 1, D] against its own keys alone, through the
    call that decodes one row by itself (kvcache.decode_attention). Filler rows give zeros."""
    from harness.models.runners.kvcache import decode_attention

    out = query.new_zeros(query.shape)
    for r, (key, value) in enumerate(zip(keys, values)):
        if key is not None:
            out[r : r + 1] = decode_attention(query[r : r + 1], key, value, scaling)
    return out


class DecodeRows:
    """Up to `width` prompts decoding together; every step runs exactly `width` rows."""

    def __init__(self, model, width: int, eos_id, head_major: bool = True):
        from harness.models.runners.common import stop_token_ids

        self.model = model
        self.head_major = head_major  # rows' caches as kvcache.RowLayer (False: as the prefix cache)
        self.width = width
        self.stop_ids = frozenset(stop_token_ids(eos_id))  # eos_id: an id, several, or None
        self.slots: list[_Row | None] = [None] * width
        self.n_layers = model.config.get_text_config().num_hidden_layers
        self.device = next(model.parameters()).device
        from harness.models.runners.common import keeps_logits

        self._keeps_logits = keeps_logits(model)

    @property
    def active(self) -> int:
        return sum(row is not None for row in self.slots)

    def full(self) -> bool:
        return self.active == self.width

    @staticmethod
    def row_bytes(cache, tokens: int) -> int:
        """Bytes of a row's own cache holding `tokens` tokens (keys and values of every layer)."""
        return sum(tokens * (layer.keys[0, :, 0].numel() * 2) * layer.keys.element_size() for layer in cache.layers)

    def can_hold(self, nbytes: int) -> bool:
        """Whether a copy of nbytes fits in the device's free memory with room to spare."""
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
        a free slot, to be decoded from `first` on, with space for `room` more tokens. Its row gets its own
        copy of them, head-major (kvcache.RowLayer: the layout changes no bit, only speed); `take`: the row
        takes the cache's buffers themselves (no copy; the cache must not be used again). `stop_ids`: the
        row's own stop ids (default: the model's); `min_new`: stop ids are masked until it has that many tokens."""
        import time

        from harness.models.runners.kvcache import GrowingLayer, RowLayer

        t0 = time.perf_counter()
        slot = self.slots.index(None)
        if take:
            layers = list(cache.layers)
        else:
            layers = []
            for src in cache.layers:
                own = RowLayer() if self.head_major else GrowingLayer()
                k, v = src.keys[:, :, :length], src.values[:, :, :length]
                own.lazy_initialization(k, v)
                own.reserve(length + room, k, v)
                own.update(k, v)
                layers.append(own)
        stops = self.stop_ids if stop_ids is None else frozenset(stop_ids)
        row = _Row(tag, layers, length, first, tokens=[first], stop_ids=stops, min_new=min_new)
        row.seconds = time.perf_counter() - t0  # the copy is this prompt's own work
        self.slots[slot] = row

    def step(self, max_new: dict) -> Iterator[_Row]:
        """One token for every active row; yields the rows that finished (a stop id, or max_new[tag] tokens)."""
        import time

        t0 = time.perf_counter()
        ids = [[row.last if row else 0] for row in self.slots]
        pos = [[row.length if row else 0] for row in self.slots]
        kwargs = {"logits_to_keep": 1} if self._keeps_logits else {}
        cache = RowsCache(self.slots, self.n_layers)
        out = self.model(
            input_ids=torch.tensor(ids, dtype=torch.long, device=self.device),
            position_ids=torch.tensor(pos, dtype=torch.long, device=self.device),
            past_key_values=cache,
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
        chosen = logits.argmax(-1).tolist()
        share = (time.perf_counter() - t0) / max(1, self.active)
        for r, row in enumerate(self.slots):
            if row is None:
                continue
            row.length += 1
            row.seconds += share
            tok = int(chosen[r])
            if tok in row.stop_ids:
                self.slots[r] = None
                yield row
                continue
            row.tokens.append(tok)
            row.last = tok
            if len(row.tokens) >= max_new[row.tag]:
                self.slots[r] = None
                yield row
