"""The shared shape of a RULER task: plan a sample, fit it to the length, score it."""

from __future__ import annotations

from typing import ClassVar

from tasks.base import Sample, Task
from tasks.metrics import score as metric_score
from tasks.ruler.fitting import counter_for, fit


class RulerTask(Task):
    """Subclasses set name/metric/max_new_tokens and implement `plan`.

    `plan(length, rng_parts, counter)` returns an object with `render(n)`, `model(n)`,
    `min_units`, `max_units`, `references` and `metadata` (see tasks.ruler.fitting.Plan).
    """

    family: ClassVar[str] = "ruler"
    version: ClassVar[str] = "1"

    def plan(self, length: int, parts: tuple, counter, index: int):
        raise NotImplementedError

    def build_plan(self, length: int, index: int, seed: int, tokenizer):
        """The plan of sample `index` (tests use it to render neighbouring unit counts)."""
        self.check_available()
        parts = (self.name, self.version, length, index, seed)
        return self.plan(length, parts, counter_for(tokenizer), index)

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        plan = self.build_plan(length, index, seed, tokenizer)
        n, inp, pre, tokens = fit(plan, counter_for(tokenizer), length, self.max_new_tokens, f"{self.name}")
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=inp,
            answer_prefix=pre,
            references=tuple(plan.references),
            max_new_tokens=self.max_new_tokens,
            num_tokens=tokens,
            dataset_hash=self.dataset_hash(),
            metadata={"haystack_units": n, **plan.metadata(n)},
        )

    def score(self, prediction: str, sample: Sample) -> float:
        return metric_score(self.metric, prediction, sample.references)
