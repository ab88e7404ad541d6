"""Controls for instruct and reasoning models, shared by every backend (hf, vllm, openai).

    --no-answer-prefix        the prompt ends with the task input (no "Answer:"-style prefix)
    --max-new-tokens N | TASK=N,...   tokens to generate (thinking needs room), for all or some tasks
    --system-prompt TEXT      a system turn before the user turn (chat only)
    --strip-thinking          drop <think>...</think> from a prediction before it is scored
    --max-thinking-tokens N   a thinking budget of its own: the answer keeps the task's budget
                              (harness/pipeline/thinking.py)

Why: a forced answer prefix stops a reasoning model from thinking, RULER's 128-token budget cuts
its thinking short, and scoring the thinking text lets needles the model merely repeated count
as answers (RULER issue 99, HELMET issue 12). Each control is part of the run settings: a
non-default one is recorded in every record's settings.options, which is part of the record's
identity (harness/core/identity.py), so a changed setting never resumes into results computed without
it, and all of them are shown in provenance and the table header.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.core.errors import UserError

if TYPE_CHECKING:
    from tasks.base import Sample

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass(frozen=True)
class Options:
    answer_prefix: bool = True
    max_new_tokens: dict[str, int] = field(default_factory=dict)  # task -> N; "*" -> every task
    system_prompt: str | None = None
    strip_thinking: bool = False
    # A reasoning model's thinking budget, apart from the answer's (None: one budget for both, the
    # task's or --max-new-tokens, as before). harness/pipeline/thinking.py enforces it.
    max_thinking_tokens: int | None = None

    def non_default(self) -> dict:
        """The controls that differ from the default (what changes a run's identity)."""
        out: dict = {}
        if not self.answer_prefix:
            out["answer_prefix"] = False
        if self.max_new_tokens:
            out["max_new_tokens"] = dict(sorted(self.max_new_tokens.items()))
        if self.system_prompt is not None:
            out["system_prompt"] = self.system_prompt
        if self.strip_thinking:
            out["strip_thinking"] = True
        if self.max_thinking_tokens is not None:
            out["max_thinking_tokens"] = self.max_thinking_tokens
        return out

    def provenance(self) -> dict:
        return {
            "answer_prefix": self.answer_prefix,
            "max_new_tokens": dict(sorted(self.max_new_tokens.items())) or None,
            "system_prompt": self.system_prompt,
            "strip_thinking": self.strip_thinking,
            "max_thinking_tokens": self.max_thinking_tokens,
        }

    def tokens_for(self, task: str, default: int) -> int:
        return self.max_new_tokens.get(task, self.max_new_tokens.get("*", default))


def parse_max_new_tokens(spec: str | None) -> dict[str, int]:
    """ "256" -> {"*": 256}; "qa_1=512,vt=64" -> per task; "512,qa_1=1024" -> both."""
    from harness.core.validate import ascii_int

    if spec is None:
        return {}
    out: dict[str, int] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise UserError(f"--max-new-tokens {spec!r} has an empty item: write N or TASK=N,TASK=N")
        task, _, value = part.rpartition("=")
        task = task.strip() or "*"
        try:
            n = ascii_int(value)  # not '５１２'
        except ValueError:
            raise UserError(f"--max-new-tokens {spec!r}: {value!r} is not a whole number (write N or TASK=N)") from None
        if n < 1:
            raise UserError(f"--max-new-tokens {spec!r}: {n} must be at least 1")
        if task in out:
            raise UserError(f"--max-new-tokens {spec!r} gives {task if task != '*' else 'the default'} twice")
        out[task] = n
    return out


def strip_thinking(text: str) -> str:
    """The answer part of a reasoning model's output.

    Removes every <think>...</think> block; text before a lone </think> (templates that open the
    thinking block inside the prompt) and everything after an unclosed <think> (the budget ran out
    while thinking: there is no answer) are thinking too.
    """
    out = _THINK_BLOCK.sub("", text)
    if "</think>" in out:
        out = out.rsplit("</think>", 1)[1]
    if "<think>" in out:
        out = out.split("<think>", 1)[0]
    return out.lstrip()


def chat_messages(sample, system_prompt: str | None) -> tuple[dict, ...]:
    """The sample as chat turns: [system,] user = the task input[, assistant = the answer prefix].
    A sample whose metadata says "conversation" holds a whole conversation as its input, a JSON list
    of {role, content} turns (MRCR's released messages): those turns stand for the user turn."""
    turns: list[dict] = []
    if system_prompt is not None:
        turns.append({"role": "system", "content": system_prompt})
    if (getattr(sample, "metadata", None) or {}).get("conversation"):
        turns += [{"role": t["role"], "content": t["content"]} for t in json.loads(sample.input)]
    else:
        turns.append({"role": "user", "content": sample.input})
    if sample.answer_prefix:
        turns.append({"role": "assistant", "content": sample.answer_prefix})
    return tuple(turns)


def sample_chat(sample, settings) -> bool:
    """Whether a sample goes as chat turns: the plan's per-task decision (Task.uses_chat_template,
    in its metadata under --chat), else the run's --chat."""
    return bool(sample.metadata.get("chat", settings.chat_template))


def sample_system_prompt(sample, settings) -> str | None:
    """The sample's system turn: the plan's (--system-prompt or the reference's own), else the run's."""
    return sample.metadata.get("system_prompt", settings.system_prompt)


def chat_prompt(tokenizer, sample, system_prompt: str | None) -> str:
    """The prompt text a chat template makes of the sample: the turns up to the assistant header,
    then the answer prefix (what a server's continue_final_message produces)."""
    if not getattr(tokenizer, "chat_template", None):
        raise UserError("--chat-template given but the tokenizer has no chat template: drop the flag for base models")
    turns = list(chat_messages(sample, system_prompt))
    if sample.answer_prefix:  # its assistant turn: the prefix follows the header as text (below)
        turns.pop()
    import jinja2

    try:
        text = tokenizer.apply_chat_template(list(turns), tokenize=False, add_generation_prompt=True)
    except jinja2.TemplateError as exc:  # a syntax error, or a template that raises on these turns
        lineno = getattr(exc, "lineno", None)  # a syntax error's; a raise_exception() has none
        where = f" (line {lineno})" if lineno else ""
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"the tokenizer's chat template cannot render the prompt: {first}{where}: fix chat_template in "
            "tokenizer_config.json (or chat_template.jinja), or drop --chat-template"
        ) from None
    return text + sample.answer_prefix


def chat_template_hash(tokenizer) -> str | None:
    """16 hex digits of the chat template text (recorded in provenance); None without one."""
    tpl = getattr(tokenizer, "chat_template", None)
    if not tpl:
        return None
    text = tpl if isinstance(tpl, str) else json.dumps(tpl, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def apply_options(sample: Sample, options: Options, count) -> Sample:
    """The sample as this run sends it: answer prefix dropped and tokens to generate overridden
    when asked (each recorded in the sample's metadata); the sample itself when nothing applies.
    `count(text)` counts a prompt's tokens the way the length rule does."""
    import dataclasses

    if not options.answer_prefix:
        sample = sample.without_answer_prefix(count(sample.input))
    n = options.tokens_for(sample.task, sample.max_new_tokens)
    if n != sample.max_new_tokens:
        meta = {**sample.metadata, "max_new_tokens_default": sample.max_new_tokens}
        sample = dataclasses.replace(sample, max_new_tokens=n, metadata=meta)
    return sample
