"""NoLiMa (Modarressi et al., ICML 2025; adobe-research/NoLiMa at 7532e4e): needles that share
almost no words with their question, in shuffled public-domain books.

    harness eval --suite nolima --chat --nolima-data DIR ...                 # the reference's grid
    harness eval --suite nolima --protocol exact-length --lengths 1k-32k ... # this harness's rule

Tasks: `nolima` (every question type but "direct": the reference's gather_results.ipynb leaves
the direct questions out of its scores) and `nolima_direct` (the direct questions, which repeat
the needle's words: the literal-match control).

What carries over from the reference (evaluation/run_tests.py, async_evaluate.py,
data/book_haystack.py):
  - tests: each needle-set entry x question type x test, arguments filled as run_tests.py does;
  - per test and haystack book the seed is base seed (--seed, 42) + int(id[:4]) + book number
    (books in sorted file-name order; the reference numbers them in os.listdir order), and
    {CHAR} is replaced by np.random.choice(character_set) drawn once per depth in order;
  - depths: np.linspace(0, 100, 26) percent;
  - placement: the haystack is C tokens of the book (the model's tokenizer, no special tokens)
    with the needle put after the first newline token at or beyond depth x (C + 1), as
    BookHaystack._generate_w_needle_placement builds it (pre-text cut at its last newline,
    " " + needle + "\\n" before the rest);
  - the prompt: the task template filled with the haystack and the question (no answer prefix);
    under --chat the reference protocol adds its system turn "You are a helpful assistant";
  - 192 new tokens (the reference's model configs); metric "contains": 1 when any gold answer
    (the character's name) is a case-sensitive substring of the output.
The length (tasks.nolima.protocol): under "reference" (the default) a length is the haystack C
itself in the reference's decimal units (250 ... 32000, its default grid), and a run without
--samples takes the whole grid (tests x books x 26 depths; 58 x 5 x 26 = 7,540 per length on the
released set), as the paper's Table 3 averages it. Under "exact-length" a length L is the whole
budget (prompt + 192 generated tokens), so C is the largest haystack whose prompt fits L - 192
tokens exactly (metadata "haystack_tokens" records C), and a run takes 500 samples by default.
Sample `index` is the index-th cell of a fixed (seed-0) shuffle of tests x books x depths under
both, so any --samples N is an even draw over tests, books and depths.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import ClassVar

import numpy as np

from harness.core.errors import TaskUnavailable, UserError
from harness.models.tokenization import count_tokens, tokenizer_fingerprint
from tasks.base import Sample, Task
from tasks.icl.tasks import largest_fitting
from tasks.nolima import data
from tasks.nolima.protocol import PROTOCOLS, REFERENCE_SYSTEM_PROMPT, reference_lengths
from tasks.registry import Headline, register_suite, register_task

DEFAULT_TASK_TEMPLATE = (
    "You will answer a question based on the following book snippet:\n\n{haystack}\n\n"
    "Use the information provided in the book snippet to answer the question. Your answer should be short "
    "and based on either explicitly stated facts or strong, logical inferences.\n\nQuestion: {question}\n\n"
    " Return only the final answer with no additional explanation or reasoning."
)
DEPTHS = [float(d) for d in np.linspace(0, 100, 26)]  # document_depth_percent_intervals: 26
MAX_NEW_TOKENS = 192
SYSTEM_PROMPT = REFERENCE_SYSTEM_PROMPT  # sent under --chat by the reference protocol


def contains(response: str, gold_answers) -> float:
    """The reference's "contains" metric (async_evaluate.py _evaluate_response)."""
    return float(any(g in response for g in gold_answers))


