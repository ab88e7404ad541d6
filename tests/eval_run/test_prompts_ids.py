"""Runners tokenize a call's prompts several to a tokenizer call (parallel in a fast tokenizer):
the ids must be exactly those of one prompt a call, BOS handling included."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("chars_per_call", [1, 50, 1 << 22])
def test_batched_ids_equal_one_prompt_a_call(bpe_tokenizer, byte_tokenizer, chars_per_call):
    from harness.runners.common import prompt_ids, prompts_ids

    for tok in (bpe_tokenizer, byte_tokenizer):
        bos = tok.bos_token or ""
        prompts = [
            "The grass is green. " * 20 + "What is the number?",
            bos + "A chat template already wrote BOS.",  # must not get a second one
            "",
            "short",
            bos + "again with BOS " * 5,
            "tail without BOS " * 9,
        ]
        got = list(prompts_ids(tok, prompts, chars_per_call=chars_per_call))
        assert got == [prompt_ids(tok, p) for p in prompts]
    first = prompt_ids(bpe_tokenizer, "short")
    assert first[0] == bpe_tokenizer.bos_token_id  # the case the BOS check guards is exercised
