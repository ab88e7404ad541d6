"""The background text of a BABILong sample, and the plan that fits a sample to its length.

As the reference (babilong_utils.SentenceSampler / NoiseInjectionDataset) builds it: PG19 text from
a random book at a random character, split into sentences with NLTK's (untrained) Punkt tokenizer,
the first and last sentence of each read dropped, sentences under 10 tokens skipped, the next
random book when one runs out; the bAbI facts are inserted between sentences at uniformly drawn
slots (with repetition, kept in story order), each fact and sentence joined with one space.

Length, unlike the reference (which counts GPT-2 tokens and cuts the last sentence at a token):
the unit is a word of the sentence stream, counted in the evaluated model's own tokens, and
tasks.ruler.fitting picks the largest number of words such that the whole prompt (template, facts,
question) plus the 20 tokens to generate stays within the length L. The slack is below one word.
The last sentence may be cut mid-sentence, as there.
"""

from __future__ import annotations

import bisect
import random
from functools import lru_cache

import numpy as np

from harness.core.errors import TaskUnavailable
from tasks.babilong.prompts import format_prompt

MIN_SENTENCE_TOKENS = 10  # SentenceSampler(min_sentence_len=10)


@lru_cache(maxsize=1)
def _punkt():
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer()


def sentence_stream(
    texts: tuple[str, ...], rng: random.Random, counter, need_tokens: int
) -> tuple[list[str], list[int]]:
    """(sentences, the books they came from) until their tokens reach need_tokens."""
    sentences: list[str] = []
    sources: list[int] = []
    total, fruitless = 0, 0
    while total < need_tokens:
        b = rng.randrange(len(texts))
        text = texts[b]
        if not text:
            continue
        start = rng.randrange(len(text))
        chunk = text[start : start + max(20_000, 10 * (need_tokens - total))]  # the reference reads 10 chars per token
        found = _punkt().tokenize(chunk)[1:-1]
        costs = counter.pieces([" " + s for s in found]) if found else []
        before = total
        for s, c in zip(found, costs):
            if c < MIN_SENTENCE_TOKENS:
                continue
            sentences.append(s)
            sources.append(b)
            total += c
            if total >= need_tokens:
                break
        fruitless = fruitless + 1 if total == before else 0
        if fruitless > 200:
            raise TaskUnavailable(
                "BABILong: the PG19 books yield no sentence of 10 tokens or more: give real PG19 books"
            )
    return sentences, sources


class BabilongPlan:
    """render(n): the prompt with the first n words of the background; model(n): their tokens."""

    def __init__(self, task: str, question, sentences: list[str], slots_u: list[float], counter):
        self.task, self.q = task, question
        self.words: list[str] = []
        self.starts: list[int] = []  # word index where each sentence starts
        for s in sentences:
            self.starts.append(len(self.words))
            self.words.extend(s.split(" "))
        self.u = sorted(slots_u)  # one uniform draw per fact: its slot is floor(u * (sentences + 1))
        self.min_units = 0
        self.max_units: int | None = len(self.words)
        self.cum = self._word_costs(counter)

    def _word_costs(self, counter) -> np.ndarray:
        """[0, tokens of ' w1', of ' w1 w2', ...]: one encode of the whole stream, split at words."""
        if not self.words:
            return np.zeros(1, dtype=np.int64)
        text = " " + " ".join(self.words)
        enc = counter.backend.encode(text, add_special_tokens=False)
        starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.offsets))
        lens = np.fromiter((len(w) for w in self.words), dtype=np.int64, count=len(self.words))
        ends = 1 + np.cumsum(lens + 1) - 1  # character just past each word
        upto = np.searchsorted(starts, ends, side="left")
        upto[-1] = len(enc.ids)
        return np.concatenate([[0], upto]).astype(np.int64)

    def slots(self, n: int) -> tuple[int, list[int]]:
        """(sentences the first n words touch, each fact's slot: before sentence j, or at the end)."""
        touched = bisect.bisect_left(self.starts, n) if n > 0 else 0
        return touched, [min(int(u * (touched + 1)), touched) for u in self.u]

    def context(self, n: int) -> str:
        touched, slots = self.slots(n)
        pieces: list[str] = []
        k = 0
        facts = self.q.facts
        for j in range(touched):
            while k < len(facts) and slots[k] == j:
                pieces.append(facts[k])
                k += 1
            end = min(self.starts[j + 1] if j + 1 < len(self.starts) else len(self.words), n)
            pieces.append(" ".join(self.words[self.starts[j] : end]))
        pieces += facts[k:]
        return " ".join(pieces)

    def render(self, n: int) -> tuple[str, str]:
        return format_prompt(self.task, self.context(n), self.q.question), ""

    def model(self, n: np.ndarray) -> np.ndarray:
        return self.cum[np.asarray(n, dtype=np.int64)]

    def guess(self, tokens_left: float) -> int:
        per_word = self.cum[-1] / max(1, len(self.words))
        return int(tokens_left / max(per_word, 1e-9)) + 1

    def fact_depths(self, n: int) -> list[float]:
        """Each fact's depth in the background, 0-100: the share of its words before the fact."""
        touched, slots = self.slots(n)
        return [round(100.0 * min(self.starts[s] if s < touched else n, n) / n, 2) if n else 0.0 for s in slots]
