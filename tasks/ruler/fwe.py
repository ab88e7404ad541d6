"""RULER frequent words extraction (fwe). Reference: NVIDIA/RULER
scripts/data/synthetic/freq_words_extraction.py (alpha 2.0, coded words of 6 letters, vocabulary
(L - 50) // 50). Metric: string_match_all over the words ranked 2..4 (rank 1 is "...").

Word k (1-based rank) appears floor(N * k**-alpha / zeta(alpha)) times. The unit for length
fitting is one step of N (about one word); the reference instead steps N by L/32 and lands up
to 12% short.

    harness generate --tasks fwe --lengths 4k --samples 10 --out data/
"""

from __future__ import annotations

import math
import string

import numpy as np

from tasks.ruler import templates as T
from tasks.ruler.common import RulerTask
from tasks.ruler.fitting import Counter, sample_rng

ALPHA = 2.0
CODED_WORDLEN = 6
ZETA_2 = math.pi ** 2 / 6  # scipy.special.zeta(2.0), checked in the tests


def vocab_size(length: int) -> int:
    return (length - T.FWE_TOKENS) // 50


def counts(num_words, size: int) -> np.ndarray:
    """Occurrences per rank for each N in num_words, exactly as the reference computes them."""
    k = np.arange(1, size + 1)
    n = np.atleast_1d(np.asarray(num_words))
    return (n[:, None] * (k ** -ALPHA)[None, :] / ZETA_2).astype(int)


class FwePlan:
    def __init__(self, length: int, parts: tuple, counter: Counter):
        self.parts = parts
        rng = sample_rng(*parts)
        size = vocab_size(length)
        vocab: list[str] = []
        seen: set[str] = set()
        while len(vocab) < size:
            w = "".join(rng.choices(string.ascii_lowercase, k=CODED_WORDLEN))
            if w not in seen:
                seen.add(w)
                vocab.append(w)
        vocab[0] = "..."  # the top rank is noise
        self.vocab = vocab
        self.references = vocab[1:4]
        self.costs = np.asarray(counter.pieces([" " + w for w in vocab]), dtype=np.int64)
        self.min_units = 1
        self.max_units = None

    def render(self, n: int) -> tuple[str, str]:
        c = counts(n, len(self.vocab))[0]
        words = [w for w, z in zip(self.vocab, c) for _ in range(z)]
        sample_rng(*self.parts, "shuffle", n).shuffle(words)
        return T.FWE_TEMPLATE.format(context=" ".join(words)), T.FWE_ANSWER_PREFIX

    def guess(self, tokens_left: float) -> int:
        return int(tokens_left / float(self.costs[:50].mean())) + 1

    def model(self, n: np.ndarray) -> np.ndarray:
        out = np.empty(len(n), dtype=np.int64)
        for i in range(0, len(n), 16):  # bounded memory at 1M (vocabulary ~21k)
            out[i:i + 16] = counts(n[i:i + 16], len(self.vocab)) @ self.costs
        return out

    def metadata(self, n: int) -> dict:
        return {"num_words": n, "vocab_size": len(self.vocab)}


class FweTask(RulerTask):
    name = "fwe"
    metric = "string_match_all"
    max_new_tokens = T.FWE_TOKENS

    def plan(self, length, parts, counter, index):
        return FwePlan(length, parts, counter)
