"""Packing tokenized documents into training windows of exactly the window length.

Every window is ``[anchor] + (window - 1)`` tokens. The anchor (BOS, or EOS for tokenizers that add
no BOS) is segment 0. Documents fill the rest in stream order and get segment ids 1, 2, ... in stream order
(before any interleaving). A document that fits in the room left is kept whole; one
that does not fills the window and its remainder is carried into the next window as a NEW document
(its own segment id there, its domain tag prepended again). Nothing is thrown away: the only
padding is (a) the few slots left when a tag plus one token no longer fits, and (b) the tail of the
last window; padding is its own segment and never gets loss.

With ``interleave_chunks=K`` each document piece of a window is cut into up to K chunks at random
points, and the chunks of all pieces are shuffled with the order within each document kept
(a random merge). Chunks keep their document's segment id, so the masks in modes.py let a chunk see
the earlier chunks of its own document and nothing else.

Loss rule (all modes): token j is a target (``loss_mask[j]``) only when token j-1 belongs to the
same segment and token j is not a tag or padding token. So the anchor's target (the first token of
the first document), every target that crosses a document or chunk boundary, and tag tokens get no
loss. With a tag, the document's first text token IS a target (it follows the tag in the same
document).

Run: ``python -m training.packing`` packs the generated corpus and prints a summary.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from harness.core.errors import UserError

ANCHOR_SEGMENT = 0


@dataclass
class PackedWindow:
    """One training window; every list has exactly `window` entries."""

    input_ids: list[int]
    doc_ids: list[int]
    """Segment id per token: 0 = the anchor, 1.. = document pieces (and the padding segment)."""
    loss_mask: list[bool]
    """True where the token is a training target (see the module docstring)."""
    doc_pos: list[int]
    """Index of the token within its own piece (tag included); 0 for the anchor. RoPE positions of
    intradoc-reset."""
    is_tag: list[bool]
    """True on domain-tag tokens."""
    sources: dict[int, str] = field(default_factory=dict)
    """Source name of each document segment id (padding is "<pad>")."""
    num_pad: int = 0
    """Padding tokens in this window (not document tokens)."""

    @property
    def doc_starts(self) -> list[int]:
        """Index of the first token of each document segment, in segment-id order."""
        first: dict[int, int] = {}
        for i, d in enumerate(self.doc_ids):
            if d != ANCHOR_SEGMENT and d not in first:
                first[d] = i
        return [first[d] for d in sorted(first)]

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class _Piece:
    tag: list[int]
    ids: list[int]
    source: str
    pad: bool = False


def pack(
    docs: Iterable,
    window: int,
    anchor_id: int,
    *,
    interleave_chunks: int | None = None,
    seed: int = 0,
    pad_id: int | None = None,
    drop_last: bool = False,
    lookahead: int = 0,
) -> Iterator[PackedWindow]:
    """Pack `docs` (TokenizedDoc-like: .ids, .tag_ids, .source) into windows of `window` tokens.

    The last, partial window is padded (padding has no loss) unless `drop_last`. `pad_id` defaults
    to the anchor id. `seed` drives chunk cuts and shuffles; the same inputs give the same windows.
    `lookahead=N`: before splitting a document that overflows the window, fill the room with the
    largest of the next N documents that fits it whole (fewer split documents; stream order
    changes only by those moves). 0 keeps pure stream order.
    """
    if window < 2:
        raise UserError(f"window {window} is too small: pass --window of at least 2 tokens")
    if interleave_chunks is not None and interleave_chunks < 1:
        raise UserError(f"--interleave-chunks {interleave_chunks} must be a positive number of chunks")
    if lookahead < 0:
        raise UserError(f"packing lookahead {lookahead} must be 0 or more documents")
    packer = _Packer(window, anchor_id, anchor_id if pad_id is None else pad_id, interleave_chunks, seed, lookahead)
    for doc in packer.documents(docs):
        tag = list(doc.tag_ids or [])
        if len(tag) >= packer.cap:
            raise UserError(
                f"domain tag of {len(tag)} tokens does not fit a window of {window}: use a shorter tag field or a larger --window"
            )
        yield from packer.place(doc, tag)
    if packer.pieces and not drop_last:
        yield packer.pad_out()


def _size(doc) -> int:
    return len(doc.tag_ids or []) + len(doc.ids)


class _Packer:
    """The window being filled (its pieces and the tokens they use) and the documents read ahead."""

    def __init__(
        self, window: int, anchor_id: int, pad_id: int, interleave_chunks: int | None, seed: int, lookahead: int
    ):
        self.anchor_id, self.pad_id = anchor_id, pad_id
        self.interleave_chunks, self.lookahead = interleave_chunks, lookahead
        self.rng = random.Random(seed)
        self.cap = window - 1
        self.pieces: list[_Piece] = []
        self.used = 0
        self.ahead: deque = deque()  # documents read early by the lookahead, in stream order
        self.stream: Iterator = iter(())

    def documents(self, docs: Iterable) -> Iterator:
        """The documents in stream order, except those the lookahead moved up."""
        self.stream = iter(docs)
        while (doc := self.ahead.popleft() if self.ahead else next(self.stream, None)) is not None:
            yield doc

    def place(self, doc, tag: list[int]) -> Iterator[PackedWindow]:
        """Put `doc` into windows, yielding each window it fills."""
        ids = doc.ids
        pos = 0
        while pos < len(ids):
            room = self.cap - self.used
            if room <= len(tag):
                # A tag followed by no text teaches nothing: pad the few slots, go to a new window.
                yield self.pad_out()
                continue
            if self.lookahead and len(tag) + len(ids) - pos > room:
                whole = self._fitting_ahead(room)
                if whole is not None:
                    yield from self._add(_Piece(list(whole.tag_ids or []), list(whole.ids), whole.source), _size(whole))
                    continue
            take = min(room - len(tag), len(ids) - pos)
            yield from self._add(_Piece(tag, list(ids[pos : pos + take]), doc.source), len(tag) + take)
            pos += take

    def _fitting_ahead(self, room: int):
        """The largest of the next `lookahead` documents that fits `room` whole (the first of equals),
        taken out of the read-ahead; None when none fits."""
        while len(self.ahead) < self.lookahead and (nxt := next(self.stream, None)) is not None:
            self.ahead.append(nxt)
        fits = [i for i, d in enumerate(self.ahead) if _size(d) <= room]
        if not fits:
            return None
        best = max(fits, key=lambda i: (_size(self.ahead[i]), -i))
        whole = self.ahead[best]
        del self.ahead[best]
        return whole

    def _add(self, piece: _Piece, tokens: int) -> Iterator[PackedWindow]:
        """Append a piece; yields the window when that fills it."""
        self.pieces.append(piece)
        self.used += tokens
        if self.used == self.cap:
            yield self._finish()

    def pad_out(self) -> PackedWindow:
        """Pad the rest of the window and finish it."""
        self.pieces.append(_Piece([], [self.pad_id] * (self.cap - self.used), "<pad>", pad=True))
        return self._finish()

    def _finish(self) -> PackedWindow:
        window = _build(self.pieces, self.anchor_id, self.interleave_chunks, self.rng)
        self.pieces, self.used = [], 0
        return window


def _chunks(n: int, k: int, rng: random.Random) -> list[tuple[int, int]]:
    """Cut range(n) into min(k, n) non-empty chunks at random points."""
    k = min(k, n)
    cuts = sorted(rng.sample(range(1, n), k - 1)) if k > 1 else []
    bounds = [0, *cuts, n]
    return list(itertools.pairwise(bounds))


def _build(pieces: list[_Piece], anchor_id: int, interleave_chunks: int | None, rng: random.Random) -> PackedWindow:
    docs = [p for p in pieces if not p.pad]
    pads = [p for p in pieces if p.pad]
    # (segment id, tokens, tag flags) per piece; padding goes last so it never splits a document.
    items = []
    for i, p in enumerate(docs, start=1):
        items.append((i, p.tag + p.ids, [True] * len(p.tag) + [False] * len(p.ids)))
    order: list[tuple[int, int, int]] = []  # (item index, start, end)
    if interleave_chunks:
        per_item = [_chunks(len(toks), interleave_chunks, rng) for _, toks, _ in items]
        draw = [i for i, ch in enumerate(per_item) for _ in ch]
        rng.shuffle(draw)  # a random merge: which document's next chunk comes next
        nxt = [0] * len(items)
        for i in draw:
            s, e = per_item[i][nxt[i]]
            nxt[i] += 1
            order.append((i, s, e))
    else:
        order = [(i, 0, len(toks)) for i, (_, toks, _) in enumerate(items)]

    input_ids, doc_ids, doc_pos, is_tag, is_pad = [anchor_id], [ANCHOR_SEGMENT], [0], [False], [False]
    for i, s, e in order:
        seg, toks, tags = items[i]
        input_ids += toks[s:e]
        doc_ids += [seg] * (e - s)
        doc_pos += range(s, e)
        is_tag += tags[s:e]
        is_pad += [False] * (e - s)
    sources = {seg: docs[seg - 1].source for seg, _, _ in items}
    num_pad = 0
    for p in pads:
        seg = len(items) + 1
        sources[seg] = "<pad>"
        input_ids += p.ids
        doc_ids += [seg] * len(p.ids)
        doc_pos += range(len(p.ids))
        is_tag += [False] * len(p.ids)
        is_pad += [True] * len(p.ids)
        num_pad += len(p.ids)
    loss_mask = [False] + [
        doc_ids[j] == doc_ids[j - 1] and not is_tag[j] and not is_pad[j] for j in range(1, len(input_ids))
    ]
    return PackedWindow(input_ids, doc_ids, loss_mask, doc_pos, is_tag, sources, num_pad)


def _main() -> None:
    import argparse

    from training.corpus import generate_documents

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=int, default=4096)
    ap.add_argument("--num-docs", type=int, default=200)
    args = ap.parse_args()

    class _Doc:
        def __init__(self, ids, source):
            self.ids, self.tag_ids, self.source = ids, None, source

    # Byte-level stand-in for a tokenizer: enough to show how the corpus packs.
    docs = [
        _Doc(list(d["text"].encode())[:50_000] + [1], d["domain"]) for d in generate_documents(args.num_docs, seed=0)
    ]
    windows = list(pack(docs, args.window, anchor_id=0))
    per_window = [len(w.doc_starts) for w in windows]
    print(
        f"{len(windows)} windows of {args.window}; docs per window min {min(per_window)} max {max(per_window)}; "
        f"padding {sum(w.num_pad for w in windows)} tokens"
    )


if __name__ == "__main__":
    _main()
