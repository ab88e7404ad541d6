"""Per-document segments of a packed window: the varlen view of the masks in training/modes.py.

Legend: B batch, L window, T tokens of the expanded (anchor-copy) sequence.

A row's attention in every mode is a union of independent causal problems ("segments"), each a list
of window indices in increasing order:
- full: one segment, the whole window.
- intradoc / intradoc-reset: the anchor alone, then one segment per document (a document's chunks
  may be scattered when interleaved; gathering them in order keeps causality exact).
- anchor: one segment per document, [0] + the document's indices: each document gets its own copy
  of the anchor at its start. A copy sees only itself and has the anchor's token and position, so
  its keys and values equal the shared anchor's at every layer: causal attention inside each
  segment is exactly "own document plus the window's first token".
`keep_first` says whether a segment's first entry is the window's own output for that index (False
for the anchor copies after the first one, whose outputs duplicate it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass
class Segment:
    indices: list[int]
    keep_first: bool = True


def row_segments(doc_ids: list[int], mode: str) -> list[Segment]:
    """Segments of one window row (doc_ids as a list of ints)."""
    if mode == "full":
        return [Segment(list(range(len(doc_ids))))]
    groups: dict[int, list[int]] = {}
    for i, d in enumerate(doc_ids[1:], start=1):
        groups.setdefault(d, []).append(i)
    assert doc_ids[0] == 0 and 0 not in groups, "segment 0 is the anchor at index 0 only"
    if mode == "anchor":
        return [Segment([0] + idx, keep_first=(n == 0)) for n, idx in enumerate(groups.values())]
    return [Segment([0])] + [Segment(idx) for idx in groups.values()]


@dataclass
class SegmentPlan:
    """Index tensors for running the segments of a batch on the window layout (sdpa-doc)."""

    rows: list[list[torch.Tensor]]
    """Per row, per segment: window indices to gather (LongTensor)."""
    drops: list[list[int]]
    """Per row, per segment: 1 where the first output is an anchor copy to drop, else 0."""
    inverse: list[torch.Tensor]
    """Per row: position in the concatenated kept outputs of each window index."""


def plan(doc_ids_BL, mode: str, device=None) -> SegmentPlan:
    import torch

    rows, drops, inverse = [], [], []
    for row in doc_ids_BL.tolist():
        segs = row_segments(row, mode)
        rows.append([torch.tensor(s.indices, dtype=torch.long, device=device) for s in segs])
        drops.append([0 if s.keep_first else 1 for s in segs])
        order = [i for s in segs for i in (s.indices if s.keep_first else s.indices[1:])]
        assert sorted(order) == list(range(len(row)))
        inv = torch.empty(len(row), dtype=torch.long)
        inv[torch.tensor(order)] = torch.arange(len(row))
        inverse.append(inv.to(device))
    return SegmentPlan(rows, drops, inverse)


def pairs_kept(doc_ids: list[int], mode: str) -> int:
    """(query, key) pairs the mode lets attend in one window: the attention work a kernel that skips
    masked pairs does (full causal keeps L(L+1)/2). Anchor copies after the first are not counted:
    they duplicate the one anchor row."""
    return sum(
        len(s.indices) * (len(s.indices) + 1) // 2 - (0 if s.keep_first else 1) for s in row_segments(doc_ids, mode)
    )
