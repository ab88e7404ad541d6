"""The KV-cache layers and the one-row decode attention shared by the prefill engine and the rows.

    from harness.models.runners.kvcache import GrowingLayer, RowLayer, decode_attention

A prompt is prefilled into `GrowingLayer`s (harness/models/runners/prefix.py's PrefixCache), then copied to
a decoding row's own `RowLayer`s (harness/models/runners/decode.py); a step of one row, alone or among rows
decoding together, attends through `decode_attention`, so both paths make the same kernel call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.cache_utils import CacheLayerMixin


class GrowingLayer(CacheLayerMixin):
    """One layer's keys and values in a preallocated buffer that grows by doubling; `truncate`
    cuts it back to a prefix in O(1). Stored [batch, seq, heads, dim] (harness/models/runners/prefix.py's docstring says why)."""

    is_sliding = False
    is_croppable = True
    head_major = False  # RowLayer: [batch, heads, seq, dim]

    def __init__(self) -> None:
        super().__init__()
        self.length = 0
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None

    @property
    def _seq_dim(self) -> int:
        return 2 if self.head_major else 1

    def _stored(self, x: torch.Tensor) -> torch.Tensor:
        """[batch, heads, seq, dim] as stored, and back (the swap is its own inverse)."""
        return x if self.head_major else x.transpose(1, 2)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def reserve(self, need: int, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        dim = self._seq_dim
        cap = 0 if self._k is None else self._k.shape[dim]
        if need <= cap:
            return
        cap = max(need, 2 * cap, 512)

        def buffer(states: torch.Tensor, old: torch.Tensor | None) -> torch.Tensor:
            shape = list(self._stored(states).shape)
            shape[dim] = cap
            new = states.new_empty(shape)
            if self.length and old is not None:
                new.narrow(dim, 0, self.length).copy_(old.narrow(dim, 0, self.length))
            return new

        self._k, self._v = buffer(key_states, self._k), buffer(value_states, self._v)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        dim, new = self._seq_dim, key_states.shape[-2]
        self.reserve(self.length + new, key_states, value_states)
        assert self._k is not None and self._v is not None
        self._k.narrow(dim, self.length, new).copy_(self._stored(key_states))
        self._v.narrow(dim, self.length, new).copy_(self._stored(value_states))
        self.length += new
        self.keys = self._stored(self._k.narrow(dim, 0, self.length))
        self.values = self._stored(self._v.narrow(dim, 0, self.length))
        return self.keys, self.values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return -1

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)

    def crop(self, tokens_to_remove: int) -> None:
        self.truncate(self.length - abs(tokens_to_remove) if tokens_to_remove < 0 else tokens_to_remove)

    def reset(self) -> None:
        self.length = 0


class RowLayer(GrowingLayer):
    """A decoding row's keys and values, stored head-major ([batch, heads, seq, dim]): each head's keys
    are one contiguous run. A decoding step streams every row's whole cache from memory, and SDPA reads
    a contiguous head at about twice the speed of one strided across heads (measured on CPU at 3.9K
    keys, caches too large for the CPU caches: 0.75 against 1.56 ms a call, benchmarks/decode_width.py).
    The layout changes no value: SDPA's result is bit-identical for either (tests/eval_run/test_decode_rows.py)."""

    head_major = True


def decode_attention(query, key, value, scaling):
    """One decoding step of one row: [1, H, 1, D] against [1, Hkv, kv, D], every key. The query heads
    of a key/value group go in as that group's query rows (measured 6x faster than enable_gqa on CPU
    at 4K, no key copied). Rows decoding together (harness/models/runners/decode.py) call this same function."""
    b, h, _, d = query.shape
    hk = key.shape[1]
    out = F.scaled_dot_product_attention(query.reshape(b, hk, h // hk, d), key, value, scale=scaling)
    return out.reshape(b, h, 1, -1)
