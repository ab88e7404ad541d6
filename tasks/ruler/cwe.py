"""RULER common words extraction (cwe). Reference: NVIDIA/RULER
scripts/data/synthetic/common_words_extraction.py (freq_cw 30, freq_ucw 3, num_cw 10, one
in-context example). Metric: string_match_all over the 10 common words.

Below 4096 tokens the reference uses frequencies 6/1 and a 3/1 example (so 4000 and 4096 differ
on purpose). Unit for length fitting: one uncommon word (its freq_ucw list entries).
Words: wonderwords nouns + adjectives + verbs (8169). When a length needs more distinct words,
the reference switches to its english_words.json (not distributed offline); we extend the pool
with the lowercase words of the essays instead (recorded in the dataset hash and metadata).

    harness generate --tasks cwe --lengths 4k --samples 10 --out data/
"""

from __future__ import annotations

import functools
import re

import numpy as np

from harness.core.errors import UserError
from tasks.data import essays as essays_mod
from tasks.data.words import cwe_words, words_hash
from tasks.ruler import templates as T
from tasks.ruler.common import RulerTask
from tasks.ruler.fitting import Counter, cumulative, sample_rng

NUM_CW = 10


def frequencies(length: int) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """((example words, example common freq, example uncommon freq), (common freq, uncommon freq))."""
    if length < 4096:
        return (20, 3, 1), (6, 1)
    return (40, 10, 3), (30, 3)


def _numbered(words) -> str:
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(words))


@functools.lru_cache(maxsize=4)  # the essays' words, read once per essays file
def _extended_pool(essays_path) -> tuple[str, ...]:
    e = essays_mod.load_essays(essays_path)
    base = set(cwe_words())
    extra = {w for w in (re.sub(r"[^a-z]", "", x) for x in e.words if x.isalpha() and x.islower()) if len(w) >= 3}
    return tuple(cwe_words()) + tuple(sorted(extra - base))


def _number_costs(counter: Counter, upto: int) -> np.ndarray:
    """cum[e] = tokens of the numbering of entries 1..e (" {i}." as it occurs after a word)."""
    cum = counter.tables.get("cwe_numcum")
    if cum is None or len(cum) <= upto:
        size = max(upto + 1, 2 * (len(cum) if cum is not None else 4096))
        costs = np.asarray(counter.pieces([f" {i}." for i in range(1, size)]), dtype=np.int64)
        cum = cumulative(costs)
        counter.tables["cwe_numcum"] = cum
    return cum


class CwePlan:
    def __init__(self, length: int, parts: tuple, counter: Counter, essays_path):
        self.parts = parts
        rng = sample_rng(*parts)
        (ex_n, ex_c, ex_u), (self.fc, self.fu) = frequencies(length)
        pool = cwe_words()
        self.extended = False
        ex_words = rng.sample(pool, ex_n)
        ex_list = ex_words[:NUM_CW] * ex_c + ex_words[NUM_CW:] * ex_u
        rng.shuffle(ex_list)
        example = (
            T.CWE_TEMPLATE.format(context=_numbered(ex_list)) + T.CWE_ANSWER_PREFIX + " " + _numbered(ex_words[:NUM_CW])
        )
        self.head = example + "\n"
        self.rng_state = rng.getstate()
        self.pool = pool
        self.counter = counter
        self.essays_path = essays_path
        self._set_pool(pool)
        self.min_units = 0

    def _set_pool(self, pool) -> None:
        rng = sample_rng(*self.parts, "pool", len(pool))
        self.perm = rng.sample(pool, len(pool))  # a random order; the first 10+n words are the sample's
        self.max_units = len(pool) - NUM_CW
        self.references = self.perm[:NUM_CW]
        costs = np.asarray(self.counter.pieces([" " + w for w in self.perm]), dtype=np.int64)
        self.common_cost = int(costs[:NUM_CW].sum())
        self.ucum = cumulative(costs[NUM_CW:])

    def extend_pool(self) -> None:
        self.pool = _extended_pool(self.essays_path)
        self.extended = True
        self._set_pool(self.pool)

    def render(self, n: int) -> tuple[str, str]:
        words = self.perm[: NUM_CW + n]
        lst = words[:NUM_CW] * self.fc + words[NUM_CW:] * self.fu
        sample_rng(*self.parts, "shuffle", n).shuffle(lst)
        return self.head + T.CWE_TEMPLATE.format(context=_numbered(lst)), T.CWE_ANSWER_PREFIX

    def guess(self, tokens_left: float) -> int:
        per = self.fu * (self.ucum[-1] / max(1, len(self.ucum) - 1) + 3)
        return min(int(tokens_left / per) + 1, self.max_units)

    def model(self, n: np.ndarray) -> np.ndarray:
        entries = NUM_CW * self.fc + n * self.fu
        num = _number_costs(self.counter, int(entries.max()))
        return num[entries] + self.fc * self.common_cost + self.fu * self.ucum[n]

    def metadata(self, n: int) -> dict:
        return {
            "common_freq": self.fc,
            "uncommon_freq": self.fu,
            "words": NUM_CW + n,
            "word_pool": "wonderwords+essays" if self.extended else "wonderwords",
        }


class CweTask(RulerTask):
    name = "cwe"
    metric = "string_match_all"
    max_new_tokens = T.CWE_TOKENS

    def __init__(self, essays_path: str | None = None):
        self.essays_path = essays_path

    def dataset_hash(self) -> str:
        try:
            e = essays_mod.load_essays(self.essays_path).hash
        except UserError:
            e = "none"
        return f"words:{words_hash()};essays:{e}"

    def plan(self, length, parts, counter, index):
        return CwePlan(length, parts, counter, self.essays_path)

    def sample(self, length, index, seed, tokenizer):
        s = super().sample(length, index, seed, tokenizer)
        if s.metadata["words"] < len(cwe_words()) or s.metadata["word_pool"] != "wonderwords":
            return s
        # the wonderwords pool ran out before the length was filled: use the extended pool
        self._extend = True
        try:
            s = super().sample(length, index, seed, tokenizer)
        finally:
            self._extend = False
        pool = len(_extended_pool(self.essays_path))
        if s.metadata["words"] >= pool and length - s.num_tokens - s.max_new_tokens > 0:
            # every distinct word is in and the length is still not filled: a sample far shorter than
            # its length would be scored as that length (at 1M with the embedded tokenizer it holds
            # about 215K tokens), so refuse, as qa does when its documents run out
            raise UserError(
                f"{self.name}: length {length} needs more distinct words than its pool holds ({pool}: wonderwords "
                f"and the essays' words; {s.num_tokens} prompt tokens with all of them); use a length of at most "
                f"{s.num_tokens + s.max_new_tokens}"
            )
        return s

    def build_plan(self, length, index, seed, tokenizer):
        plan = super().build_plan(length, index, seed, tokenizer)
        if getattr(self, "_extend", False):
            plan.extend_pool()
        return plan
