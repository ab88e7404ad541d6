"""The decoding rows' KV cache: one buffer per layer for all rows, appended once per layer and step.

    from harness.models.runners.rowcache import RowsCache, StepKeys
    cache = RowsCache(n_layers, width=8, kernel="sdpa-padded-512")
    cache.put(slot, prefix_cache, length, room)      # a prompt's keys and values, after its prefill
    cache.begin_step(positions)                       # per buffer slot: where this step's key goes
    model(..., past_key_values=cache)                 # each layer: cache.update -> StepKeys

Layout. Per layer, keys and values are each one [slots, kv_heads, capacity, head_dim] tensor
(head-major: a head's keys are one contiguous run, which SDPA's CPU kernel reads twice as fast as
keys strided across heads; benchmarks/RESULTS.md "Rows' caches head-major"). A step writes every
row's new key at its own position in one indexed copy, and hands the attention function the first
P keys of every slot with a per-row key mask ([slots, 1, 1, P]): the rows attend in one call
(harness/models/runners/decode.py).

Why P is a multiple of KEY_BLOCK. P is set by the longest row, so a row's call has as many keys as
its longest neighbour. PyTorch's CPU flash kernel walks the keys in blocks of 512 and sums a block's
weights in vector lanes: a partial last block of another size sums the same weights in another
order, so a row's bits would depend on its neighbours' lengths (measured: 185 of 1,600 fp32 rows
changed with the padded length). A block wholly past a row's keys adds exact zeros (its weights
are exp(-inf)), so with P a multiple of 512 a row's output is the same bits for every P that holds
its keys: it depends on the row alone. Measured against the row alone at its own rounded length:
0 of 1,280 rows differed per dtype (fp32 and bf16, SmolLM2's heads, 1-5,000 keys), 0 of 144 per
dtype with Llama-3-8B's heads to 9,000 keys; tests/eval_run/test_decode_rows.py checks it through
the model. On CUDA SDPA takes the mask to its memory-efficient kernel, whose blocks divide 512;
that it is as invariant there is not yet measured. Keys past a row's length must be finite
(0 x NaN is NaN): buffers are allocated zeroed.

Slots. The buffer has `slots` rows, grown to the next power of two (at most the width) when a row
lands in a slot past them: a prompt decoding alone holds one row's memory, not the width's. A free
slot inside the buffer attends to the key its filler row writes at position 0. Capacity is the
longest row's need (prompt + tokens it may generate), rounded up to KEY_BLOCK; a row that takes the
prefix cache's own buffers (short of memory) grows them once to its need when it is admitted.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.models.runners.kvcache import round_up


@dataclass
class StepKeys:
    """What one layer's cache update hands the attention function: the first P keys (or values) of
    every slot, the step's key mask, and each slot's number of keys (this step's included)."""

    tensor: torch.Tensor  # [slots, kv_heads, P, head_dim]
    mask: torch.Tensor  # [slots, 1, 1, P], 0 where a key is the row's, -inf past it (the query's dtype)
    lengths: list[int]
    kernel: str  # which rows' attention the step runs (harness/models/runners/decode.py KERNELS)


def _slots_for(slot: int, width: int) -> int:
    """Buffer rows that hold `slot`: the next power of two above it, at most the width."""
    return min(width, 1 << slot.bit_length())


class RowsCache:
    """The cache object the model is called with during a decoding step (transformers' Cache
    interface: `update` per layer, and the sizes its mask helpers ask for)."""

    def __init__(self, n_layers: int, width: int, kernel: str):
        self.n_layers, self.width, self.kernel = n_layers, width, kernel
        self.keys: list[torch.Tensor] = []  # per layer; empty: no row holds memory
        self.values: list[torch.Tensor] = []
        # the step's (slot indices, positions, key mask) per device: layers spread over GPUs
        # (device_map) each index and mask on their own
        self._step: dict[torch.device, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._lengths: list[int] = []

    @property
    def slots(self) -> int:
        return self.keys[0].shape[0] if self.keys else 0

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2] if self.keys else 0

    def clear(self) -> None:
        """No row decodes: give the memory back."""
        self.keys, self.values = [], []

    # -- admission -------------------------------------------------------------------------------
    def _shape_after(self, slot: int, need: int) -> tuple[int, int]:
        return max(self.slots, _slots_for(slot, self.width)), max(self.capacity, round_up(need))

    @staticmethod
    def _token_bytes(prefix) -> int:
        """Bytes a token's keys and values take over every layer (read off the prefix cache)."""
        total = 0
        for layer in prefix.layers:
            k, v = layer.keys, layer.values
            total += (k.shape[1] * k.shape[3] + v.shape[1] * v.shape[3]) * k.element_size()
        return total

    def growth_bytes(self, prefix, slot: int, need: int) -> int:
        """Bytes that putting a row of `need` tokens in `slot` allocates: 0 when the buffers hold it,
        else the new buffers less the old ones, plus one old layer (the buffers are replaced layer by
        layer, so that is the peak)."""
        slots, cap = self._shape_after(slot, need)
        if (slots, cap) == (self.slots, self.capacity):
            return 0
        per_token = self._token_bytes(prefix)
        old = self.slots * self.capacity * per_token
        return slots * cap * per_token - old + old // max(1, self.n_layers)

    def _grow(self, slots: int, cap: int) -> None:
        """Replace every layer's buffers by zeroed ones of [slots, kv_heads, cap, dim] holding the old."""
        for i in range(len(self.keys)):
            for buffers in (self.keys, self.values):
                old = buffers[i]
                new = old.new_zeros((slots, old.shape[1], cap, old.shape[3]))
                new[: old.shape[0], :, : old.shape[2]].copy_(old)
                buffers[i] = new

    def put(self, slot: int, prefix, length: int, room: int) -> None:
        """Copy prefix[:length] (a PrefixCache) into `slot`, with capacity for `room` more tokens."""
        slots, cap = self._shape_after(slot, length + room)
        if not self.keys:
            for layer in prefix.layers:
                k, v = layer.keys, layer.values
                self.keys.append(k.new_zeros((slots, k.shape[1], cap, k.shape[3])))
                self.values.append(v.new_zeros((slots, v.shape[1], cap, v.shape[3])))
        elif (slots, cap) != (self.slots, self.capacity):
            self._grow(slots, cap)
        for i, layer in enumerate(prefix.layers):
            self.keys[i][slot, :, :length].copy_(layer.keys[0, :, :length])
            self.values[i][slot, :, :length].copy_(layer.values[0, :, :length])

    def adopt(self, prefix, need: int) -> None:
        """Take the prefix cache's own buffers as a one-slot buffer (no copy; seq-major views, which
        SDPA reads to the same bits), grown once to `need` tokens when they hold fewer (not by
        doubling: the row is here because memory is short). Only while no row holds memory; the
        prefix cache must not be used again."""
        assert not self.keys, "a row takes the prefix cache only when no other row holds memory"
        for layer in prefix.layers:
            k, v = layer.buffers()
            self.keys.append(k)
            self.values.append(v)
        if round_up(need) > self.capacity:
            self._grow(1, round_up(need))

    # -- a step ----------------------------------------------------------------------------------
    def begin_step(self, positions: list[int]) -> None:
        """Per buffer slot, where this step's key goes (a free slot: 0). Grows the capacity (by
        doubling) where a row has outgrown it: only a row admitted with less room than it decodes
        can (the engine gives every row room for its max new tokens)."""
        need = max(positions) + 1
        if need > self.capacity:
            self._grow(self.slots, round_up(max(need, 2 * self.capacity)))
        device, dtype = self.keys[0].device, self.keys[0].dtype
        span = round_up(need)
        self._lengths = [p + 1 for p in positions]
        pos = torch.tensor(positions, dtype=torch.long, device=device)
        keep = torch.arange(span, device=device)[None, :] <= pos[:, None]
        mask = torch.zeros(keep.shape, dtype=dtype, device=device).masked_fill_(~keep, float("-inf"))
        self._step = {device: (torch.arange(len(positions), device=device), pos, mask[:, None, None, :])}

    def _step_on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if device not in self._step:
            rows, pos, mask = next(iter(self._step.values()))
            self._step[device] = (rows.to(device), pos.to(device), mask.to(device))
        return self._step[device]

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        """Append the step's key and value of every slot (one indexed copy each), then hand the
        attention function the first P keys and values of every slot as StepKeys."""
        rows, pos, mask = self._step_on(self.keys[layer_idx].device)
        slots, span = self.slots, mask.shape[-1]
        out = []
        for buffer, states in ((self.keys[layer_idx], key_states), (self.values[layer_idx], value_states)):
            buffer[rows, :, pos] = states[:slots, :, 0]
            out.append(StepKeys(buffer[:, :, :span], mask, self._lengths, self.kernel))
        return out[0], out[1]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return max(self._lengths, default=1) - 1

    # transformers' mask helpers ask these; the rows' attention builds its own mask
    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def get_query_offset(self, layer_idx: int = 0) -> int:
        return self.get_seq_length()