class BookTokens:
    """A book encoded once per tokenizer: its ids and the positions the reference may place a
    needle at (0 and every token whose decoded text holds a newline)."""

    def __init__(self, text: str, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
        batch = getattr(tokenizer, "batch_decode", None)  # harness generate's light tokenizer has none
        pieces = batch([[i] for i in self.ids]) if batch else [tokenizer.decode([i]) for i in self.ids]
        self.valid = np.array([0] + [i for i, p in enumerate(pieces) if "\n" in p], dtype=np.int64)

    def place(self, needle: str, context_length: int, depth: float) -> tuple[str, int]:
        """(haystack text with the needle, the token index the needle follows)."""
        delta = (self.valid - 0) / (context_length + 1) - depth
        delta[delta < 0] = np.inf
        closest = int(np.argmin(delta))
        pos = int(self.valid[closest])
        start = pos - int(np.round(context_length * depth))
        end = start + context_length
        if start < 0 or end > len(self.ids):
            raise TaskUnavailable(
                f"a NoLiMa book has {len(self.ids)} tokens, too few for a {context_length}-token haystack: "
                "use a shorter length or longer books"
            )
        pre = self.tokenizer.decode(self.ids[start : pos + 1])
        pre = pre[: max(pre.rfind("\n"), 0)]
        post = self.tokenizer.decode(self.ids[pos + 1 : end])
        return pre + " " + needle + "\n" + post, pos


@lru_cache(maxsize=16)
def _book_tokens(fingerprint: str, book_hash: str, book_no: int, tokenizer) -> BookTokens:
    return BookTokens(data.load().books[book_no][1], tokenizer)


def characters(test: data.Test, seed: int, book_no: int) -> list[str | None]:
    """The character of each depth: the reference seeds numpy per test and book, then draws
    np.random.choice(character_set) once per depth in depth order."""
    if "{CHAR}" not in test.needle:
        return [None] * len(DEPTHS)
    rs = np.random.RandomState(seed + test.seed_offset + book_no)
    return [str(rs.choice(list(test.character_set))) for _ in DEPTHS]


class NoLiMaTask(Task):
    family: ClassVar[str] = "nolima"
    version: ClassVar[str] = "1"
    kind = "generate"
    metric: ClassVar[str] = "contains"
    max_new_tokens: ClassVar[int] = MAX_NEW_TOKENS
    direct: ClassVar[bool] = False
    protocols: ClassVar[tuple[str, ...]] = PROTOCOLS
    reference_system_prompt: ClassVar[str | None] = SYSTEM_PROMPT

    @property
    def reference(self) -> bool:
        return self.protocol == "reference"

    def task_lengths(self, requested: list[int] | None, context: int, max_length: int | None) -> list[int]:
        # reference: haystack sizes in its units (tasks.nolima.protocol); exact-length: budgets
        if self.reference:
            return reference_lengths(requested)
        return super().task_lengths(requested, context, max_length)

    def default_samples(self, length: int) -> int | None:
        # Table 3 averages every test x book x depth of a length (gather_results.ipynb: each result
        # file is one test and book over 26 depths, all of equal size)
        return self.num_samples_available(length) if self.reference else None

    def length_is_budget(self) -> bool:
        """Whether a length is the sample's whole budget (a chat template's tokens come out of it):
        not under the reference protocol, whose length is the haystack alone."""
        return not self.reference

    def uses_chat_template(self) -> bool:
        # the reference always sends its prompt as a chat request (async_api_connector.py)
        return True

    def tests(self) -> tuple[data.Test, ...]:
        tests = tuple(t for t in data.load().tests if (t.question_type == "direct") == self.direct)
        if not tests:
            kind = "direct" if self.direct else "non-direct"
            raise TaskUnavailable(f"the NoLiMa needle set has no {kind} questions: {data.FIX}")
        return tests

    def check_available(self) -> None:
        self.tests()

    def dataset_hash(self) -> str:
        return data.load().hash

    def _grid(self) -> tuple[int, int]:
        return len(self.tests()), len(data.load().books)

    def num_samples_available(self, length: int) -> int | None:
        n_tests, n_books = self._grid()
        return n_tests * n_books * len(DEPTHS)

    def num_samples_with_tokenizer(self, length: int, tokenizer) -> int:
        d, fp = data.load(), tokenizer_fingerprint(tokenizer)
        shortest = min(len(_book_tokens(fp, d.hash, n, tokenizer).ids) for n in range(len(d.books)))
        if shortest < length:
            raise TaskUnavailable(
                f"the shortest NoLiMa book has {shortest} tokens, fewer than {length}: drop that length"
            )
        return self.num_samples_available(length) or 0

    def cell(self, index: int) -> tuple[data.Test, int, int]:
        n_tests, n_books = self._grid()
        total = n_tests * n_books * len(DEPTHS)
        if not 0 <= index < total:
            raise UserError(f"{self.name} has {total} tests per length, index {index} asked: pass --samples {total}")
        flat = _order(total)[index]
        test_no, rest = divmod(flat, n_books * len(DEPTHS))
        book_no, depth_no = divmod(rest, len(DEPTHS))
        return self.tests()[test_no], book_no, depth_no

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        d = data.load()
        test, book_no, depth_no = self.cell(index)
        char = characters(test, seed, book_no)[depth_no]
        needle = test.needle.replace("{CHAR}", char) if char is not None else test.needle
        question = (
            test.question.replace("{CHAR}", char) if char is not None and "{CHAR}" in test.question else test.question
        )
        gold = (char,) if char is not None else test.gold_answers
        template = test.task_template or DEFAULT_TASK_TEMPLATE
        book = _book_tokens(tokenizer_fingerprint(tokenizer), d.hash, book_no, tokenizer)
        depth = DEPTHS[depth_no] / 100
        if self.reference:  # the haystack is the length itself, as the reference places it
            text, _ = book.place(needle, length, depth)
            prompt = template.format(haystack=text, question=question)
            num = count_tokens(tokenizer, prompt)
            return self._sample(length, index, seed, (test, book_no, depth_no), char, gold, (prompt, num), length)
        budget = length - self.max_new_tokens
        counted: dict[int, tuple[int, str]] = {}

        def fits(c: int) -> bool:
            if c not in counted:
                text, _ = book.place(needle, c, depth)
                prompt = template.format(haystack=text, question=question)
                counted[c] = (count_tokens(tokenizer, prompt), prompt)
            return counted[c][0] <= budget

        overhead = count_tokens(tokenizer, template.format(haystack=" " + needle + "\n", question=question))
        c = largest_fitting(min(length, len(book.ids)), fits, budget - overhead)
        if c < 0:
            raise UserError(f"{self.name}: length {length} leaves no room for a haystack: use a longer length")
        fits(c)
        num, prompt = counted[c]
        return self._sample(length, index, seed, (test, book_no, depth_no), char, gold, (prompt, num), c)

    def _sample(self, length: int, index: int, seed: int, cell, char, gold, prompt_num, c: int) -> Sample:
        d = data.load()
        (test, book_no, depth_no), (prompt, num) = cell, prompt_num
        meta = {
            "test": test.name,
            "question_type": test.question_type,
            "book": d.books[book_no][0],
            "depth": DEPTHS[depth_no],
            "haystack_tokens": c,
            "character": char,
            "needle_depths": [DEPTHS[depth_no]],
            "protocol": self.protocol,
        }
        if len(gold) == 1:  # the depth heatmap counts one needle per answer
            meta["answer_depths"] = [DEPTHS[depth_no]]
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt,
            answer_prefix="",
            references=tuple(gold),
            max_new_tokens=self.max_new_tokens,
            num_tokens=num,
            dataset_hash=d.hash,
            metadata=meta,
        )

    def score(self, prediction: str, sample: Sample) -> float:
        return contains(prediction, sample.references)


