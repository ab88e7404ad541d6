"""Every sample of a plan, built once for all checkpoints, and the checks that it fits their context.

    from harness.pipeline.sample_plan import check_lengths, plan_samples
    budget = check_lengths(cfg, task_lens, tasks, min_ctx, tightest, fix)   # UserError past the context
    samples = plan_samples(cfg, tasks, task_lens, tokenizer, min_ctx, tightest, options, fix)
    samples.gen_items     # (task, length, sample, prompt, num_tokens) of "generate" tasks
    samples.runner_work   # (task, length, indices) of tasks that drive the runner themselves

Samples come from tasks.generate (cached on disk by content hash, shared by every checkpoint of the
run). Under --chat a sample is fitted to its length minus the chat template's own tokens, and every
prompt plus its tokens to generate is checked against the tightest checkpoint's context here, before
any model is loaded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from harness.core.errors import TaskUnavailable, UserError
from harness.core.lengths import format_length
from harness.pipeline.jobs import RunnerWork

if TYPE_CHECKING:
    from harness.pipeline.eval_config import EvalConfig
    from harness.pipeline.reasoning import Options

DEFAULT_SAMPLES = 500  # RULER's num_samples: the default per length-controlled task and length


@dataclass
class SamplePlan:
    """Every sample of the plan, checkpoint-independent (sample planning's result)."""

    gen_items: list[tuple]  # (task, length, sample, prompt, num_tokens) of "generate" tasks
    runner_work: list[RunnerWork]  # (task, length, indices) of tasks that drive the runner
    groups: list[tuple]  # (task, length, indices): every planned (task, length)
    dataset_hashes: dict[str, str]
    unavailable_lengths: dict[str, dict[str, str]]  # task -> {length: reason}
    # (task, length) -> how many samples a plain run takes there (its pool; --selection picks within it)
    pools: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)


def _num_samples(task, length: int, samples: int | None, tokenizer) -> int:
    """How many samples of a task to run at a length. --samples caps every task; without it a
    length-controlled task gets DEFAULT_SAMPLES and a fixed dataset (LongBench, MMLU, HellaSwag) all
    its items. A task whose count depends on the tokenizer (ppl's windows) says so through
    `num_samples_with_tokenizer`, which raises TaskUnavailable when there is none at that length."""
    avail = task.num_samples_available(length)
    counter = getattr(task, "num_samples_with_tokenizer", None)
    if counter is not None:
        avail = counter(length, tokenizer)
    if samples is None:
        own = task.default_samples(length)  # a reference's own count (HELMET 100, BABILong's files)
        want = own if own is not None else DEFAULT_SAMPLES if task.length_controlled or avail is None else avail
    else:
        want = samples
    return want if avail is None else min(want, avail)


def check_lengths(
    cfg: EvalConfig, task_lens: dict[str, list[int]], tasks: list, min_ctx: int, tightest, fix: str
) -> int:
    """Every length a length-controlled task runs at fits the tightest context (`fix`: what to do
    about one that does not, the model source's context_fix); returns the truncation budget of fixed
    datasets cut to the context (LongBench's exact-length rule)."""
    for task in tasks:
        if not task.length_controlled:
            continue
        for L in task_lens[task.name]:
            if L > min_ctx:
                raise UserError(
                    f"length {format_length(L)} ({L} tokens) is beyond the context of {tightest.path} ({min_ctx} tokens): {fix}"
                )
    if cfg.max_length is not None and cfg.max_length > min_ctx:
        raise UserError(
            f"--max-length {cfg.max_length} is beyond the context of {tightest.path} ({min_ctx} tokens): {fix}"
        )
    truncation_budget = cfg.max_length or min_ctx
    for task in tasks:
        if (
            not task.length_controlled
            and task.kind == "generate"
            and not task.no_context
            # under LongBench's reference protocol --max-length is pred.py's prompt budget alone
            # (Task.task_lengths checks it there)
            and not (task.family == "longbench" and task.protocol == "reference")
            and task.max_new_tokens >= truncation_budget
        ):
            # the prompt cap (budget - max_new_tokens) would be <= 0, which middle_truncate reads as "no truncation"
            raise UserError(
                f"--max-length {truncation_budget} leaves no prompt for {task.name}, which generates up to "
                f"{task.max_new_tokens} tokens: pass a --max-length above {task.max_new_tokens} (it is prompt + generation)"
            )
    return truncation_budget


