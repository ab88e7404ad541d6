"""Exact length fitting shared by the RULER tasks, and per-sample random generators.

A task describes a sample as a `Plan`: `render(n)` builds the prompt with n haystack units
(noise lines, essay words, distractor needles, list words, documents) and `model(n)` predicts
the tokens the haystack adds, from per-tokenizer piece costs measured once and cached.
`fit` renders one small version to learn the fixed part, solves model(n) for the budget,
tokenizes the candidate once to verify, and moves by whole units only when the prediction
missed. For tokenizers whose pre-tokenizer splits at unit boundaries (byte-level BPE) the
prediction is exact, so a sample usually costs one tokenization of its final prompt.
"""

from __future__ import annotations

import hashlib
import random
from typing import Protocol

import numpy as np

from harness.errors import UserError


def sample_rng(*parts) -> random.Random:
    """A private generator from a stable hash of (task, version, length, index, seed, ...)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def np_rng(rng: random.Random) -> np.random.Generator:
    return np.random.default_rng(rng.getrandbits(64))


class Counter:
    """Token counts for one tokenizer: whole prompts (specials included) and cached pieces."""

    def __init__(self, tokenizer):
        # a transformers fast tokenizer, or a bare `tokenizers.Tokenizer` (see light_tokenizer)
        self.backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        self._pieces: dict[str, int] = {}
        self.tables: dict = {}  # per-tokenizer tables the task families build once

    def count(self, text: str) -> int:
        return len(self.backend.encode(text, add_special_tokens=True).ids)

    def pieces(self, texts) -> list[int]:
        """Tokens of each text alone, without special tokens (cached; one batch for the misses)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._pieces]
        if missing:
            for t, enc in zip(missing, self.backend.encode_batch(missing, add_special_tokens=False)):
                self._pieces[t] = len(enc.ids)
            if len(self._pieces) > 2_000_000:  # bound memory for very long runs; recomputed on demand
                self._pieces.clear()
                return self.pieces(texts)
        return [self._pieces[t] for t in texts]


    def joined_costs(self, texts: list[str]) -> np.ndarray:
        """Tokens of each text as it sits in a run of such texts, from ONE encode of their
        concatenation (token start offsets split the run at text boundaries).

        Much cheaper than a batch of thousands of short strings; exact for pre-tokenizers that
        split before a leading space (byte-level BPE). Estimates only: `fit` verifies.
        """
        if not texts:
            return np.zeros(0, dtype=np.int64)
        enc = self.backend.encode("".join(texts), add_special_tokens=False)
        starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.offsets))
        bounds = np.cumsum(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)))
        upto = np.searchsorted(starts, bounds, side="left")
        upto[-1] = len(enc.ids)
        return np.diff(np.concatenate([[0], upto]))


_COUNTERS: dict[int, tuple[object, Counter]] = {}


def counter_for(tokenizer) -> Counter:
    """One Counter per tokenizer object (kept alive with it), so tables are built once."""
    hit = _COUNTERS.get(id(tokenizer))
    if hit is None or hit[0] is not tokenizer:
        hit = (tokenizer, Counter(tokenizer))
        _COUNTERS[id(tokenizer)] = hit
    return hit[1]


def light_tokenizer(path: str):
    """The Rust tokenizer of a Hugging Face tokenizer directory without importing transformers.

    Counts equal the transformers tokenizer's when its tokenizer.json adds the special tokens
    (post-processor), as the fast tokenizers of current models do; used where start-up matters.
    """
    import os

    from tokenizers import Tokenizer

    return Tokenizer.from_file(os.path.join(path, "tokenizer.json"))


class Plan(Protocol):
    min_units: int
    max_units: int | None  # None: unbounded

    def render(self, n: int) -> tuple[str, str]:
        """(input, answer_prefix) with n haystack units."""

    def model(self, n: np.ndarray) -> np.ndarray:
        """Predicted haystack tokens for each n (monotone non-decreasing); only differences matter."""