@lru_cache(maxsize=8)
def _order(total: int) -> tuple[int, ...]:
    order = list(range(total))
    random.Random(0).shuffle(order)
    return tuple(order)


@register_task
class NoLiMa(NoLiMaTask):
    """NoLiMa one-hop and two-hop questions (no literal match with the needle)."""

    name = "nolima"


@register_task
class NoLiMaDirect(NoLiMaTask):
    """NoLiMa direct questions (literal match with the needle): the control."""

    name = "nolima_direct"
    direct = True


# NoLiMa's Table 3: per length the mean over its whole grid, and the effective length relative to
# the base score (tasks.nolima.effective, the paper's section 4.3).
HEADLINE = Headline(
    label=(
        "grid mean (tests x books x 26 depths) per length, NoLiMa's Table 3; effective length: the longest "
        "length from 1K whose score keeps >= 85% of the base score (per test its best of 250/500/1K, mean over tests)"
    ),
    groups={"NoLiMa": {"NoLiMa": ["nolima"]}},
)

register_suite(
    "nolima",
    ["nolima"],
    "NoLiMa: needles with minimal lexical overlap with the question (set HARNESS_NOLIMA offline)",
    label="NoLiMa",
    order=9,
    headline=HEADLINE,
)
register_suite("nolima-direct", ["nolima_direct"], "NoLiMa's direct (literal-match) questions, the control")
