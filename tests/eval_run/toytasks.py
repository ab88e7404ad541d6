"""Two tiny generate-kind tasks for the eval-loop tests (the RULER tasks live in tasks/ruler).

Importing this module registers `toy_digits` and `toy_words` and the suite `toy`. Random tiny
models often emit digits and common words, so scores are neither all 0 nor all 1, which lets the
tests tell a right aggregate from a wrong one.
"""

from __future__ import annotations

import random

from harness.models.tokenization import count_tokens
from tasks.base import Sample, Task
from tasks.registry import Headline, register_suite, register_task

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"


class _Toy(Task):
    family = "toy"
    metric = "toy"
    max_new_tokens = 16

    def _question(self, rng) -> tuple[str, tuple[str, ...]]:
        raise NotImplementedError

    def sample(self, length, index, seed, tokenizer):
        rng = random.Random(f"{self.name}-{seed}-{length}-{index}")
        question, refs = self._question(rng)
        prefix = f" Answer {rng.randrange(1000)}"  # varies the last tokens, so predictions vary
        budget = length - self.max_new_tokens
        n = max(0, (budget - count_tokens(tokenizer, question + prefix)) // 24)
        while n > 0 and count_tokens(tokenizer, NOISE * n + question + prefix) > budget:
            n -= 1
        text = NOISE * n + question
        num = count_tokens(tokenizer, text + prefix)
        assert num + self.max_new_tokens <= length
        return Sample(
            self.name, self.version, length, index, seed, text, prefix, refs, self.max_new_tokens, num, "", {"lines": n}
        )


@register_task
class ToyDigits(_Toy):
    name = "toy_digits"
    version = "2"

    def _question(self, rng):
        return f"Say a number like {rng.randrange(10**6)}.", (str(rng.randrange(10)),)

    def score(self, prediction, sample):  # whether the reference digit appears
        return 1.0 if sample.references[0] in prediction else 0.0


@register_task
class ToyWords(_Toy):
    name = "toy_words"
    version = "2"
    LETTERS = "bcdfghjkmpqvwxyz"

    def _question(self, rng):
        return "Name some words.", tuple(rng.sample(self.LETTERS, 3))

    def score(self, prediction, sample):  # share of the reference letters in the prediction
        return sum(r in prediction.lower() for r in sample.references) / len(sample.references)


register_suite("toy", ["toy_digits", "toy_words"], help="test-only toy suite")


@register_task
class ToyChoice(Task):
    """A loglikelihood task: which of two continuations the model prefers (goes through
    evaluate_with_runner, like the lm-eval adapters)."""

    name = "toy_choice"
    version = "1"
    family = "toy"
    kind = "loglikelihood"
    metric = "acc"
    length_controlled = False
    CHOICES = (" blue", " green")

    def num_samples_available(self, length):
        return 4

    def evaluate_with_runner(self, runner, length, indices, seed, tokenizer, progress=True):
        from harness.models.runners.base import LoglikelihoodRequest

        out = []
        for i in indices:
            context = NOISE * (i + 1) + "The colour is"
            lls = runner.loglikelihood([LoglikelihoodRequest(context, c) for c in self.CHOICES])
            best = max(range(len(self.CHOICES)), key=lambda k: lls[k][0])
            gold = i % 2
            out.append(
                {
                    "index": i,
                    "prediction": self.CHOICES[best],
                    "score": float(best == gold),
                    "metadata": {"logprobs": [ll for ll, _ in lls]},
                }
            )
        return out


@register_task
class ToyReference(_Toy):
    """A task with a published reference: the "reference" protocol runs at its own length grid and
    sample count and is never chat-wrapped, with a system turn of its own; "exact-length" is the
    plain toy task. Its suite `toy-ref` declares a headline (mean of two category means)."""

    name = "toy_ref"
    version = "1"
    protocols = ("reference", "exact-length")
    reference_system_prompt = "You are a toy."

    def _question(self, rng):
        return f"Say a number like {rng.randrange(10**6)}.", (str(rng.randrange(10)),)

    def task_lengths(self, requested, context, max_length):
        if self.protocol == "reference" and requested is None:
            return [1000]
        return super().task_lengths(requested, context, max_length)

    def default_samples(self, length):
        return 2 if self.protocol == "reference" else None

    def uses_chat_template(self):
        return self.protocol != "reference"

    def sample(self, length, index, seed, tokenizer):
        s = super().sample(length, index, seed, tokenizer)
        # the protocol shows in the prompt, as a reference's own inputs would
        text = ("[ref] " if self.protocol == "reference" else "") + s.input
        return Sample(
            s.task,
            s.version,
            s.length,
            s.index,
            s.seed,
            text,
            s.answer_prefix,
            s.references,
            s.max_new_tokens,
            count_tokens(tokenizer, text + s.answer_prefix),
            s.dataset_hash,
            {**s.metadata, "protocol": self.protocol},
        )

    def score(self, prediction, sample):
        return 1.0 if sample.references[0] in prediction else 0.0


register_suite(
    "toy-ref",
    ["toy_ref", "toy_digits", "toy_words"],
    help="test-only suite with a headline",
    headline=Headline(
        "mean of the two category means", {"G": {"ref": ["toy_ref"], "toys": ["toy_digits", "toy_words"]}}
    ),
)
