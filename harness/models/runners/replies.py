"""The replies of an OpenAI-compatible server, one schema per route, checked before anything is used.

    reply = parse(Completion, body)          # ReplyError (one line) unless it is a completion
    reply.choices[0].text

A server's reply is untrusted input: a 200 with `{"choices": []}`, a choice without `text`, two
choices for n=1, `"text": 12345`, an `error` object, NaN or positive log-probs must never become a
stored prediction or score. Each route's reply is one pydantic model below (strict: no coercion of
12345 into "12345" or of "abc" into a number); harness/models/runners/endpoint.py validates every answer
against the schema its caller names and treats a mismatch like a transient failure (retried, then
one error naming the answer). Fields a server adds beyond these are ignored; fields these models
name are checked.

Shapes follow the OpenAI API reference (completions, chat completions, models) and vLLM's
extensions: `prompt_logprobs` (per prompt position {token id: {logprob, rank, decoded_token}}),
`max_model_len` and `root` in /v1/models, `reasoning_content` / `reasoning` beside a chat message.
pydantic is part of every environment the harness runs in (a dependency here, and vLLM's own).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SNIPPET_CHARS = 200

# A log-probability: finite and at most 0 (vLLM clamps -inf to -9999.0, so a real one is finite).
LogProb = Annotated[float, Field(le=0.0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(gt=0)]


class ReplyError(ValueError):
    """An answer that does not have the route's shape; str() is one line naming what is wrong."""


class _Shape(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


def _only_first_missing(name: str, values: list | None) -> None:
    """Per-position prompt log-probs: the first token has none (nothing precedes it), every other has one."""
    if values and any(v is None for v in values[1:]):
        first = next(i for i, v in enumerate(values) if i and v is None)
        raise ValueError(f"{name}[{first}] is null: only the first prompt position may have no log-prob")


class _Reply(_Shape):
    """A whole reply: a JSON object, and not an error (some servers answer 200 with one)."""

    @model_validator(mode="before")
    @classmethod
    def _not_an_error(cls, data: Any) -> Any:
        if isinstance(data, dict) and (data.get("error") is not None or data.get("object") == "error"):
            err = data.get("error")
            message = err.get("message") if isinstance(err, dict) else err
            raise ValueError(f"it is an error: {message or data.get('message') or 'no message'}")
        return data


class Usage(_Shape):
    prompt_tokens: Count | None = None


# ---------------------------------------------------------------- POST /v1/completions


class CompletionLogprobs(_Shape):
    """The OpenAI form: per token its log-prob and the top ones keyed by token text."""

    tokens: list[str] | None = None
    token_logprobs: list[LogProb | None] | None = None
    top_logprobs: list[dict[str, LogProb] | None] | None = None

    @model_validator(mode="after")
    def _positions(self) -> CompletionLogprobs:
        _only_first_missing("token_logprobs", self.token_logprobs)
        _only_first_missing("top_logprobs", self.top_logprobs)
        lps, tops = self.token_logprobs, self.top_logprobs
        if lps is not None and tops is not None and len(lps) != len(tops):
            raise ValueError(f"{len(lps)} token_logprobs but {len(tops)} top_logprobs")
        return self


class RankedLogprob(_Shape):
    """vLLM's prompt log-prob of one token: its value and its rank among all tokens (1: the best)."""

    logprob: LogProb
    rank: Annotated[int, Field(ge=1)] | None = None
    decoded_token: str | None = None


class CompletionChoice(_Shape):
    text: str
    index: Count | None = None
    finish_reason: str | None = None
    logprobs: CompletionLogprobs | None = None
    prompt_logprobs: list[dict[str, RankedLogprob] | None] | None = None

    @model_validator(mode="after")
    def _positions(self) -> CompletionChoice:
        _only_first_missing("prompt_logprobs", self.prompt_logprobs)
        return self


class Completion(_Reply):
    # Every request asks for n=1: a second choice means the server answered something else.
    choices: Annotated[list[CompletionChoice], Field(min_length=1, max_length=1)]
    usage: Usage | None = None


class ScoredCompletion(Completion):
    """The answer to echo + logprobs (a loglikelihood request): the prompt's log-probs must be there,
    in vLLM's form or OpenAI's (planning asked the server once whether it gives them at all)."""

    @model_validator(mode="after")
    def _has_prompt_logprobs(self) -> ScoredCompletion:
        choice = self.choices[0]
        lp = choice.logprobs
        if choice.prompt_logprobs is None and (lp is None or lp.token_logprobs is None or lp.top_logprobs is None):
            raise ValueError("no prompt log-probs (prompt_logprobs, or logprobs.token_logprobs and top_logprobs)")
        return self


# ---------------------------------------------------------------- POST /v1/chat/completions


class ChatMessage(_Shape):
    content: str | None
    role: str | None = None
    # vLLM's reasoning parsers move the thinking here (newer versions name it `reasoning`).
    reasoning_content: str | None = None
    reasoning: str | None = None

    @model_validator(mode="after")
    def _has_text(self) -> ChatMessage:
        # content is null when a reasoning parser took all of the output as thinking (the model
        # never answered: an empty prediction); without that, a null content is no answer at all.
        if self.content is None and self.reasoning_content is None and self.reasoning is None:
            raise ValueError("content is null and there is no reasoning_content")
        return self


class ChatChoice(_Shape):
    message: ChatMessage
    index: Count | None = None
    finish_reason: str | None = None


class ChatCompletion(_Reply):
    choices: Annotated[list[ChatChoice], Field(min_length=1, max_length=1)]
    usage: Usage | None = None


# ---------------------------------------------------------------- GET /v1/models


class ModelCard(_Shape):
    id: Annotated[str, Field(min_length=1)]
    root: str | None = None
    # vLLM names the served context max_model_len; other servers context_length / max_context_length.
    max_model_len: Positive | None = None
    context_length: Positive | None = None
    max_context_length: Positive | None = None

    @property
    def context(self) -> int | None:
        return self.max_model_len or self.context_length or self.max_context_length


class ModelList(_Reply):
    data: list[ModelCard]


# ---------------------------------------------------------------- validation

R = TypeVar("R", bound=_Reply)

_ROUTE_NAMES = {
    Completion: "a completion",
    ScoredCompletion: "a completion with prompt log-probs",
    ChatCompletion: "a chat completion",
    ModelList: "a model list",
}


def snippet(body: Any) -> str:
    """The answer as one short line, for error messages."""
    try:
        text = json.dumps(body, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = f"(a {type(body).__name__} nested too deeply to show)"
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "..."


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse(schema: type[R], body: Any) -> R:
    """`body` (parsed JSON) as `schema`, or ReplyError naming the first thing wrong and the answer."""
    try:
        return schema.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        # Nested model names (function-after[...]) say nothing to a user: keep the field path only.
        loc = tuple(p for p in first["loc"] if isinstance(p, int) or not str(p).startswith("function-"))
        msg = str(first["msg"]).removeprefix("Value error, ")
        what = f"{_where(loc)}: {msg}" if loc else msg
        name = _ROUTE_NAMES.get(schema, schema.__name__)
        raise ReplyError(f"not {name} ({what}): {snippet(body)}") from None
