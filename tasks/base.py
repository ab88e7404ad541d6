"""What every task and sample looks like.

A task is a small object with a name, a version and three jobs: make sample `index` at target
length `length` (a pure function of task, version, length, index, seed, tokenizer and data),
say where its data comes from (hashed, so results record it), and score a prediction.

Changing a task's prompt, data generation or metric must bump its `version`: the version goes
into every sample and result, so scores never change silently.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Kind = Literal["generate", "loglikelihood", "perplexity"]
# The lengths a length-controlled task runs at when --lengths is not given: 4K..128K, RULER's grid.
DEFAULT_LENGTHS = (4096, 8192, 16384, 32768, 65536, 131072)


@dataclass(frozen=True)
class Sample:
    """One prompt with its references. `prompt` = input + answer_prefix is what the model sees."""

    task: str
    version: str
    length: int  # target budget L in tokens; 0 for tasks whose samples are not length-controlled
    index: int  # sample number within (task, length): 0, 1, 2, ...
    seed: int
    input: str  # the filled template, without the answer prefix
    answer_prefix: str
    references: tuple[str, ...]
    max_new_tokens: int
    num_tokens: int  # tokens(input + answer_prefix), counting BOS when the tokenizer adds it
    dataset_hash: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        return self.input + self.answer_prefix

    def without_answer_prefix(self, num_tokens: int) -> Sample:
        """This sample with the prompt ending at the input (`harness eval --no-answer-prefix`, for
        instruct and reasoning models). The input, haystack included, is the default sample's (fitted
        with the prefix, so the prompt is shorter than the target by the prefix's tokens and results
        pair sample by sample with the default's); `num_tokens` is the caller's count of the input.
        metadata["answer_prefix_removed"] keeps the prefix. Default samples are never changed."""
        if not self.answer_prefix:
            return self
        meta = {**self.metadata, "answer_prefix_removed": self.answer_prefix}
        return dataclasses.replace(self, answer_prefix="", num_tokens=num_tokens, metadata=meta)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["references"] = list(self.references)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Sample:
        d = dict(d)
        d["references"] = tuple(d["references"])
        return cls(**d)


class Task:
    """Base class for tasks. Subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    version: ClassVar[str]
    family: ClassVar[str] = ""
    kind: ClassVar[Kind] = "generate"
    metric: ClassVar[str] = ""  # metric name, recorded in results
    max_new_tokens: ClassVar[int] = 0
    # Score x100 of guessing (25 for four options): a cell whose interval reaches it is at the floor
    chance: ClassVar[float] = 0.0
    length_controlled: ClassVar[bool] = True  # False: samples come from a fixed dataset
    # Not length-controlled but cut to the budget, leaving room for a chat template's tokens when
    # prompts are wrapped in one (LongBench v2, whose reference sends the cut prompt as a chat turn).
    fit_chat_template: ClassVar[bool] = False
    # The prompt has no context to fit or cut: evaluated once, at length 0 (LongBench v2 without
    # its document, BABILong at 0K).
    no_context: ClassVar[bool] = False
    # The input protocols the task offers, its default first. Families with a published reference
    # offer ("reference", "exact-length"): "reference" shows the model what the reference's own
    # pipeline shows it (items, per-length files, length unit, truncation budget, chat policy, sample
    # count), so scores stand beside published tables; "exact-length" fills each length L in the
    # evaluated model's tokens, for comparisons across tokenizers. () : one protocol, recorded nowhere.
    protocols: ClassVar[tuple[str, ...]] = ()
    # Under --chat and the "reference" protocol, the system turn used when --system-prompt is not given.
    reference_system_prompt: ClassVar[str | None] = None
    # The reference generates up to max_new_tokens and scores a cut of the answer (LongBench's
    # few-shot tasks keep its first line, its code tasks the first code line): an answer that runs to
    # the budget is what the reference does too, so it is never flagged as degenerate (!max-len).
    runs_to_budget: ClassVar[bool] = False

    @property
    def protocol(self) -> str:
        """The input protocol in force: set_protocol's choice, else the default (first) one."""
        return self.__dict__.get("_protocol") or (self.protocols[0] if self.protocols else "")

    def set_protocol(self, name: str) -> None:
        """Choose the input protocol (before any other call); a name the task lacks is a UserError."""
        from harness.core.errors import UserError

        if not self.protocols:
            return
        if name not in self.protocols:
            raise UserError(f"--protocol {name!r}: {self.name} offers {', '.join(self.protocols)}; pass one of those")
        self._protocol = name

    def set_answer_budget(self, tokens: int) -> None:
        """The run's tokens to generate (--max-new-tokens, or the task's own), told by the planner
        before any sample is built. A task's prompts do not depend on it (the runner applies it),
        unless the task keeps the released rows whose prompt plus the answer fit: those are
        BudgetFittedRows, which keep the rows this budget has room for."""

    def task_lengths(self, requested: list[int] | None, context: int, max_length: int | None) -> list[int]:
        """The lengths (record `length` values) this task runs at. `requested`: the parsed --lengths,
        None when none were given; `context`: the tightest model context; `max_length`: --max-length.
        Length-controlled tasks run at the requested lengths (4k..128k by default); fixed datasets cut
        to a budget run at one length, the whole budget (prompt + generation: --max-length, else the
        context); prompts without a context to fit (loglikelihood suites, no_context) at 0."""
        if self.length_controlled:
            return list(requested) if requested is not None else list(DEFAULT_LENGTHS)
        if self.kind == "generate" and not self.no_context:
            return [max_length or context]
        return [0]

    def default_samples(self, length: int) -> int | None:
        """Samples a run without --samples takes at `length`; None: the loop's default (500 for a
        length-controlled task, every item of a fixed dataset)."""
        return None

    def length_is_budget(self) -> bool:
        """Whether a length is the sample's whole token budget, so a chat template's tokens come out
        of it (this project's rule); False where the length counts one part of the prompt, as a
        reference's does (NoLiMa's haystack alone)."""
        return True

    def chat_answer_prefix(self) -> bool:
        """Under --chat, whether the answer prefix follows the assistant header (False: the user
        turn alone, as HELMET's chat prompts are built)."""
        return True

    def uses_chat_template(self) -> bool:
        """Under --chat, whether this task's prompts are wrapped in the chat template (a reference
        protocol gives its reference's per-task policy)."""
        return True

    def check_available(self) -> None:
        """Raise harness.core.errors.TaskUnavailable (naming the fix) when a data source is missing."""

    def dataset_hash(self) -> str:
        """Hash of the data sources' contents (essays, SQuAD files, ...); '' when none are used."""
        return ""

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        """Sample `index` at target `length`; deterministic given the arguments and the data."""
        raise NotImplementedError

    def sample_fitted(self, length: int, budget: int, index: int, seed: int, tokenizer) -> Sample:
        """Sample `index` of nominal `length` fitted to `budget` tokens (the length less a chat
        template's own tokens, harness.pipeline.sample_plan). By default the sample at the budget; a
        reference that picks its inputs by nominal length (HELMET's per-length files) overrides it."""
        return self.sample(budget, index, seed, tokenizer)

    def num_samples_available(self, length: int) -> int | None:
        """For dataset-backed tasks, how many samples exist; None when unbounded."""
        return None

    def score(self, prediction: str, sample: Sample) -> float:
        """Score in [0, 1] for one prediction (aggregates report x100)."""
        raise NotImplementedError

    def follow_up(self, sample: Sample, first: str) -> Sample | None:
        """A second generation that reads the first one's output, or None (the default: one step).
        LongBench v2's chain of thought: the reasoning goes into an answer prompt; the answer is
        scored, the reasoning is kept in the record's metadata (harness.pipeline.engine)."""
        return None

    def evaluate_with_runner(
        self, runner, length: int, indices: list[int], seed: int, tokenizer, progress: bool = True
    ) -> list[dict[str, Any]]:
        """For kinds other than "generate" (loglikelihood suites, perplexity, lm-eval adapters).

        `progress` False silences the task's own progress bars (`harness eval --no-progress`).

        Returns one dict per index: {"index", "prediction", "score" (0..1), "metadata"}; the
        evaluation loop stores them like generated results. "generate" tasks never use this:
        the loop builds their samples with tasks.generate and calls runner.generate + score.
        """
        raise NotImplementedError


