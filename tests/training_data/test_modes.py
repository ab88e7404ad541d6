"""Modes: labels, RoPE positions and masks on hand-built packs, against rules written out by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from harness.core.errors import UserError
from training.attention.dense import MAX_DENSE_TOKENS, dense_mask
from training.modes import MODES, build_batch, check_mode
from training.packing import pack

A = 1


@dataclass
class Doc:
    ids: list[int]
    tag_ids: list[int] | None = None
    source: str = "s"


def _windows(interleave=None, tags=None):
    docs = [Doc([10, 11, 12, 2], tags), Doc([20, 21, 2], tags), Doc([30, 31, 32, 33, 34, 2], tags)]
    return list(pack(docs, 16, A, interleave_chunks=interleave, seed=2, pad_id=0))


def _brute_mask(doc_ids: list[int], mode: str) -> list[list[bool]]:
    """The table in training.md, spelled out per pair."""
    L = len(doc_ids)
    m = [[False] * L for _ in range(L)]
    for q in range(L):
        for k in range(q + 1):
            if mode == "full":
                m[q][k] = True
            elif mode in ("intradoc", "intradoc-reset"):
                m[q][k] = doc_ids[q] == doc_ids[k]
            else:
                m[q][k] = doc_ids[q] == doc_ids[k] or k == 0
    return m


def test_labels_and_positions_hand_built():
    (w,) = _windows()
    assert w.input_ids == [A, 10, 11, 12, 2, 20, 21, 2, 30, 31, 32, 33, 34, 2, 0, 0]
    for mode in MODES:
        b = build_batch([w], mode)
        assert b.labels[0].tolist() == [-100, -100, 11, 12, 2, -100, 21, 2, -100, 31, 32, 33, 34, 2, -100, -100]
        assert b.num_loss_tokens() == 10
        assert b.doc_ids[0].tolist() == w.doc_ids
        expected = [0, 0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4, 5, 0, 1] if mode == "intradoc-reset" else list(range(16))
        assert b.position_ids[0].tolist() == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("interleave,tags", [(None, None), (3, None), (None, [7, 8]), (2, [7])])
def test_dense_mask_matches_rules(mode, interleave, tags):
    if interleave and mode not in ("intradoc", "anchor"):
        with pytest.raises(UserError, match="interleave"):
            check_mode(mode, interleave)
        return
    windows = _windows(interleave, tags)
    b = build_batch(windows, mode)
    mask = dense_mask(b.doc_ids, mode)
    assert mask.shape == (len(windows), 1, 16, 16)
    for i, w in enumerate(windows):
        assert mask[i, 0].tolist() == _brute_mask(w.doc_ids, mode)


def test_anchor_mask_specific_pairs():
    (w,) = _windows()
    m = dense_mask(torch.tensor([w.doc_ids]), "anchor")[0, 0]
    assert m[5, 0] and m[5, 5] and not m[5, 4]  # doc 2's first token: the anchor and itself
    assert m[0].sum() == 1  # the anchor sees only itself
    intra = dense_mask(torch.tensor([w.doc_ids]), "intradoc")[0, 0]
    assert not intra[5, 0] and not intra[1, 0]  # without the anchor mode, documents do not see it


def test_check_mode_and_dense_limit():
    with pytest.raises(UserError, match="unknown --mode"):
        check_mode("sliding")
    check_mode("anchor", 4)
    with pytest.raises(ValueError, match="16384"):
        dense_mask(torch.zeros(1, MAX_DENSE_TOKENS + 1, dtype=torch.long), "anchor")
    from training.attention.flex import block_mask

    with pytest.raises(ValueError, match="sdpa-doc on CPU"):
        block_mask(torch.zeros(1, MAX_DENSE_TOKENS + 1, dtype=torch.long), "anchor")


@pytest.mark.parametrize("mode", MODES)
def test_pairs_kept_counts_the_mask(mode):
    from training.attention.segments import pairs_kept

    for w in _windows(3 if mode in ("intradoc", "anchor") else None, [7]):
        assert pairs_kept(w.doc_ids, mode) == int(dense_mask(torch.tensor([w.doc_ids]), mode).sum())


def test_iter_batches_groups_windows():
    from training.modes import iter_batches

    windows = _windows() * 5
    sizes = [b.shape for b in iter_batches(iter(windows), 2, "anchor")]
    assert sizes == [(2, 16), (2, 16), (1, 16)]
