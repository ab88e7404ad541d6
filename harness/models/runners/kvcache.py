"""The prefill cache's layers and the one-row decode attention.

    from harness.models.runners.kvcache import GrowingLayer, decode_attention, KEY_BLOCK

A prompt is prefilled into `GrowingLayer`s (harness/models/runners/prefix.py's PrefixCache), then copied
into the decoding rows' batched cache (harness/models/runners/rowcache.py). `decode_attention` is one
row's step against its own keys: a prompt whose last prefill chunk is one token, and the per-row
reference kernel of the rows (harness/models/runners/decode.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.cache_utils import CacheLayerMixin

# Key buffers hold a multiple of this many tokens, and the rows attend to a multiple of it: it is the
# key block of PyTorch's CPU flash kernel, and a row's output does not change with fully masked blocks
# after its keys (harness/models/runners/rowcache.py says why that matters).
KEY_BLOCK = 512


def round_up(n: int, block: int = KEY_BLOCK) -> int:
    return -(-n // block) * block


class GrowingLayer(CacheLayerMixin):
    """One layer's keys and values in a preallocated buffer that grows by doubling; `truncate`
    cuts it back to a prefix in O(1). Stored [batch, seq, heads, dim] (harness/models/runners/prefix.py's
    docstring says why); allocated zeroed, in multiples of KEY_BLOCK tokens, so that a decoding row can
    take the buffer itself and attend to it padded (every key past the length is finite)."""

    is_sliding = False
    is_croppable = True

    def __init__(self) -> None:
        super().__init__()
        self.length = 0
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def reserve(self, need: int, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        cap = 0 if self._k is None else self._k.shape[1]
        if need <= cap:
            return
        cap = round_up(max(need, 2 * cap))

        def buffer(states: torch.Tensor, old: torch.Tensor | None) -> torch.Tensor:
            b, h, _, d = states.shape
            new = states.new_zeros((b, cap, h, d))
            if self.length and old is not None:
                new[:, : self.length].copy_(old[:, : self.length])
            return new

        self._k, self._v = buffer(key_states, self._k), buffer(value_states, self._v)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        self.reserve(self.length + new, key_states, value_states)
        assert self._k is not None and self._v is not None
        self._k[:, self.length : self.length + new].copy_(key_states.transpose(1, 2))
        self._v[:, self.length : self.length + new].copy_(value_states.transpose(1, 2))
        self.length += new
        self.keys = self._k[:, : self.length].transpose(1, 2)
        self.values = self._v[:, : self.length].transpose(1, 2)
        return self.keys, self.values

    def buffers(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole key and value buffers as [batch, heads, capacity, dim] views (no copy)."""
        assert self._k is not None and self._v is not None
        return self._k.transpose(1, 2), self._v.transpose(1, 2)

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


def decode_attention(query, key, value, scaling):
    """One decoding step of one row: [1, H, 1, D] against [1, Hkv, kv, D], every key. The query heads
    of a key/value group go in as that group's query rows (measured 6x faster than enable_gqa on CPU
    at 4K, no key copied)."""
    b, h, _, d = query.shape
    hk = key.shape[1]
    out = F.scaled_dot_product_attention(query.reshape(b, hk, h // hk, d), key, value, scale=scaling)
    return out.reshape(b, h, 1, -1)
