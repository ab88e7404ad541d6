"""Middle truncation of a prompt to a token budget, as LongBench/pred.py does it.

pred.py tokenizes the whole prompt (special tokens included, so BOS counts), and when it has more
than max_length tokens keeps the first int(max_length/2) and the last int(max_length/2) tokens,
each half decoded with skip_special_tokens and the two strings concatenated. The instruction at the
start and the question at the end survive; the middle of the context goes. (lm-eval's HF backend
truncates from the left instead, which drops the instruction: a known source of wrong numbers.)
"""

from __future__ import annotations

from typing import Any

from harness.models.tokenization import count_tokens


def default_max_length(model_context: int, max_new_tokens: int) -> int:
    """The exact-length protocol's prompt budget: the context minus the task's max new tokens (the
    reference protocol's, pred.py's model2maxlen, is tasks.longbench.protocol.reference_budget)."""
    return model_context - max_new_tokens


def middle_truncate(prompt: str, tokenizer, max_length: int, refit: bool = True) -> tuple[str, dict[str, Any]]:
    """(prompt kept, record of what was done). max_length <= 0 means no truncation. `refit` False
    (the reference protocol) keeps pred.py's cut as it is, a seam merge or two over the budget
    included: that budget leaves a margin below the context, and the loop checks the fit."""
    ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    info: dict[str, Any] = {"rule": "middle", "max_length": max_length, "original_tokens": len(ids), "truncated": False}
    if max_length <= 0 or len(ids) <= max_length:
        return prompt, info
    half = int(max_length / 2)
    left = right = half
    kept = tokenizer.decode(ids[:left], skip_special_tokens=True) + tokenizer.decode(
        ids[-right:], skip_special_tokens=True
    )
    info["truncated"] = True
    if not refit:
        return kept, info
    # Re-encoding the joined halves can merge differently at the seam (or re-add BOS) and come out
    # a few tokens over; pred.py would then run past the model's context. Trim the halves until it
    # fits; `refit_tokens` records how far we went beyond pred.py's cut (0 almost always).
    while (n := count_tokens(tokenizer, kept)) > max_length and left + right > 0:
        excess = n - max_length
        cut_left = min(left, (excess + 1) // 2)
        left, right = left - cut_left, max(0, right - max(1, excess - cut_left))
        kept = tokenizer.decode(ids[:left], skip_special_tokens=True) + (
            tokenizer.decode(ids[-right:], skip_special_tokens=True) if right else ""
        )
    info["refit_tokens"] = 2 * half - left - right
    return kept, info
