"""Exact length fitting shared by the RULER tasks, and per-sample random generators.

A task describes a sample as a `Plan`: `render(n)` builds the prompt with n haystack units
(noise lines, essay words, distractor needles, list words, documents) and `model(n)` predicts
the tokens the haystack adds, from per-tokenizer piece costs measured once and cached.
`fit` renders one small version to learn the fixed part, solves model(n) for the budget,
tokenizes the candidate once to verify, and moves by whole units only when the prediction
missed. For tokenizers whose pre-tokenizer splits at unit boundaries (byte-level BPE) the
prediction is exact, so a sample usually costs one tokenization of its final prompt. Piece
costs for such tokenizers are counted here from a Python pre-tokenization of ASCII text and cached
per-pre-token counts (Counter._costs): the tokenizer's numbers at a fraction of an encode.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Protocol, cast

import numpy as np

from harness.core.errors import UserError


def sample_rng(*parts) -> random.Random:
    """A private generator from a stable hash of (task, version, length, index, seed, ...)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def np_rng(rng: random.Random) -> np.random.Generator:
    return np.random.default_rng(rng.getrandbits(64))


# The byte-level BPE pre-tokenizer's pattern (tokenizers' ByteLevel with use_regex, GPT-2's
# pattern), restricted to ASCII: there \p{L} is [A-Za-z], \p{N} is [0-9] and \s is [\t\n\v\f\r ].
# It runs over many texts joined by \x1c: a separator no other alternative takes (nor any fast text
# holds), and whitespace at a text's end looks past it as at the end of a string; on one text
# without \x1c it is GPT-2's pattern.
_BYTELEVEL_JOINED = re.compile(
    r"""\x1c|'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9\x1c]+|\s+(?![^\s\x1c])|\s+""", re.ASCII
)
_SEP = "\x1c"
# ASCII texts the fast path leaves to the tokenizer: those holding the separators \x1c-\x1f
# (whitespace to some regex engines and not to others) or an added token's text; non-ASCII texts
# go there too
_NOT_FAST = ["\x1c", "\x1d", "\x1e", "\x1f"]
_SEP_COST = -(1 << 40)  # marks the separator among the per-pre-token counts
_PROBE = (
    "Some special magic numbers are hidden: 1234567, a-b, 8f3e1c2a-77d0-4b1e-9a2f-0c1d2e3f4a5b.\n"
    "It's they're we've I'm you'll he'd 's 't  two  spaces\t\ttabs\n\n\nDocument 12:\nx \n y "
    "!!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~ 0x1F 3.14 ... -- '' \r\n end  "
    + "".join(chr(i) for i in range(128) if not 0x1C <= i <= 0x1F)
)


