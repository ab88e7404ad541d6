"""Token samples for the diagnostic: exact lengths, BOS first, disjoint windows of the source text."""

from __future__ import annotations

import pytest

from harness.core.errors import UserError
from harness.diagnose.text import essays_dir, token_samples


def _body(tok, samples):
    return [s[1:] if s[0] == tok.bos_token_id else s for s in samples]


def test_essays_give_disjoint_windows_with_bos(bpe_tokenizer):
    samples = token_samples(bpe_tokenizer, "essays", num_samples=4, length=300)
    assert [len(s) for s in samples] == [300] * 4
    assert all(s[0] == bpe_tokenizer.bos_token_id for s in samples)
    first_essay = min(essays_dir().glob("*.txt")).read_text(encoding="utf-8")
    expected = bpe_tokenizer(first_essay, add_special_tokens=False)["input_ids"][: 299 * 2]
    assert samples[0][1:] + samples[1][1:] == expected


def test_text_file_without_bos(byte_tokenizer, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abcdefghij" * 10, encoding="utf-8")
    samples = token_samples(byte_tokenizer, str(path), num_samples=3, length=40)
    assert byte_tokenizer.bos_token_id is not None  # it has one, so windows start with it
    assert all(len(s) == 40 and s[0] == byte_tokenizer.bos_token_id for s in samples)
    # 100 bytes cannot hold 3 disjoint windows of 39: evenly spaced, overlapping, first and last ends
    ids = byte_tokenizer("abcdefghij" * 10, add_special_tokens=False)["input_ids"]
    assert samples[0][1:] == ids[:39] and samples[-1][1:] == ids[-39:]


def test_too_short_text_is_a_user_error(bpe_tokenizer, tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("tiny", encoding="utf-8")
    with pytest.raises(UserError, match="fewer than one sample"):
        token_samples(bpe_tokenizer, str(path), num_samples=1, length=100)
    with pytest.raises(UserError, match="neither corpus, essays nor an existing text file"):
        token_samples(bpe_tokenizer, str(tmp_path / "missing.txt"), num_samples=1, length=100)


def test_training_corpus_source(bpe_tokenizer):
    samples = token_samples(bpe_tokenizer, "corpus", num_samples=2, length=200)
    assert [len(s) for s in samples] == [200, 200] and samples[0] != samples[1]
