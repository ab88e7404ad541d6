"""Which released rows fit a token budget, and the exact-length graph fitted to its budget.

A released row fits when tokens(prompt) + the tokens to generate <= the budget, counted with the
model's tokenizer (special tokens included). A 1M-set prompt runs to 1.75M characters; counting it
whole to learn that it does not fit an 8K budget would cost seconds per row, so a row is counted
on growing prefixes that end at a line end: once a prefix is over the cap, so is the prompt. That
holds for tokenizers that never merge across a newline (byte-level BPE, whose pre-tokenizer splits
there, and SentencePiece models, whose newline is a byte token of its own).
"""

from __future__ import annotations

from tasks.ruler.fitting import Counter, fit


def tokens_within(counter: Counter, text: str, cap: int) -> int | None:
    """tokens(text) when it is at most `cap`, else None (counting prefixes of about 4x cap chars, doubling)."""
    size = 4 * (cap + 1)
    while True:
        if size >= len(text):
            t = counter.count(text)
            return t if t <= cap else None
        cut = text.rfind("\n", 0, size) + 1 or size
        if counter.count(text[:cut]) > cap:
            return None
        size *= 2


def fitting_rows(rows: tuple, cap: int, counter: Counter, key: tuple) -> tuple:
    """The rows whose prompt takes at most `cap` tokens, in their order (cached per tokenizer and key)."""
    if cap < 1:
        return ()
    table = ("graphwalks-fitting", *key, cap)
    if table not in counter.tables:
        counter.tables[table] = tuple(r for r in rows if tokens_within(counter, r.prompt, cap) is not None)
    return counter.tables[table]


def maximal_fit(plan, counter: Counter, length: int, to_generate: int, what: str) -> tuple[int, str, int]:
    """(edges, prompt, tokens): the most edges n with tokens(prompt) + to_generate <= length such
    that n + 1 edges overflow (RULER's fit, then a walk up over what its prediction left)."""
    n, prompt, _, tokens = fit(plan, counter, length, to_generate, what)
    budget = length - to_generate
    while True:
        bigger = plan.render(n + 1)[0]
        t = counter.count(bigger)
        if t > budget:
            return n, prompt, tokens
        n, prompt, tokens = n + 1, bigger, t
