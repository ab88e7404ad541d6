"""The reply schemas (harness/models/runners/replies.py) on their own: the shapes real servers send are
accepted, with vLLM's extensions; anything else is one line naming the field and the answer."""

from __future__ import annotations

import math

import pytest

from harness.models.runners.replies import ChatCompletion, Completion, ModelList, ReplyError, ScoredCompletion, parse

# As vLLM 0.x answers an echo + logprobs=1 + prompt_logprobs request (trimmed to three tokens).
VLLM_ECHO = {
    "id": "cmpl-1",
    "object": "text_completion",
    "model": "tiny",
    "choices": [
        {
            "index": 0,
            "text": "The sky blue",
            "logprobs": {
                "text_offset": [0, 3, 7],
                "token_logprobs": [None, -2.5, -0.25],
                "tokens": ["The", " sky", " blue"],
                "top_logprobs": [None, {" sky": -2.5, " sea": -1.0}, {" blue": -0.25}],
            },
            "finish_reason": "length",
            "stop_reason": None,
            "prompt_logprobs": [
                None,
                {"9": {"logprob": -2.5, "rank": 3, "decoded_token": " sky"}},
                {"12": {"logprob": -0.25, "rank": 1, "decoded_token": " blue"}},
            ],
        }
    ],
    "usage": {"prompt_tokens": 2, "total_tokens": 3, "completion_tokens": 1},
}


def test_real_shapes_are_accepted():
    reply = parse(Completion, VLLM_ECHO)
    choice = reply.choices[0]
    assert choice.text == "The sky blue" and choice.logprobs and choice.logprobs.token_logprobs == [None, -2.5, -0.25]
    assert choice.prompt_logprobs and choice.prompt_logprobs[2]["12"].rank == 1
    assert reply.usage and reply.usage.prompt_tokens == 2
    # An integral log-prob written as 0 or -3 (JSON has one number type) is a float here.
    assert parse(Completion, {"choices": [{"text": "", "logprobs": {"token_logprobs": [None, 0, -3]}}]})
    chat = parse(ChatCompletion, {"choices": [{"message": {"role": "assistant", "content": "42"}}]})
    assert chat.choices[0].message.content == "42"
    # vLLM with a reasoning parser: all of the output was thinking, so the answer is empty.
    thought = {"choices": [{"message": {"content": None, "reasoning_content": "hmm"}, "finish_reason": "length"}]}
    assert parse(ChatCompletion, thought).choices[0].message.content is None
    models = parse(ModelList, {"object": "list", "data": [{"id": "m", "root": "/ckpt", "max_model_len": 4096}]})
    assert models.data[0].context == 4096 and models.data[0].root == "/ckpt"
    assert parse(ModelList, {"data": [{"id": "m", "context_length": 8192}]}).data[0].context == 8192
    assert parse(ModelList, {"data": [{"id": "m"}]}).data[0].context is None


def _with(path: list, value) -> dict:
    """VLLM_ECHO with the value at `path` replaced."""
    import copy

    reply = copy.deepcopy(VLLM_ECHO)
    node = reply
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return reply


@pytest.mark.parametrize(
    "reply, named",
    [
        (
            _with(["choices", 0, "logprobs", "token_logprobs", 2], math.nan),
            "token_logprobs[2]: Input should be a finite",
        ),
        (
            _with(["choices", 0, "logprobs", "token_logprobs", 1], -math.inf),
            "token_logprobs[1]: Input should be a finite",
        ),
        (_with(["choices", 0, "logprobs", "token_logprobs", 1], 1e-9), "less than or equal to 0"),
        (_with(["choices", 0, "logprobs", "token_logprobs", 1], "-2.5"), "token_logprobs[1]: Input should be a valid"),
        (_with(["choices", 0, "logprobs", "token_logprobs", 1], True), "token_logprobs[1]: Input should be a valid"),
        (_with(["choices", 0, "logprobs", "top_logprobs", 1, " sky"], 0.5), "less than or equal to 0"),
        (_with(["choices", 0, "logprobs", "top_logprobs"], [None, None, {}]), "top_logprobs[1] is null"),
        (_with(["choices", 0, "logprobs", "top_logprobs"], [None, {}]), "3 token_logprobs but 2 top_logprobs"),
        (
            _with(["choices", 0, "prompt_logprobs", 2, "12", "rank"], 0),
            "rank: Input should be greater than or equal to 1",
        ),
        (_with(["choices", 0, "prompt_logprobs", 2, "12", "logprob"], math.nan), "logprob: Input should be a finite"),
        (_with(["choices", 0, "prompt_logprobs", 1], None), "prompt_logprobs[1] is null"),
        (_with(["choices", 0, "text"], ["a"]), "choices[0].text: Input should be a valid string"),
        (_with(["choices", 0, "index"], -1), "choices[0].index: Input should be greater than or equal to 0"),
        (_with(["usage"], "many"), "usage: Input should be a valid dictionary"),
        ({"object": "error", "message": "model overloaded", "code": 503}, "it is an error: model overloaded"),
        ({"error": "rate limited"}, "it is an error: rate limited"),
        ("just text", "Input should be a valid dictionary"),
        (None, "Input should be a valid dictionary"),
    ],
)
def test_malformed_completion_is_one_line_naming_the_field_and_the_answer(reply, named):
    with pytest.raises(ReplyError) as info:
        parse(Completion, reply)
    message = str(info.value)
    assert "\n" not in message and message.startswith("not a completion (") and named in message, message


def test_the_answer_in_the_message_is_one_short_line():
    huge = {"choices": [{"text": None, "junk": "line one\nline two\u2028" + "x" * 10_000}]}
    with pytest.raises(ReplyError) as info:
        parse(Completion, huge)
    message = str(info.value)
    assert "\n" not in message and "\u2028" not in message and len(message) < 400 and message.endswith("...")
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ReplyError, match="not a model list"):
        parse(ModelList, deep)


@pytest.mark.parametrize(
    "reply, named",
    [
        ({"data": [{"id": "m", "max_model_len": "abc"}]}, "data[0].max_model_len: Input should be a valid integer"),
        ({"data": [{"id": "m", "max_model_len": 4096.5}]}, "data[0].max_model_len: Input should be a valid integer"),
        ({"data": [{"id": "m", "max_model_len": -1}]}, "data[0].max_model_len: Input should be greater than 0"),
        ({"data": [{"id": 7}]}, "data[0].id: Input should be a valid string"),
        ({"data": [{"id": ""}]}, "data[0].id: String should have at least 1 character"),
        ({"data": [{"id": "m", "root": 3}]}, "data[0].root: Input should be a valid string"),
        ({"data": {"id": "m"}}, "data: Input should be a valid list"),
    ],
)
def test_malformed_model_list(reply, named):
    with pytest.raises(ReplyError, match="not a model list") as info:
        parse(ModelList, reply)
    assert named in str(info.value)


def test_a_scored_completion_must_carry_the_prompt_logprobs():
    assert parse(ScoredCompletion, VLLM_ECHO).choices[0].prompt_logprobs
    openai_form = _with(["choices", 0, "prompt_logprobs"], None)
    assert parse(ScoredCompletion, openai_form).choices[0].logprobs
    for missing in (_with(["choices", 0, "logprobs"], None), _with(["choices", 0, "logprobs", "top_logprobs"], None)):
        missing["choices"][0].pop("prompt_logprobs")
        assert parse(Completion, missing)  # a plain completion may go without (the planning probe's question)
        with pytest.raises(ReplyError, match="not a completion with prompt log-probs"):
            parse(ScoredCompletion, missing)
