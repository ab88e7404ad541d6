"""Attention modes and the batch the training loop feeds the model.

| mode           | who sees whom (q >= kv always)                         | RoPE position ids           |
|----------------|--------------------------------------------------------|-----------------------------|
| full           | every earlier token of the window                      | 0..L-1                      |
| intradoc       | earlier tokens of its own segment                      | 0..L-1                      |
| intradoc-reset | earlier tokens of its own segment                      | restart at 0 per document   |
| anchor         | earlier tokens of its own segment, plus token 0        | 0..L-1 (anchor at 0)        |

Segments come from packing.PackedWindow.doc_ids: the anchor is segment 0 (in intradoc modes it
sees only itself), each document piece one segment (its chunks share it when interleaved), padding
one more. Labels follow the Hugging Face convention (aligned with input_ids; the model shifts by
one; -100 = no loss) and are identical in every mode, so the modes differ only in attention and
positions. `attention_allowed` is the single definition of the masks; every kernel is checked
against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from harness.core.errors import UserError

if TYPE_CHECKING:
    import torch

MODES = ("full", "intradoc", "intradoc-reset", "anchor")
# Interleaved chunks need a document mask to mean anything (a chunk must see its own earlier chunks
# and nothing else), so they are offered with the two masked modes whose positions stay continuous.
INTERLEAVE_MODES = ("intradoc", "anchor")
IGNORE_INDEX = -100


def check_mode(mode: str, interleave_chunks: int | None = None) -> None:
    """Raise UserError for an unknown mode or a mode that cannot take interleaved chunks."""
    if mode not in MODES:
        raise UserError(f"unknown --mode {mode!r}: choose one of {', '.join(MODES)}")
    if interleave_chunks and mode not in INTERLEAVE_MODES:
        raise UserError(
            f"--interleave-chunks works with --mode {' or '.join(INTERLEAVE_MODES)}, not {mode!r}: change the mode or drop the flag"
        )


def attention_allowed(doc_q, doc_kv, q, kv, mode: str):
    """Whether query q may attend key kv. Works on ints and on broadcastable tensors alike."""
    causal = q >= kv
    if mode == "full":
        return causal
    same = doc_q == doc_kv
    if mode == "anchor":
        return causal & (same | (kv == 0))
    return causal & same


@dataclass
class Batch:
    """Tensors of shape [B, L] (torch.long)."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    """input_ids where the token is a target, else -100; the model shifts by one."""
    position_ids: torch.Tensor
    doc_ids: torch.Tensor
    """Segment id per token; 0 is the anchor (see packing.py)."""
    mode: str

    def num_loss_tokens(self) -> int:
        return int((self.labels != IGNORE_INDEX).sum())

    def to(self, device) -> Batch:
        return Batch(
            self.input_ids.to(device),
            self.labels.to(device),
            self.position_ids.to(device),
            self.doc_ids.to(device),
            self.mode,
        )

    @property
    def shape(self) -> tuple[int, int]:
        return cast("tuple[int, int]", tuple(self.input_ids.shape))


def build_batch(windows: list, mode: str) -> Batch:
    """Stack PackedWindows into a Batch for `mode`."""
    import torch

    check_mode(mode)
    assert windows and len({len(w) for w in windows}) == 1, "windows must be non-empty and of one length"
    input_ids = torch.tensor([w.input_ids for w in windows], dtype=torch.long)
    doc_ids = torch.tensor([w.doc_ids for w in windows], dtype=torch.long)
    loss = torch.tensor([w.loss_mask for w in windows], dtype=torch.bool)
    labels = torch.where(loss, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    if mode == "intradoc-reset":
        position_ids = torch.tensor([w.doc_pos for w in windows], dtype=torch.long)
    else:
        position_ids = torch.arange(input_ids.shape[1]).expand_as(input_ids).clone()
    return Batch(input_ids, labels, position_ids, doc_ids, mode)


def iter_batches(windows, batch_size: int, mode: str):
    """Group an iterator of PackedWindows into Batches of `batch_size` (a short last group is kept)."""
    group = []
    for w in windows:
        group.append(w)
        if len(group) == batch_size:
            yield build_batch(group, mode)
            group = []
    if group:
        yield build_batch(group, mode)