class BudgetFittedRows(Task):
    """A task of released rows kept when their prompt plus max_new_tokens fit the length (GraphWalks,
    MRCR, AA-LCR). The run's budget replaces the task's own before any row is chosen: a lowered
    budget keeps the rows it has room for (fitted against the task's own, a short context ran none
    while generating a few tokens), and a raised one never keeps a prompt its answer cannot follow.
    The rows then depend on the budget: the dataset hash carries it (budget_hash), and each sample
    records the task's own budget as harness.pipeline.reasoning.apply_options does (budget_meta)."""

    def set_answer_budget(self, tokens: int) -> None:
        self.__dict__["max_new_tokens"] = tokens  # the instance's value shadows the class's

    def own_budget(self) -> int:
        return type(self).max_new_tokens

    def budget_meta(self) -> dict[str, int]:
        """The task's own budget, in a sample's metadata, when the run set another."""
        return {} if self.max_new_tokens == self.own_budget() else {"max_new_tokens_default": self.own_budget()}

    def budget_hash(self, base: str) -> str:
        """`base` (the data's hash) as it is at the task's own budget; with another, a new hash: the
        rows a length keeps, and so the samples and their cache, differ by it."""
        import hashlib

        if self.max_new_tokens == self.own_budget():
            return base
        return hashlib.sha256(f"{base}:{self.max_new_tokens}".encode()).hexdigest()[:16]
