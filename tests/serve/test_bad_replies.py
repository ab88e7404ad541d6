"""A bad reply from a served model is never stored as a prediction (issue 24 §2).

Each case makes our tiny OpenAI-compatible server (tests/serve/tiny_server.py) answer 200 with a
reply of the wrong shape: an empty or missing `choices`, a choice without `text` or with null or
numeric text, an `error` object, two choices for n=1, a JSON list, a chat reply without `message`,
a non-numeric `max_model_len`, NaN or positive prompt log-probs. Each must end in one `error:` line
naming the server's answer, exit 2, with the store exactly as it was before (records computed
earlier kept, nothing added); the same command against a healthy server then computes exactly the
missing samples, and they equal those of a run that never met a bad reply."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tiny_server import TinyServer

from harness.cli import main
from harness.pipeline.store import read_store

ARGS = ["--lengths", "1k", "--no-progress", "--cache-dir", "none", "--batch-size", "1", "--concurrency", "1"]
RETRIES = ["--retries", "1"]  # a bad reply is tried again once (after 0.5 s), then the run stops


def _eval(server: TinyServer, model_dir: Path, out: Path, task: str, samples: int, *extra: str) -> int:
    served = ["--backend", "openai", "--base-url", server.url, "--model", "tiny", "--tokenizer", str(model_dir)]
    return main(
        ["eval", *served, *ARGS, *RETRIES, "--tasks", task, "--samples", str(samples), *extra, "--out", str(out)]
    )


def _records(out: Path) -> dict[tuple, dict]:
    return {(r["task"], r["length"], r["index"]): r for r in read_store(out / "samples.jsonl")[1]}


def _posts(server: TinyServer) -> int:
    return sum(1 for path, _ in server.requests if path != "/v1/models" and not path.endswith("/tokenize"))


def _on(route: str, mutate: Callable[[dict], object], skip: int = 0) -> Callable[[str, dict], object]:
    """A `mangle` for TinyServer: `mutate` the answers to `route`, after the first `skip` of them."""
    seen = [0]

    def mangle(path: str, answer: dict) -> object:
        if path != route:
            return answer
        seen[0] += 1
        return answer if seen[0] <= skip else mutate(answer)

    return mangle


def _choice(**changes) -> Callable[[dict], dict]:
    """Replace fields of the (only) choice; a value of ... removes the field."""

    def mutate(answer: dict) -> dict:
        choice = {**answer["choices"][0], **changes}
        return {**answer, "choices": [{k: v for k, v in choice.items() if v is not ...}]}

    return mutate


def _logprob_at(value: float) -> Callable[[dict], dict]:
    """The prompt's last scored position gets `value` as its log-prob (OpenAI form)."""

    def mutate(answer: dict) -> dict:
        choice = answer["choices"][0]
        lps = list(choice["logprobs"]["token_logprobs"])
        lps[-1] = value
        return {**answer, "choices": [{**choice, "logprobs": {**choice["logprobs"], "token_logprobs": lps}}]}

    return mutate


COMPLETIONS, CHAT, MODELS = "/v1/completions", "/v1/chat/completions", "/v1/models"
OOM = {"error": {"message": "CUDA out of memory", "type": "InternalServerError", "code": 500}}

# (case, route, mutation, answers to let through first, what the error names)
GENERATE_CASES = [
    ("empty choices", COMPLETIONS, lambda a: {**a, "choices": []}, "choices: List should have at least 1 item"),
    ("no choices", COMPLETIONS, lambda a: {"object": "text_completion"}, "choices: Field required"),
    ("choice without text", COMPLETIONS, _choice(text=...), "choices[0].text: Field required"),
    ("null text", COMPLETIONS, _choice(text=None), "choices[0].text: Input should be a valid string"),
    ("numeric text", COMPLETIONS, _choice(text=12345), "choices[0].text: Input should be a valid string"),
    ("error object", COMPLETIONS, lambda a: OOM, "it is an error: CUDA out of memory"),
    ("error beside choices", COMPLETIONS, lambda a: {**a, **OOM}, "it is an error: CUDA out of memory"),
    ("two choices", COMPLETIONS, lambda a: {**a, "choices": a["choices"] * 2}, "List should have at most 1 item"),
    ("JSON list", COMPLETIONS, lambda a: a["choices"], "not a completion (Input should be a valid dictionary"),
    ("not JSON", COMPLETIONS, lambda a: b"<html>502 Bad Gateway</html>", "not JSON: b'<html>502 Bad Gateway"),
    ("negative prompt tokens", COMPLETIONS, lambda a: {**a, "usage": {"prompt_tokens": -3}}, "usage.prompt_tokens"),
    (
        "max_model_len abc",
        MODELS,
        lambda a: {**a, "data": [{**a["data"][0], "max_model_len": "abc"}]},
        "data[0].max_model_len: Input should be a valid integer",
    ),
    (
        "max_model_len 0",
        MODELS,
        lambda a: {**a, "data": [{**a["data"][0], "max_model_len": 0}]},
        "data[0].max_model_len: Input should be greater than 0",
    ),
    ("no model list", MODELS, lambda a: {"object": "list"}, "data: Field required"),
]
CHAT_CASES = [
    ("chat without message", CHAT, _choice(message=...), "choices[0].message: Field required"),
    ("chat content null", CHAT, _choice(message={"role": "assistant", "content": None}), "content is null"),
    ("chat content a list", CHAT, _choice(message={"role": "assistant", "content": ["x"]}), "valid string"),
]
LOGLIKELIHOOD_CASES = [
    # skip=1: the planning probe gets a good answer, so the bad one comes while scoring samples.
    ("NaN prompt log-prob", COMPLETIONS, _logprob_at(math.nan), "Input should be a finite number"),
    ("positive prompt log-prob", COMPLETIONS, _logprob_at(0.5), "Input should be less than or equal to 0"),
    ("null prompt log-prob", COMPLETIONS, _logprob_at(None), "only the first prompt position may have no log-prob"),
    ("no prompt log-probs", COMPLETIONS, _choice(logprobs=...), "not a completion with prompt log-probs (no prompt"),
]


