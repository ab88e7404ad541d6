"""Served models' replies, damaged (issue 40): every reply of each route's shape, with a value
retyped, a key dropped or added or a number out of range (tests/validation/mutations.py), parses
into a reply whose text is a string and whose counts are in range, or is refused with one
ReplyError line naming it; never another exception, so a malformed reply is never stored."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.models.runners.replies import ChatCompletion, Completion, ModelList, ReplyError, ScoredCompletion, parse

from .mutations import mutated_json, one_line

# Valid answers as vLLM's OpenAI-compatible server writes them (vllm/entrypoints/openai/protocol.py).
COMPLETION = {
    "id": "cmpl-1",
    "object": "text_completion",
    "model": "tiny",
    "choices": [{"index": 0, "text": " 42.", "finish_reason": "stop", "logprobs": None}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
}
SCORED = {
    "choices": [
        {
            "index": 0,
            "text": "",
            "finish_reason": "length",
            "logprobs": {
                "tokens": ["a", "b", "c"],
                "token_logprobs": [None, -1.5, -0.25],
                "top_logprobs": [None, {"b": -1.5}, {"x": -0.1}],
            },
        }
    ],
    "usage": {"prompt_tokens": 3},
}
CHAT = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 1},
}
MODELS = {"object": "list", "data": [{"id": "tiny", "object": "model", "root": "/models/tiny", "max_model_len": 4096}]}
ROUTES = [(Completion, COMPLETION), (ScoredCompletion, SCORED), (ChatCompletion, CHAT), (ModelList, MODELS)]


def _check(reply) -> None:
    """What the runners read from an accepted reply is of the type and range they use."""
    if isinstance(reply, ModelList):
        for card in reply.data:
            assert isinstance(card.id, str)
            assert card.max_model_len is None or card.max_model_len >= 1
        return
    (choice,) = reply.choices
    if isinstance(reply, ChatCompletion):
        assert choice.message.content is None or isinstance(choice.message.content, str)
    else:
        assert isinstance(choice.text, str)
    if reply.usage is not None and reply.usage.prompt_tokens is not None:
        assert reply.usage.prompt_tokens >= 0
    if isinstance(reply, ScoredCompletion) and choice.logprobs is not None:
        for lp in choice.logprobs.token_logprobs or []:
            assert lp is None or (math.isfinite(lp) and lp <= 0)


@pytest.mark.parametrize("schema, valid", ROUTES, ids=[s.__name__ for s, _ in ROUTES])
def test_valid_replies_parse(schema, valid):
    _check(parse(schema, valid))


@pytest.mark.parametrize("schema, valid", ROUTES, ids=[s.__name__ for s, _ in ROUTES])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_replies_parse_right_or_are_one_line(schema, valid, data):
    body = data.draw(mutated_json(valid))
    try:
        reply = parse(schema, body)
    except ReplyError as exc:
        one_line(exc)
        return
    _check(reply)
