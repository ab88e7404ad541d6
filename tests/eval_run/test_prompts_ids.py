"""Runners tokenize a call's prompts several to a tokenizer call (parallel in a fast tokenizer):
the ids must be exactly those of one prompt a call, BOS handling included."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("bytes_per_call", [1, 50, 1 << 22])
def test_batched_ids_equal_one_prompt_a_call(bpe_tokenizer, byte_tokenizer, bytes_per_call):
    from harness.models.runners.common import prompt_ids, prompts_ids

    for tok in (bpe_tokenizer, byte_tokenizer):
        bos = tok.bos_token or ""
        prompts = [
            "The grass is green. " * 20 + "What is the number?",
            bos + "A chat template already wrote BOS.",  # must not get a second one
            "",
            "short",
            bos + "again with BOS " * 5,
            "tail without BOS " * 9,
            "多字节的文本 " * 7 + "é",
        ]
        got = list(prompts_ids(tok, prompts, bytes_per_call=bytes_per_call))
        assert got == [prompt_ids(tok, p) for p in prompts]
    first = prompt_ids(bpe_tokenizer, "short")
    assert first[0] == bpe_tokenizer.bos_token_id  # the case the BOS check guards is exercised


def test_a_call_holds_at_most_bytes_per_call_of_utf8(bpe_tokenizer):
    """The budget is UTF-8 bytes, not characters: Chinese text is ~2 tokens a character in a byte-level
    BPE, and a budget in characters let one call of it hold 8.5M tokens (+884 MiB)."""
    from harness.models.runners.common import prompts_ids

    calls = []

    def spy(texts, **kw):
        calls.append(len(texts))
        return bpe_tokenizer(texts, **kw)

    spy.bos_token = bpe_tokenizer.bos_token
    prompts = ["中文" * 5] * 4  # 10 characters, 30 bytes each
    list(prompts_ids(spy, prompts, bytes_per_call=60))
    assert calls == [2, 2]
    calls.clear()
    list(prompts_ids(spy, ["ascii text"] * 4, bytes_per_call=20))  # 10 bytes each
    assert calls == [2, 2]
