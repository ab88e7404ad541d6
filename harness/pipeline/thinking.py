"""A reasoning model's thinking budget apart from its answer budget (`--max-thinking-tokens N`).

    from harness.pipeline.thinking import ThinkingBudget
    budget = ThinkingBudget(thinking=4096, tokenizer=runner.tokenizer)
    raws = runner.generate([budget.request(r) for r in requests])   # room for thinking + answer
    done = budget.finish(runner, requests, raws, opened)            # answers within their own budget

Why: with one budget (`--max-new-tokens`) a long thought leaves the answer cut, or no answer at all
(scitix/sieval PR 11: 469 of 500 CWE answers truncated at 4K). Here the answer keeps the task's
budget A and the thinking gets its own T, the way budget forcing works (llama.cpp's
--reasoning-budget, vLLM's thinking_token_budget, s1):

  1. One generation of up to T + A tokens, without stop strings (a stop string such as HELMET's
     newline must not end a thought; the answer is cut at it afterwards).
  2. A thought closed within T tokens: the answer is what follows `</think>`, cut to A tokens.
     Greedy decoding makes this the same answer a separate generation of A tokens would give.
  3. A thought still open after T tokens (or closed later): its first T tokens are kept, the thought
     is closed ("\\n</think>\\n\\n") and the answer is generated after it, up to A tokens.

Each record says what happened (metadata `thinking_tokens`, `thinking_cut`, `answer_tokens`,
`answer_cut`); results.json counts per cell the thoughts closed at the budget and the answers that
reached theirs (`budget`), and the table marks them. The prediction scored is the answer alone.

A template that opens the thought in the prompt (DeepSeek-R1's ends with "<think>\\n") leaves the
output without `<think>`: `opened` says so per request. A server whose reasoning parser moves the
thought out of the message content (vLLM --reasoning-parser) shows the harness the answer only: the
budget then caps max_tokens, and a thought that filled it leaves an empty answer, which the
degenerate-output marks name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.models.runners.base import GenerationRequest

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# What closes a thought the budget ended (the marker on a line of its own, then the answer).
FORCED_CLOSE = "\n</think>\n\n"


@dataclass(frozen=True)
class Thought:
    """An output split into its thinking and its answer."""

    thinking: str  # the thought as written, markers included ("" when the output holds none)
    answer: str
    closed: bool  # False: the output ended inside the thought (no answer at all)


def split_thought(raw: str, opened: bool = False) -> Thought:
    """The thought and the answer of one output, as harness.pipeline.reasoning.strip_thinking reads
    them: everything up to the last `</think>` is thinking; an unclosed `<think>` (or, when the prompt
    opened the thought, an output with no `</think>`) is all thinking."""
    if THINK_CLOSE in raw:
        head, _, tail = raw.rpartition(THINK_CLOSE)
        return Thought(head + THINK_CLOSE, tail.lstrip(), True)
    if THINK_OPEN in raw:
        before, _, after = raw.partition(THINK_OPEN)
        return Thought(THINK_OPEN + after, before.lstrip(), False)
    if opened:
        return Thought(raw, "", False)
    return Thought("", raw.lstrip(), True)


def prompt_opens_thought(prompt: str) -> bool:
    """Whether a prompt ends inside an opened thought (a template that writes "<think>" itself)."""
    return prompt.rstrip().endswith(THINK_OPEN)


def close_tokens(tokenizer) -> int:
    """Tokens the forced close takes (planning reserves them beside the thinking budget)."""
    return len(tokenizer(FORCED_CLOSE, add_special_tokens=False)["input_ids"])


def thinking_room(max_thinking_tokens: int | None, tokenizer) -> int:
    """Tokens a request needs beyond its prompt and answer for the thought: 0 without a budget."""
    if max_thinking_tokens is None:
        return 0
    return max_thinking_tokens + close_tokens(tokenizer)


@dataclass(frozen=True)
class Finished:
    """One sample's outcome: the answer scored, the whole output, and what the budgets did."""

    prediction: str
    raw: str
    facts: dict  # thinking_tokens, thinking_cut, answer_tokens, answer_cut


