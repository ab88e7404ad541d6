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
import random
import string

import numpy as np

from tasks.ruler import templates as T
from tasks.ruler.common import RulerTask
from tasks.ruler.fitting import Counter, np_rng, sample_rng

ALPHA = 2.0
CODED_WORDLEN = 6
ZETA_2 = math.pi**2 / 6  # scipy.special.zeta(2.0), checked in the tests


def vocab_size(length: int) -> int:
    return (length - T.FWE_TOKENS) // 50


def counts(num_words, size: int) -> np.ndarray:
    """Occurrences per rank for each N in num_words, exactly as the reference computes them."""
    k = np.arange(1, size + 1)
    n = np.atleast_1d(np.asarray(num_words))
    return (n[:, None] * (k**-ALPHA)[None, :] / ZETA_2).astype(int)


def coded_words(rng: random.Random, size: int) -> list[str]:
    """`size` distinct coded words: the words of the loop
    `"".join(rng.choices(string.ascii_lowercase, k=CODED_WORDLEN))` skipping repeats, drawn in
    bulk from a numpy MT19937 that continues rng's stream (rng itself is not advanced: the
    caller draws nothing more from it).

    random() is (a * 2**26 + b) / 2**53 with a, b the next two 32-bit outputs shifted right by
    5 and 6, and choices() takes floor(random() * 26): the same float operations here.
    """
    version, internal, _ = rng.getstate()
    if version != 3 or len(internal) != 625:  # an unknown generator layout: draw one by one
        return _coded_words_loop(rng, size)
    bits = np.random.MT19937()
    bits.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.array(internal[:624], dtype=np.uint32), "pos": internal[624]},
    }
    letters = np.frombuffer(string.ascii_lowercase.encode(), dtype=np.uint8)
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < size:
        m = size - len(vocab) + 16
        raw = bits.random_raw(2 * CODED_WORDLEN * m).reshape(-1, 2)
        x = ((raw[:, 0] >> 5).astype(np.float64) * 67108864.0 + (raw[:, 1] >> 6).astype(np.float64)) * (
            1.0 / 9007199254740992.0
        )
        text = letters[np.floor(x * 26.0).astype(np.int64)].tobytes().decode("ascii")
        for i in range(0, len(text), CODED_WORDLEN):
            w = text[i : i + CODED_WORDLEN]
            if w not in seen:
                seen.add(w)
                vocab.append(w)
                if len(vocab) == size:
                    break
    return vocab


def _coded_words_loop(rng: random.Random, size: int) -> list[str]:
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < size:
        w = "".join(rng.choices(string.ascii_lowercase, k=CODED_WORDLEN))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    return vocab


class FwePlan:
    def __init__(self, length: int, parts: tuple, counter: Counter):
        self.parts = parts
        rng = sample_rng(*parts)
        vocab = coded_words(rng, vocab_size(length))
        vocab[0] = "..."  # the top rank is noise
        self.vocab = vocab
        self.references = vocab[1:4]
        self.costs = np.asarray(counter.pieces([" " + w for w in vocab]), dtype=np.int64)
        self.min_units = 1
        self.max_units = None

    def render(self, n: int) -> tuple[str, str]:
        c = counts(n, len(self.vocab))[0]
        # the word list in a random order: a numpy permutation of the repeated vocabulary indices
        # (version 2; version 1 used random.shuffle, a Python-level loop over ~30k words at 128K
        # that cost about a fifth of a sample's time)
        ids = np.repeat(np.arange(len(self.vocab)), c)
        order = np_rng(sample_rng(*self.parts, "shuffle", n)).permutation(ids)
        vocab = self.vocab
        return T.FWE_TEMPLATE.format(context=" ".join([vocab[i] for i in order.tolist()])), T.FWE_ANSWER_PREFIX

    def guess(self, tokens_left: float) -> int:
        return int(tokens_left / float(self.costs[:50].mean())) + 1

    def model(self, n: np.ndarray) -> np.ndarray:
        out = np.empty(len(n), dtype=np.int64)
        for i in range(0, len(n), 16):  # bounded memory at 1M (vocabulary ~21k)
            out[i : i + 16] = counts(n[i : i + 16], len(self.vocab)) @ self.costs
        return out

    def metadata(self, n: int) -> dict:
        return {"num_words": n, "vocab_size": len(self.vocab)}


class FweTask(RulerTask):
    name = "fwe"
    version = "2"  # 2: numpy permutation of the words (1: random.shuffle)
    metric = "string_match_all"
    max_new_tokens = T.FWE_TOKENS

    def plan(self, length, parts, counter, index):
        return FwePlan(length, parts, counter)