def plan_samples(
    cfg: EvalConfig,
    tasks: list,
    task_lens: dict[str, list[int]],
    tokenizer,
    min_ctx: int,
    tightest,
    options: Options,
    fix: str,
) -> SamplePlan:
    """Build (or read from the cache) every sample and check that each fits the tightest context."""
    from harness.core.progress import progress_bar

    plan = SamplePlan([], [], [], {}, {})
    selection = cfg.selection
    cache: Path | Literal[False] | None = (
        False if cfg.cache_dir == "none" else (Path(cfg.cache_dir) if cfg.cache_dir else None)
    )
    builder = _SampleBuilder(cfg, tokenizer, options, min_ctx, tightest, fix, cache)
    bar = progress_bar(total=sum(map(len, task_lens.values())), desc="samples", unit="set", enabled=cfg.progress)
    for task in tasks:
        chat = _task_chat(cfg, task, tokenizer)
        for L in task_lens[task.name]:
            try:
                n = _num_samples(task, L, cfg.samples, tokenizer)
            except TaskUnavailable as exc:  # e.g. ppl: no document reaches this length
                plan.unavailable_lengths.setdefault(task.name, {})[str(L)] = str(exc)
                bar.update(1)
                continue
            plan.pools[(task.name, L)] = n
            indices = list(range(n)) if selection is None else _selected(selection, task.name, L, n)
            if indices:  # (a selection may name none of this cell's samples yet)
                plan.groups.append((task, L, indices))
                if task.kind != "generate":
                    plan.runner_work.append(RunnerWork(task, L, indices))
                else:
                    plan.gen_items += builder.items(task, L, indices, chat)
            bar.update(1)
        # after its samples: a task whose hash covers what it saw of the tokenizer (MRCR's chat template)
        plan.dataset_hashes[task.name] = task.dataset_hash()
    bar.close()
    return plan


def _selected(selection: dict[str, dict[int, list[int]]], task: str, length: int, pool: int) -> list[int]:
    """The selected indices of one cell, sorted, each within its pool (a caller's mistake otherwise)."""
    chosen = sorted(set(selection.get(task, {}).get(length, [])))
    if chosen and not (0 <= chosen[0] and chosen[-1] < pool):
        raise ValueError(f"selected samples of {task} at {length} lie outside its pool of {pool}")
    return chosen


class _TaskChat(NamedTuple):
    """How one task's prompts meet the chat template under --chat."""

    wrapped: bool  # its prompts go through the chat template
    system: str | None  # the system turn
    tokens: int  # the template's own tokens around a user turn (0 when not wrapped)


def _task_chat(cfg: EvalConfig, task, tokenizer) -> _TaskChat:
    """Under --chat each task says whether its reference wraps its prompts (Task.uses_chat_template),
    and a reference protocol may bring its own system turn. A chat template's own tokens count
    inside a length-controlled sample's budget: measured once with the local tokenizer, the
    sample is fitted to the rest (metadata records both)."""
    wrapped = cfg.chat_template and task.uses_chat_template()
    system = _system_prompt(cfg, task) if wrapped else None
    return _TaskChat(wrapped, system, _chat_template_tokens(tokenizer, system) if wrapped else 0)


