"""LongBench v2's middle truncation (pred.py, query_llm).

pred.py encodes the prompt with the model's tokenizer (special tokens included, so BOS counts) and,
when it has more than max_len tokens, keeps ids[:max_len//2] + ids[-max_len//2:] (floor and ceiling
halves: exactly max_len tokens, unlike v1's int(max_len/2) twice) and decodes that one list with
skip_special_tokens. The instruction at the start and the question and choices at the end survive.

Re-encoding the decoded text can merge differently at the seam and come out a token or two over
max_len. When max_len is what the model's context allows, that would run past the context; then the
halves are trimmed until it fits, and `refit_tokens` records how many tokens beyond pred.py's cut
were dropped (0 almost always). When max_len is pred.py's own cap (120,000) below what the context
allows (`limit`), pred.py's text is kept as it is, as pred.py sends it.
"""

from __future__ import annotations

from typing import Any

from harness.models.tokenization import count_tokens


def middle_truncate(prompt: str, tokenizer, max_len: int, limit: int | None = None) -> tuple[str, dict[str, Any]]:
    """(prompt kept, record of what was done). The cut keeps max_len tokens; the kept text is then
    trimmed only while it re-encodes over `limit` (default max_len): the most the context allows."""
    limit = max_len if limit is None else limit
    ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    info: dict[str, Any] = {"rule": "middle", "max_length": max_len, "original_tokens": len(ids), "truncated": False}
    if len(ids) <= max_len:
        return prompt, info
    left, right = max_len // 2, -(-max_len // 2)

    def cut(left: int, right: int) -> str:
        return tokenizer.decode(ids[:left] + (ids[-right:] if right else []), skip_special_tokens=True)

    kept = cut(left, right)
    while (n := count_tokens(tokenizer, kept)) > limit and left + right > 0:
        excess = n - limit
        take_left = min(left, (excess + 1) // 2)
        left, right = left - take_left, max(0, right - max(1, excess - take_left))
        kept = cut(left, right)
    info["truncated"] = True
    info["refit_tokens"] = max_len - left - right
    return kept, info