class Counter:
    """Token counts for one tokenizer: whole prompts (specials included) and cached pieces."""

    def __init__(self, tokenizer):
        # a transformers fast tokenizer, or a bare `tokenizers.Tokenizer` (see light_tokenizer)
        self.backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        self._pieces: dict[str, int] = {}
        self.tables: dict = {}  # per-tokenizer tables the task families build once
        self._fast = None  # None: not probed yet; False: off; else the byte map for ASCII
        self._words: dict[str, int] = {}  # tokens of each pre-token (fast path)
        self._needles = _NOT_FAST  # texts holding one of these go to the tokenizer (_needs_tokenizer)
        self._needles_re = None  # the same as one pattern, for long lists

    def count(self, text: str) -> int:
        return len(self.backend.encode(text, add_special_tokens=True))  # len(): no list of ids

    def pieces(self, texts) -> list[int]:
        """Tokens of each text alone, without special tokens (cached; one batch for the misses)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._pieces]
        if missing:
            self._pieces.update(zip(missing, self._costs(missing)))
            if len(self._pieces) > 2_000_000:  # bound memory for very long runs; recomputed on demand
                self._pieces.clear()
                return self.pieces(texts)
        return [self._pieces[t] for t in texts]

    # -- piece costs -----------------------------------------------------------------------------
    def _costs(self, texts: list[str]) -> list[int]:
        """Tokens of each text alone. For a byte-level BPE tokenizer (no normalizer, GPT-2
        pre-tokenizer pattern) an ASCII text is split into pre-tokens here with the same pattern
        and its count is the sum of cached per-pre-token counts: the same number the tokenizer
        gives (its model runs on each pre-token alone), at a fraction of an encode's cost. Other
        texts, and other tokenizers, go through the tokenizer."""
        if self._fast is None:
            self._fast = self._probe_fast()
        out: list[int | None] = [None] * len(texts)
        slow = list(range(len(texts)))
        if self._fast:
            needs_tokenizer = self._needs_tokenizer
            fast = [i for i, t in enumerate(texts) if t.isascii()]
            slow = [i for i, t in enumerate(texts) if not t.isascii()] if len(fast) < len(texts) else []
            # (an added token's text across a join only costs this shortcut)
            if needs_tokenizer("".join([texts[i] for i in fast])):
                slow += [i for i in fast if needs_tokenizer(texts[i])]
                fast = [i for i in fast if not needs_tokenizer(texts[i])]
            if fast:
                # one pass of the pattern over all the fast texts, \x1c-separated
                split = _BYTELEVEL_JOINED.findall(_SEP.join([texts[i] for i in fast]))
                words = self._words
                new: list[str] | set[str] = [w for w in set(split) if w not in words]
                if new:
                    if len(words) > 1_000_000:  # bound memory; recomputed on demand
                        words.clear()
                        new = set(split)
                    tokenize, table = self.backend.model.tokenize, self._fast
                    for w in new:
                        words[w] = len(tokenize(w.translate(table))) if w != _SEP else _SEP_COST
                vals = np.fromiter(map(words.__getitem__, split), dtype=np.int64, count=len(split))
                seps = np.flatnonzero(vals == _SEP_COST)
                cum = cumulative(np.where(vals == _SEP_COST, 0, vals))
                totals = cum[np.append(seps, len(vals))] - cum[np.concatenate([[0], seps + 1])]
                for i, v in zip(fast, totals.tolist()):
                    out[i] = v
        if slow:
            encs = self.backend.encode_batch([texts[i] for i in slow], add_special_tokens=False)
            for i, enc in zip(slow, encs):
                out[i] = len(enc.ids)
        return cast("list[int]", out)  # every index was filled, fast or slow

    def _needs_tokenizer(self, text: str) -> bool:
        """Whether an ASCII text holds a separator \\x1c-\\x1f or an added token's text."""
        if len(self._needles) <= 64:
            return any(n in text for n in self._needles)  # substring scans: faster than a regex here
        if self._needles_re is None:
            self._needles_re = re.compile("|".join(re.escape(n) for n in sorted(self._needles, key=len, reverse=True)))
        return self._needles_re.search(text) is not None

    def _probe_fast(self):
        """The ASCII byte map when the fast path applies to this tokenizer (checked on a probe
        text against the tokenizer itself), else False."""
        b = self.backend
        try:
            pt, model = b.pre_tokenizer, b.model
            if (
                b.normalizer is not None
                or type(pt).__name__ != "ByteLevel"
                or not pt.use_regex
                or pt.add_prefix_space
                or type(model).__name__ != "BPE"
                or model.dropout
            ):
                return False
            # the byte-to-unicode map of ByteLevel, read off the tokenizer for each ASCII char
            table = {}
            for i in range(128):
                mapped = pt.pre_tokenize_str(chr(i))
                if len(mapped) != 1 or len(mapped[0][0]) != 1:
                    return False
                table[i] = mapped[0][0]
            if [w.translate(table) for w in _BYTELEVEL_JOINED.findall(_PROBE)] != [
                w for w, _ in pt.pre_tokenize_str(_PROBE)
            ]:
                return False
            # the tokenizer splits added tokens (specials) off before pre-tokenizing
            self._needles = _NOT_FAST + sorted({t.content for t in b.get_added_tokens_decoder().values() if t.content})
            self._needles_re = None
            if self._needs_tokenizer(_PROBE):
                return False
            probe_lines = _PROBE.split("\n")
            self._fast = table
            fast = self._costs(probe_lines + [_PROBE])
            exact = [len(e.ids) for e in b.encode_batch(probe_lines + [_PROBE], add_special_tokens=False)]
            self._words.clear()
            return table if fast == exact else False
        except Exception:  # an unusual tokenizer object: the tokenizer path is always right  # noqa: BLE001
            return False

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
        grid = np.linspace(lo, hi, num=min(64, hi - lo + 1)).astype(np.int64)
        grid = grid[np.concatenate(([True], grid[1:] != grid[:-1]))]  # sorted: np.unique without its import of numpy.ma
        ok = offset + plan.model(grid) <= budget
        good = grid[ok]
        bad = grid[~ok]
        lo = int(good.max()) if good.size else lo
        hi = int(bad.min()) if bad.size else hi
    return lo


