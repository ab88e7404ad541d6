"""ALCE scored as HELMET scores a completion: with no chat template (a base model) eval.py puts the
system template "Answer:" in front of the output (eval.py:101-103) before eval_alce reads it; a chat
reply is read as it is. Under the reference protocol our ALCE tasks do the same (version 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.helmet import alce
from tasks.registry import get_task

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def released(monkeypatch):
    monkeypatch.setenv("HARNESS_HELMET", str(FIXTURES))


def test_qampari_first_item_after_answer_is_lost_for_a_completion(released, bpe_tokenizer):
    task = get_task("helmet_alce_qampari")
    assert task.protocol == "reference" and task.version == "2"
    completion = task.sample(8192, 0, 42, bpe_tokenizer)
    chat = completion.without_answer_prefix(len(bpe_tokenizer(completion.input)["input_ids"]))
    groups = completion.metadata["answers"]
    assert 2 <= len(groups) <= 5  # rec@5's denominator is every group
    reply = " " + ", ".join(g[0] for g in groups)  # every answer, once
    # eval_alce reads "Answer: a1, a2, ...": the first item normalizes to "answer a1" and misses
    assert task.score(reply, completion) == pytest.approx((len(groups) - 1) / len(groups))
    assert task.score(reply, chat) == 1.0  # a chat reply is read without "Answer:"
    exact = get_task("helmet_alce_qampari")
    exact.set_protocol("exact-length")
    assert exact.score(reply, exact.sample(8192, 0, 42, bpe_tokenizer)) == 1.0  # our own protocol: unchanged


def test_an_empty_completion_is_the_sentence_answer_scored_not_skipped(released, bpe_tokenizer, monkeypatch):
    monkeypatch.setattr(alce, "sentences", lambda text: [text] if text else [])  # punkt is not installed here
    rec = get_task("helmet_alce_asqa_citation_rec")
    completion = rec.sample(8192, 0, 42, bpe_tokenizer)
    chat = completion.without_answer_prefix(len(bpe_tokenizer(completion.input)["input_ids"]))
    # eval_alce skips an output without a sentence of 5 characters; "Answer:" is one (7 characters)
    assert rec.unscored_reason("", completion) is None
    assert rec.unscored_reason("", chat) is not None
