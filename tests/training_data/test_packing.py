"""Packing: exact layouts on hand-built packs, nothing lost, remainders carried as new documents."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import pytest

from harness.core.errors import UserError
from training.packing import pack

A = 1  # anchor id
P = 0  # pad id


@dataclass
class Doc:
    ids: list[int]
    tag_ids: list[int] | None = None
    source: str = "s"


def test_hand_built_pack_layout_and_loss():
    a = [10, 11, 12, 13]
    b = [20, 21, 22, 23, 24, 25, 26]
    w1, w2 = pack([Doc(a), Doc(b, source="t")], window=10, anchor_id=A, pad_id=P)
    assert w1.input_ids == [A, 10, 11, 12, 13, 20, 21, 22, 23, 24]
    assert w1.doc_ids == [0, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    # anchor target, and the first token of each document (target crossing a boundary): no loss
    assert w1.loss_mask == [False, False, True, True, True, False, True, True, True, True]
    assert w1.doc_starts == [1, 5]
    assert w1.doc_pos == [0, 0, 1, 2, 3, 0, 1, 2, 3, 4]
    assert w1.sources == {1: "s", 2: "t"}
    # remainder of b is a NEW document (id 1) in the next window; the tail is padding without loss
    assert w2.input_ids == [A, 25, 26] + [P] * 7
    assert w2.doc_ids == [0, 1, 1] + [2] * 7
    assert w2.loss_mask == [False, False, True] + [False] * 7
    assert w2.num_pad == 7 and w2.sources[2] == "<pad>"


def test_tags_prepended_again_on_carried_remainder():
    tag = [90, 91]
    a = [10, 11, 12, 13]
    b = [20, 21, 22, 23, 24, 25, 26]
    w1, w2 = pack([Doc(a, tag), Doc(b, tag)], window=10, anchor_id=A, pad_id=P)
    assert w1.input_ids == [A, 90, 91, 10, 11, 12, 13, 90, 91, 20]
    assert w1.is_tag == [False, True, True, False, False, False, False, True, True, False]
    # tags never get loss; the first text token after the tag is a target within its document
    assert w1.loss_mask == [False, False, False, True, True, True, True, False, False, True]
    assert w2.input_ids == [A, 90, 91, 21, 22, 23, 24, 25, 26, P]
    assert w2.doc_ids == [0, 1, 1, 1, 1, 1, 1, 1, 1, 2]
    assert w2.loss_mask == [False, False, False, True, True, True, True, True, True, False]


def test_no_room_for_tag_pads_and_moves_on():
    tag = [90, 91]
    w1, w2 = pack([Doc([10] * 7, tag), Doc([20, 21], tag)], window=11, anchor_id=A, pad_id=P)
    assert w1.input_ids == [A, 90, 91] + [10] * 7 + [P]  # 1 slot left: a tag + text cannot fit
    assert w1.num_pad == 1 and not w1.loss_mask[-1]
    assert w2.input_ids[:5] == [A, 90, 91, 20, 21]


def _reconstruct(windows):
    """Document pieces in stream order (segment-id order per window), tags and padding removed."""
    out = []
    for w in windows:
        pieces: dict[int, list[int]] = {}
        for tok, d, tag, src in zip(w.input_ids, w.doc_ids, w.is_tag, [w.sources.get(d) for d in w.doc_ids]):
            if d != 0 and not tag and src != "<pad>":
                pieces.setdefault(d, []).append(tok)
        out += [pieces[d] for d in sorted(pieces)]
    return out


@pytest.mark.parametrize("interleave", [None, 3])
@pytest.mark.parametrize("tags", [False, True])
def test_every_token_kept_in_order(interleave, tags):
    rng = random.Random(0)
    docs = [
        Doc(
            [rng.randrange(3, 500) for _ in range(int(rng.lognormvariate(3, 1.2)) + 1)] + [2],
            [600, 601] if tags else None,
        )
        for _ in range(200)
    ]
    window = 64
    windows = list(pack(docs, window, A, interleave_chunks=interleave, seed=3, pad_id=P))
    assert all(len(w) == window and w.input_ids[0] == A and w.doc_ids[0] == 0 for w in windows)
    flat = [t for p in _reconstruct(windows) for t in p]
    assert flat == [t for d in docs for t in d.ids]
    non_anchor = sum(window - 1 - w.num_pad - sum(w.is_tag) for w in windows)
    assert non_anchor == sum(len(d.ids) for d in docs)
    if tags:  # every piece (including carried remainders) starts with its tag
        for w in windows:
            for d in set(w.doc_ids) - {0}:
                if w.sources[d] != "<pad>":
                    first = [i for i, x in enumerate(w.doc_ids) if x == d][:2]
                    assert [w.input_ids[i] for i in first] == [600, 601]


def test_long_document_split_across_windows_gets_new_ids():
    doc = Doc(list(range(100, 130)))
    windows = list(pack([doc], 8, A, pad_id=P))
    assert [w.doc_ids[1:] for w in windows[:4]] == [[1] * 7] * 4
    assert windows[0].input_ids[1:] == list(range(100, 107))
    assert windows[1].input_ids[1:] == list(range(107, 114))
    assert not windows[1].loss_mask[1]  # a carried remainder starts a new document: no cross-window target


def test_interleaving_shuffles_chunks_keeps_order_and_is_seeded():
    docs = [Doc([100 * (i + 1) + j for j in range(12)]) for i in range(4)]
    w = next(pack(docs, 49, A, interleave_chunks=4, seed=0))
    w_same = next(pack(docs, 49, A, interleave_chunks=4, seed=0))
    w_other = next(pack(docs, 49, A, interleave_chunks=4, seed=1))
    assert w.input_ids == w_same.input_ids and w.input_ids != w_other.input_ids
    runs = [d for i, d in enumerate(w.doc_ids) if i > 0 and d != w.doc_ids[i - 1]]
    assert len(runs) > 4  # documents are actually cut and interleaved
    for d in range(1, 5):
        idx = [i for i, x in enumerate(w.doc_ids) if x == d]
        assert [w.input_ids[i] for i in idx] == docs[d - 1].ids  # order within a document kept
        assert [w.doc_pos[i] for i in idx] == list(range(12))  # intradoc-reset positions continue across chunks
        chunks = 1 + sum(1 for a, b in itertools.pairwise(idx) if b != a + 1)
        assert chunks <= 4
        # a chunk boundary inside a document: the target after another document's chunk gets no loss
        for a, b in itertools.pairwise(idx):
            assert w.loss_mask[b] == (b == a + 1)


def test_bad_arguments():
    with pytest.raises(UserError, match="window"):
        list(pack([Doc([5, 2])], 1, A))
    with pytest.raises(UserError, match="interleave"):
        list(pack([Doc([5, 2])], 8, A, interleave_chunks=0))
    with pytest.raises(UserError, match="tag"):
        list(pack([Doc([5, 2], [9] * 8)], 8, A))


def test_lookahead_fills_room_with_a_later_whole_document():
    a, b, c = [10] * 6, [20] * 5, [30] * 3
    plain = [w.input_ids for w in pack([Doc(a), Doc(b), Doc(c)], 10, A, pad_id=P)]
    assert plain == [[A] + a + [20] * 3, [A, 20, 20] + c + [P] * 4]  # b is split
    ahead = [w.input_ids for w in pack([Doc(a), Doc(b), Doc(c)], 10, A, pad_id=P, lookahead=2)]
    assert ahead == [[A] + a + c, [A] + b + [P] * 4]  # c fills the room, b stays whole


def test_lookahead_keeps_every_token_and_splits_less():
    rng = random.Random(5)
    docs = [
        Doc([1000 * i + j for j in range(int(rng.lognormvariate(3, 1.0)) + 1)], [7] if i % 2 else None)
        for i in range(300)
    ]

    def split_docs(windows):
        seen: dict[int, int] = {}
        for w in windows:
            for d in set(w.doc_ids) - {0}:
                if w.sources[d] != "<pad>":
                    tok = next(t for t, x, tag in zip(w.input_ids, w.doc_ids, w.is_tag) if x == d and not tag)
                    seen[tok // 1000] = seen.get(tok // 1000, 0) + 1
        return sum(n > 1 for n in seen.values())

    plain = list(pack(docs, 64, A, pad_id=P))
    ahead = list(pack(docs, 64, A, pad_id=P, lookahead=8))
    # every document comes back, whole or as consecutive pieces
    joined: dict[int, list[int]] = {}
    for p in _reconstruct(ahead):
        joined.setdefault(p[0] // 1000, []).extend(p)
    assert sorted(joined) == list(range(300)) and all(joined[i] == docs[i].ids for i in joined)
    assert split_docs(ahead) < split_docs(plain)