@pytest.fixture(scope="module")
def server(tiny_llama_dir):
    with TinyServer(str(tiny_llama_dir)) as s:
        yield s


@pytest.fixture(scope="module")
def chat_server(chat_model_dir):
    with TinyServer(str(chat_model_dir)) as s:
        yield s


@pytest.fixture(scope="module")
def reference(server, chat_server, tiny_llama_dir, chat_model_dir, tmp_path_factory):
    """Per task: (a store holding sample 0, the records of samples 0-1), both from a healthy server."""
    made = {}
    for key, srv, model, task, extra in (
        ("vt", server, tiny_llama_dir, "vt", []),
        ("chat", chat_server, chat_model_dir, "vt", ["--chat"]),
        ("serve_choice", server, tiny_llama_dir, "serve_choice", []),
    ):
        root = tmp_path_factory.mktemp(f"ref-{key}")
        assert _eval(srv, model, root / "one", task, 1, *extra) == 0
        assert _eval(srv, model, root / "two", task, 2, *extra) == 0
        made[key] = (root / "one", _records(root / "two"))
    return made


def _check_bad_reply_is_not_stored(srv, model, ref, tmp_path, capsys, task, extra, route, mutate, skip, named):
    first, want = ref
    out = tmp_path / "run"
    shutil.copytree(first, out)
    before = (out / "samples.jsonl").read_bytes()
    capsys.readouterr()
    srv.mangle = _on(route, mutate, skip)
    try:
        assert _eval(srv, model, out, task, 2, *extra) == 2
    finally:
        srv.mangle = None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the server at "), err
    assert "malformed reply after 2 tries" in err[0] and named in err[0], err[0]
    assert (out / "samples.jsonl").read_bytes() == before  # sample 0 kept, nothing added
    posts = _posts(srv)
    assert _eval(srv, model, out, task, 2, *extra) == 0
    assert _posts(srv) - posts == (1 if task == "vt" else 3)  # sample 1 only (scored: the probe + 2 continuations)
    got = _records(out)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k]["prediction"] == want[k]["prediction"] and got[k]["score"] == want[k]["score"]


@pytest.mark.parametrize("case, route, mutate, named", GENERATE_CASES, ids=[c[0] for c in GENERATE_CASES])
def test_bad_completion_or_model_list_is_never_stored(
    case, route, mutate, named, server, tiny_llama_dir, reference, tmp_path, capsys
):
    _check_bad_reply_is_not_stored(
        server, tiny_llama_dir, reference["vt"], tmp_path, capsys, "vt", [], route, mutate, 0, named
    )


@pytest.mark.parametrize("case, route, mutate, named", CHAT_CASES, ids=[c[0] for c in CHAT_CASES])
def test_bad_chat_reply_is_never_stored(
    case, route, mutate, named, chat_server, chat_model_dir, reference, tmp_path, capsys
):
    _check_bad_reply_is_not_stored(
        chat_server, chat_model_dir, reference["chat"], tmp_path, capsys, "vt", ["--chat"], route, mutate, 0, named
    )


@pytest.mark.parametrize("case, route, mutate, named", LOGLIKELIHOOD_CASES, ids=[c[0] for c in LOGLIKELIHOOD_CASES])
def test_bad_prompt_logprobs_are_never_scored(
    case, route, mutate, named, server, tiny_llama_dir, reference, tmp_path, capsys
):
    ref = reference["serve_choice"]
    _check_bad_reply_is_not_stored(
        server, tiny_llama_dir, ref, tmp_path, capsys, "serve_choice", [], route, mutate, 1, named
    )


def test_bad_prompt_logprobs_at_planning_are_one_line(server, tiny_llama_dir, tmp_path, capsys):
    """The probe that asks whether the server returns prompt log-probs validates its reply too."""
    capsys.readouterr()
    server.mangle = _on(COMPLETIONS, _logprob_at(math.inf))
    try:
        assert _eval(server, tiny_llama_dir, tmp_path, "vt,serve_choice", 1) == 2
    finally:
        server.mangle = None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "malformed reply after 2 tries" in err[0] and "finite number" in err[0], err
    assert not (tmp_path / "samples.jsonl").exists() or not _records(tmp_path)


def test_a_bad_reply_that_clears_is_retried_and_the_good_one_stored(server, tiny_llama_dir, reference, tmp_path):
    """A server that answers one empty reply (mid-restart, overloaded) and then a good one: the retry
    gets the good one, and the run finishes as if nothing happened."""
    bad = [0]

    def once(path: str, answer: dict) -> object:
        if path == COMPLETIONS and not bad[0]:
            bad[0] = 1
            return {"choices": []}
        return answer

    server.mangle = once
    try:
        assert _eval(server, tiny_llama_dir, tmp_path, "vt", 2) == 0
    finally:
        server.mangle = None
    assert bad[0] == 1
    want = reference["vt"][1]
    assert {k: r["prediction"] for k, r in _records(tmp_path).items()} == {k: r["prediction"] for k, r in want.items()}