def fit(
    plan: Plan, counter: Counter, length: int, max_new_tokens: int, what: str, max_rounds: int = 12
) -> tuple[int, str, str, int]:
    """Largest unit count n with tokens(prompt) + max_new_tokens <= length.

    Returns (n, input, answer_prefix, tokens). `what` names the task for the error raised when
    even the smallest haystack overflows.
    """
    budget = length - max_new_tokens
    seen: dict[int, tuple[int, str, str]] = {}  # unit count -> (tokens, input, answer_prefix)
    offset, hint = _calibrate(plan, counter, length, max_new_tokens, what, seen)
    n0 = plan.min_units
    n = _solve(plan, offset, budget, max(hint, n0 + 1))
    for _ in range(max_rounds):
        t, inp, pre = _measured(plan, counter, n, seen)
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
            n = max(n, plan.min_units)
    return _walk_up(plan, counter, budget, seen)


def _measured(plan: Plan, counter: Counter, n: int, seen: dict) -> tuple[int, str, str]:
    """(tokens, input, answer_prefix) with n units, rendered and counted once."""
    if n not in seen:
        inp, pre = plan.render(n)
        seen[n] = (counter.count(inp + pre), inp, pre)
    return seen[n]


def _calibrate(
    plan: Plan, counter: Counter, length: int, max_new_tokens: int, what: str, seen: dict
) -> tuple[float, int]:
    """(offset, hint): the prompt's tokens beyond what the plan's model predicts for its haystack,
    learnt from the smallest render (or a mid-sized one), and the plan's first guess of n."""
    budget = length - max_new_tokens
    n0 = plan.min_units
    t0, _, _ = _measured(plan, counter, n0, seen)
    if t0 > budget:
        raise UserError(
            f"{what}: length {length} is below the task's fixed parts ({t0} prompt tokens + "
            f"{max_new_tokens} to generate); use a length of at least {t0 + max_new_tokens}"
        )
    offset = t0 - float(plan.model(np.array([n0]))[0])
    hint = plan.guess(budget - t0) if hasattr(plan, "guess") else n0 + 1
    n_cal = plan.calibration_units(hint) if hasattr(plan, "calibration_units") else n0
    if n_cal > n0:
        # the smallest haystack can differ in shape from a long one (needles side by side in an
        # essay); a mid-sized render teaches the fixed part for a small fraction of a full pass
        t_cal, _, _ = _measured(plan, counter, n_cal, seen)
        offset = t_cal - float(plan.model(np.array([n_cal]))[0])
    return offset, hint


def _walk_up(plan: Plan, counter: Counter, budget: int, seen: dict) -> tuple[int, str, str, int]:
    """The model keeps missing (a tokenizer that is far from additive): from the largest count seen
    to fit, walk up one unit at a time."""
    fitting = [k for k, v in seen.items() if v[0] <= budget]
    n = max(fitting)
    while True:
        if plan.max_units is not None and n >= plan.max_units:
            break
        if _measured(plan, counter, n + 1, seen)[0] > budget:
            break
        n += 1
    t, inp, pre = seen[n]
    return n, inp, pre, t


def cumulative(costs: np.ndarray) -> np.ndarray:
    """[0, c0, c0+c1, ...] as int64: tokens of the first n units."""
    out = np.zeros(len(costs) + 1, dtype=np.int64)
    np.cumsum(costs, out=out[1:])
    return out