@dataclass(frozen=True)
class _SampleBuilder:
    """What building the samples of one (task, length) reads: the run's flags, tokenizer and
    reasoning options, the sample cache, and the tightest context every prompt must fit."""

    cfg: EvalConfig
    tokenizer: Any
    options: Options
    min_ctx: int
    tightest: Any  # the checkpoint with the smallest context
    fix: str  # what to do about a sample past it
    cache: Path | Literal[False] | None

    def items(self, task, L: int, indices: list[int], chat: _TaskChat) -> list[tuple]:
        """(task, L, sample, prompt, num_tokens) of each index, each checked against the context."""
        from tasks.generate import generate_samples

        fits_chat = (task.length_controlled and task.length_is_budget()) or (task.fit_chat_template and L > 0)
        fit = L - chat.tokens if fits_chat and chat.tokens else L
        if fit < 1 and L > 0:  # (L 0: a prompt without context, not fitted)
            raise UserError(
                f"length {format_length(L)} leaves no room after the chat template's {chat.tokens} tokens: {self.fix}"
            )
        from harness.pipeline.thinking import thinking_room

        items = []
        # a thinking budget's tokens (and its forced close) come before the answer's
        room = thinking_room(self.options.max_thinking_tokens, self.tokenizer)
        thinking = f" + {room} to think (--max-thinking-tokens)" if room else ""
        made = generate_samples(task, fit, indices, self.tokenizer, seed=self.cfg.seed, cache_dir=self.cache, nominal=L)
        for s in made:
            s = self._shown(task, s, L, fit, chat)
            prompt, num = self._prompt(s, chat)
            if num + room + s.max_new_tokens > self.min_ctx:
                raise UserError(
                    f"{task.name} at length {format_length(L)}: sample {s.index} needs {num} prompt tokens{thinking} + "
                    f"{s.max_new_tokens} to generate > context {self.min_ctx} of {self.tightest.path}: {self.fix}"
                )
            items.append((task, L, s, prompt, num))
        return items

    def _shown(self, task, s, L: int, fit: int, chat: _TaskChat):
        """The sample as this run shows it: keyed at L, the reasoning options applied, the chat
        decision in its metadata."""
        from harness.models.runners.common import prompt_ids
        from harness.pipeline.reasoning import apply_options

        tokenizer = self.tokenizer
        if fit != L:  # keyed and reported at L; fitted to L minus the template's tokens
            s = dataclasses.replace(
                s, length=L, metadata={**s.metadata, "fitted_length": fit, "chat_template_tokens": chat.tokens}
            )
        s = apply_options(s, self.options, lambda text: len(prompt_ids(tokenizer, text)))
        if chat.wrapped and not task.chat_answer_prefix() and s.answer_prefix:  # the reference's chat turn
            s = s.without_answer_prefix(len(prompt_ids(tokenizer, s.input)))
        if self.cfg.chat_template:  # the runner reads the per-sample decision (harness.pipeline.reasoning)
            s = dataclasses.replace(s, metadata={**s.metadata, "chat": chat.wrapped, "system_prompt": chat.system})
        return s

    def _prompt(self, s, chat: _TaskChat) -> tuple[str, int]:
        """The prompt the runner gets and its tokens: the chat-wrapped one, or the sample's own."""
        from harness.models.runners.common import prompt_ids

        if chat.wrapped:
            prompt = _chat_prompt(self.tokenizer, s, chat.system)
            return prompt, len(prompt_ids(self.tokenizer, prompt))
        return s.prompt, s.num_tokens


def _chat_prompt(tokenizer, sample, system_prompt: str | None = None) -> str:
    """The task input as the user turn, the answer prefix after the assistant header."""
    from harness.pipeline.reasoning import chat_prompt

    return chat_prompt(tokenizer, sample, system_prompt)


def _system_prompt(cfg: EvalConfig, task) -> str | None:
    """The system turn of a chat-wrapped task: --system-prompt, else the reference's own under the
    reference protocol (NoLiMa's "You are a helpful assistant"), else none."""
    if cfg.system_prompt is not None:
        return cfg.system_prompt
    return task.reference_system_prompt if task.protocol == "reference" else None


def _chat_template_tokens(tokenizer, system_prompt: str | None) -> int:
    """Tokens a chat template adds around a user turn (and the system turn), counted once."""
    from types import SimpleNamespace

    from harness.models.runners.common import prompt_ids

    probe = SimpleNamespace(input="Question: which word comes next?", answer_prefix="")
    wrapped = _chat_prompt(tokenizer, probe, system_prompt)
    # A template that leaves a turn out would have the model answer without the task's input (or
    # instruction): stopped here, before any work (harness doctor's "chat turns" check says the same).
    if probe.input not in wrapped:
        raise UserError(
            "the chat template leaves the user turn's text out of the prompt: the model would never see the task "
            "input; fix the template or drop --chat (harness doctor checks it)"
        )
    if system_prompt and system_prompt not in wrapped:
        raise UserError(
            "the chat template leaves the system turn out of the prompt (it renders no 'system' role): "
            "--system-prompt would be dropped in silence; fix the template or drop --system-prompt"
        )
    return max(0, len(prompt_ids(tokenizer, wrapped)) - len(prompt_ids(tokenizer, probe.input)))