def _continued(messages: tuple[dict, ...] | None, text: str) -> tuple[dict, ...] | None:
    """Chat turns with `text` appended to the assistant's turn (opened when there is none)."""
    if messages is None:
        return None
    turns = [dict(m) for m in messages]
    if turns and turns[-1]["role"] == "assistant":
        turns[-1]["content"] = turns[-1]["content"] + text
    else:
        turns.append({"role": "assistant", "content": text})
    return tuple(turns)


def _cut_at_stops(text: str, request: GenerationRequest, tokenizer) -> str:
    """The answer cut where the request's stop strings and token stops would have ended it."""
    from harness.models.runners.common import cut_at_stop

    stops = list(request.stop)
    for t in request.stop_tokens:  # a token stop ends decoding at its last token's text
        ids = tokenizer(t, add_special_tokens=False)["input_ids"]
        if ids:
            stops.append(tokenizer.decode(ids[-1:]))
    return cut_at_stop(text, tuple(s for s in stops if s))


class ThinkingBudget:
    """Enforces a thinking budget of `thinking` tokens beside each request's answer budget."""

    def __init__(self, thinking: int, tokenizer):
        if thinking < 1:
            raise ValueError("a thinking budget is at least one token")
        self.thinking = thinking
        self.tokenizer = tokenizer

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def request(self, r: GenerationRequest) -> GenerationRequest:
        """The first generation: room for the thought and the answer; no stops (they are the answer's)."""
        return dataclasses.replace(
            r, max_new_tokens=r.max_new_tokens + self.thinking, stop=(), stop_tokens=(), min_new_tokens=0
        )

    def finish(self, runner, requests: list[GenerationRequest], raws: list[str], opened: list[bool]) -> list[Finished]:
        """Each output's answer within its budget; thoughts past the budget are closed and answered
        after (one more generation call for all of them). `requests` are the answer-budget ones."""
        out: list[Finished | None] = [None] * len(raws)
        forced: list[tuple[int, str]] = []  # (position, kept thought)
        for k, (r, raw) in enumerate(zip(requests, raws)):
            thought = split_thought(raw, opened[k])
            ids = self._ids(thought.thinking) if thought.thinking else []
            if thought.thinking and (not thought.closed or len(ids) > self.thinking):
                forced.append((k, self.tokenizer.decode(ids[: self.thinking])))
                continue
            out[k] = self._answered(r, raw, thought.answer, len(ids), cut=False)
        if forced:
            follow = [
                dataclasses.replace(
                    requests[k],
                    prompt=requests[k].prompt + kept + FORCED_CLOSE,
                    messages=_continued(requests[k].messages, kept + FORCED_CLOSE),
                )
                for k, kept in forced
            ]
            for (k, kept), answer in zip(forced, runner.generate(follow)):
                raw = kept + FORCED_CLOSE + answer
                out[k] = self._answered(requests[k], raw, answer.lstrip(), self.thinking, cut=True)
        return [f for f in out if f is not None]

    def _answered(self, r: GenerationRequest, raw: str, answer: str, thinking_tokens: int, cut: bool) -> Finished:
        """The answer cut at the request's stops and to its budget; the facts of both budgets."""
        answer = _cut_at_stops(answer, r, self.tokenizer)
        ids = self._ids(answer)
        if len(ids) > r.max_new_tokens:  # greedy: the first A tokens are what a budget of A gives
            answer = self.tokenizer.decode(ids[: r.max_new_tokens])
        facts = {
            "thinking_tokens": thinking_tokens,
            "thinking_cut": cut,
            "answer_tokens": min(len(ids), r.max_new_tokens),
            "answer_cut": len(ids) >= r.max_new_tokens,
        }
        return Finished(answer, raw, facts)
