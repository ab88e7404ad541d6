"""Middle truncation of a prompt to a token budget, as LongBench/pred.py does it.

pred.py tokenizes the whole prompt (special tokens included, so BOS counts), and when it has more
than max_length tokens keeps the first int(max_length/2) and the last int(max_length/2) tokens,
each half decoded with skip_special_tokens and the two strings concatenated. The instruction at the
start and the question at the end survive; the middle of the context goes. (lm-eval's HF backend
truncates from the left instead, which drops the instruction: a known source of wrong numbers.)
"""

from __future__ import annotations

from typing import Any


def default_max_length(model_context: int, max_new_tokens: int) -> int:
    """pred.py's budget for a model: its context minus the task's max new tokens."""
    return model_context - max_new_tokens


def middle_truncate(prompt: str, tokenizer, max_length: int) -> tuple[str, dict[str, Any]]:
    """(prompt kept, record of what was done). max_length <= 0 means no truncation."""
    ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    info: dict[str, Any] = {"rule": "middle", "max_length": max_length, "original_tokens": len(ids), "truncated": False}
    if max_length <= 0 or len(ids) <= max_length:
        return prompt, info
    half = int(max_length / 2)
    kept = tokenizer.decode(ids[:half], skip_special_tokens=True) + tokenizer.decode(ids[-half:], skip_special_tokens=True)
    info["truncated"] = True
    return kept, info