def _solve(plan: Plan, offset: float, budget: int, hi_hint: int) -> int:
    """Largest n in [min_units, max_units] with offset + model(n) <= budget (min_units if none)."""
    lo = plan.min_units
    hi = max(hi_hint, lo + 1)
    cap = plan.max_units
    # grow the bracket until it overflows (or reaches the cap)
    while (cap is None or hi < cap) and offset + float(plan.model(np.array([hi]))[0]) <= budget:
        hi *= 2
    if cap is not None:
        hi = min(hi, cap)
    if offset + float(plan.model(np.array([hi]))[0]) <= budget:
        return hi
    # vectorised search: evaluate a grid, then bisect inside the cell
    while hi - lo > 1:
        grid = np.unique(np.linspace(lo, hi, num=min(64, hi - lo + 1)).astype(np.int64))
        ok = offset + plan.model(grid) <= budget
        good = grid[ok]
        bad = grid[~ok]
        lo = int(good.max()) if good.size else lo
        hi = int(bad.min()) if bad.size else hi
    return lo


def fit(plan: Plan, counter: Counter, length: int, max_new_tokens: int, what: str,
        max_rounds: int = 12) -> tuple[int, str, str, int]:
    """Largest unit count n with tokens(prompt) + max_new_tokens <= length.

    Returns (n, input, answer_prefix, tokens). `what` names the task for the error raised when
    even the smallest haystack overflows.
    """
    budget = length - max_new_tokens
    n0 = plan.min_units
    inp, pre = plan.render(n0)
    t0 = counter.count(inp + pre)
    if t0 > budget:
        raise UserError(
            f"{what}: length {length} is below the task's fixed parts ({t0} prompt tokens + "
            f"{max_new_tokens} to generate); use a length of at least {t0 + max_new_tokens}"
        )
    seen: dict[int, tuple[int, str, str]] = {n0: (t0, inp, pre)}
    offset = t0 - float(plan.model(np.array([n0]))[0])
    hint = plan.guess(budget - t0) if hasattr(plan, "guess") else n0 + 1
    n_cal = plan.calibration_units(hint) if hasattr(plan, "calibration_units") else n0
    if n_cal > n0:
        # the smallest haystack can differ in shape from a long one (needles side by side in an
        # essay); a mid-sized render teaches the fixed part for a small fraction of a full pass
        inp, pre = plan.render(n_cal)
        t_cal = counter.count(inp + pre)
        seen[n_cal] = (t_cal, inp, pre)
        offset = t_cal - float(plan.model(np.array([n_cal]))[0])
    n = _solve(plan, offset, budget, max(hint, n0 + 1))
    for _ in range(max_rounds):
        if n not in seen:
            inp, pre = plan.render(n)
            seen[n] = (counter.count(inp + pre), inp, pre)
        t, inp, pre = seen[n]
        offset = t - float(plan.model(np.array([n]))[0])
        if t <= budget:
            at_cap = plan.max_units is not None and n >= plan.max_units
            nxt = seen.get(n + 1)
            if at_cap or (nxt is not None and nxt[0] > budget):
                return n, inp, pre, t
            if offset + float(plan.model(np.array([n + 1]))[0]) > budget:
                return n, inp, pre, t
            new = _solve(plan, offset, budget, n + 1)
            n = max(new, n + 1)
        else:
            new = _solve(plan, offset, budget, n)
            n = min(new, n - 1)
            if n < plan.min_units:
                n = plan.min_units
    # the model keeps missing (a tokenizer that is far from additive): walk one unit at a time
    fitting = [k for k, v in seen.items() if v[0] <= budget]
    n = max(fitting)
    while True:
        if plan.max_units is not None and n >= plan.max_units:
            break
        if n + 1 not in seen:
            inp, pre = plan.render(n + 1)
            seen[n + 1] = (counter.count(inp + pre), inp, pre)
        if seen[n + 1][0] > budget:
            break
        n += 1
    t, inp, pre = seen[n]
    return n, inp, pre, t


def cumulative(costs: np.ndarray) -> np.ndarray:
    """[0, c0, c0+c1, ...] as int64: tokens of the first n units."""
    out = np.zeros(len(costs) + 1, dtype=np.int64)
    np.cumsum(costs, out=out[1:])
    return out
