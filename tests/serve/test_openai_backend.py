"""--backend openai against our tiny OpenAI-compatible server (tests/serve/tiny_server.py): real HTTP on
127.0.0.1, a real model behind it (transformers, computed by the server's own code), injected 429/5xx
and a server that dies mid-run. The same against `vllm serve` is tests/serve/test_vllm_serve.py."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from tiny_server import TinyServer

from harness.cli import main
from harness.models.runners.base import LoglikelihoodRequest, RunnerSettings
from harness.pipeline.store import read_store

TASKS = "niah_single_1,vt"


@pytest.fixture(scope="module")
def server(tiny_llama_dir):
    with TinyServer(str(tiny_llama_dir)) as s:
        yield s


def _eval(args: list[str], out: Path) -> int:
    return main(["eval", "--lengths", "1k", *args, "--out", str(out), "--no-progress", "--cache-dir", "none"])


def _served(server, model_dir, *extra: str) -> list[str]:
    return ["--backend", "openai", "--base-url", server.url, "--model", "tiny", "--tokenizer", str(model_dir), *extra]


def _records(out: Path) -> dict[tuple, dict]:
    return {(r["task"], r["length"], r["index"]): r for r in read_store(out / "samples.jsonl")[1]}


def _posts(server) -> int:
    return sum(1 for path, _ in server.requests if path != "/v1/models" and not path.endswith("/tokenize"))


def test_served_predictions_equal_the_in_process_backend_and_resume(server, tiny_llama_dir, tmp_path, capsys):
    common = ["--tasks", TASKS, "--samples", "3"]
    assert _eval(["--ckpts", str(tiny_llama_dir), "--max-model-len", "2048", *common], tmp_path / "hf") == 0
    assert _eval([*_served(server, tiny_llama_dir), *common], tmp_path / "api") == 0
    hf, api = _records(tmp_path / "hf"), _records(tmp_path / "api")
    assert len(api) == 6 and hf.keys() == api.keys()
    for key in hf:
        assert api[key]["prediction"] == hf[key]["prediction"] and api[key]["score"] == hf[key]["score"]
        assert api[key]["num_tokens"] == hf[key]["num_tokens"]  # prompts built and counted the same way
    assert any(r["prediction"].strip() for r in api.values())
    rec = next(iter(api.values()))
    assert rec["checkpoint"]["fingerprint"].startswith("openai:") and rec["checkpoint"]["path"] == "tiny"
    assert rec["settings"]["backend"] == "openai" and rec["settings"]["max_model_len"] == 2048
    assert rec["settings"]["endpoint"] == {"model": "tiny", "root": str(tiny_llama_dir)}
    results = json.loads((tmp_path / "api" / "results.json").read_text())
    assert results["run"]["model"] == str(tiny_llama_dir)  # the served model's root
    assert results["provenance"]["endpoint"]["base_url"] == server.url
    assert results["provenance"]["endpoint"]["served_max_model_len"] == 2048
    assert f"served tiny (root {tiny_llama_dir}) at {server.url}" in capsys.readouterr().out
    # The same command again computes nothing: every key is stored.
    before = _posts(server)
    assert _eval([*_served(server, tiny_llama_dir), *common], tmp_path / "api") == 0
    assert _posts(server) == before and len(_records(tmp_path / "api")) == 6


def test_429_and_5xx_are_retried_with_backoff(tiny_llama_dir, tmp_path):
    with TinyServer(str(tiny_llama_dir), fail=[429, 500, 503]) as s:
        args = [*_served(s, tiny_llama_dir, "--concurrency", "1"), "--tasks", "vt", "--samples", "2"]
        assert _eval(args, tmp_path) == 0
        statuses = [st for path, st in s.requests if path != "/v1/models" and not path.endswith("/tokenize")]
    assert statuses == [429, 500, 503, 200, 200]  # each injected failure tried again, then the work
    assert len(_records(tmp_path)) == 2


def test_server_killed_mid_run_keeps_what_is_done_and_a_restart_computes_the_rest(tiny_llama_dir, tmp_path, capsys):
    args = ["--tasks", "vt", "--samples", "5", "--batch-size", "1", "--concurrency", "1", "--retries", "1"]
    with TinyServer(str(tiny_llama_dir), max_answers=2) as s:
        capsys.readouterr()  # the server's own model-loading output
        assert _eval([*_served(s, tiny_llama_dir), *args], tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the server at ")
    assert "2 samples are stored" in err[0] and "re-run the same command" in err[0]
    assert len(_records(tmp_path)) == 2
    # Back on another port (same model and root): only the 3 missing samples are computed.
    with TinyServer(str(tiny_llama_dir)) as s2:
        assert _eval([*_served(s2, tiny_llama_dir), *args], tmp_path) == 0
        assert _posts(s2) == 3
    assert sorted(i for _, _, i in _records(tmp_path)) == [0, 1, 2, 3, 4]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _error(capsys, argv: list[str], out: Path) -> str:
    assert _eval(argv, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_bad_input_is_one_line_and_exit_2(server, tiny_llama_dir, tmp_path, capsys, monkeypatch):
    base = ["--tasks", "vt", "--samples", "1"]
    capsys.readouterr()
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    msg = _error(capsys, ["--backend", "openai", "--base-url", dead, "--model", "tiny", "--tokenizer", str(tiny_llama_dir), "--retries", "0", *base], tmp_path / "a")  # fmt: skip
    assert "cannot be reached" in msg and "start the server or fix --base-url" in msg
    msg = _error(capsys, ["--backend", "openai", "--base-url", server.url, "--model", "llama", "--tokenizer", str(tiny_llama_dir), *base], tmp_path / "b")  # fmt: skip
    assert "model 'llama' is not served" in msg and "it serves: tiny" in msg
    monkeypatch.delenv("HARNESS_TEST_KEY", raising=False)
    msg = _error(capsys, [*_served(server, tiny_llama_dir, "--api-key-env", "HARNESS_TEST_KEY"), *base], tmp_path / "c")
    assert "HARNESS_TEST_KEY is not set" in msg
    msg = _error(capsys, [*_served(server, tiny_llama_dir), "--tasks", "vt", "--samples", "1", "--lengths", "4k"], tmp_path / "d")  # fmt: skip
    assert "beyond the context of tiny (2048 tokens)" in msg and "serve the model with a longer --max-model-len" in msg
    msg = _error(capsys, [*_served(server, tiny_llama_dir, "--max-model-len", "4096"), *base], tmp_path / "e")
    assert "beyond the served context" in msg
    msg = _error(capsys, ["--backend", "openai", "--model", "tiny", *base], tmp_path / "f")
    assert "--base-url" in msg
    msg = _error(capsys, ["--ckpts", str(tiny_llama_dir), "--model", "tiny", *base], tmp_path / "g")
    assert "are for served models" in msg
    msg = _error(capsys, [*_served(server, tiny_llama_dir, "--dtype", "bfloat16", "--rope-theta", "1e6"), *base], tmp_path / "h")  # fmt: skip
    assert "--dtype, --rope-theta cannot change a served model" in msg
    assert server.requests  # all of the above were answered by planning, before any sample was sent


def test_served_context_missing_needs_max_model_len(tiny_llama_dir, tmp_path, capsys):
    with TinyServer(str(tiny_llama_dir), report_context=False) as s:
        capsys.readouterr()  # the server's own model-loading output
        msg = _error(capsys, [*_served(s, tiny_llama_dir), "--tasks", "vt", "--samples", "1"], tmp_path / "a")
        assert "does not report the context" in msg and "--max-model-len" in msg
        assert _eval([*_served(s, tiny_llama_dir, "--max-model-len", "2048"), "--tasks", "vt", "--samples", "1"], tmp_path / "b") == 0  # fmt: skip


def test_loglikelihood_from_prompt_logprobs_equals_in_process(server, tiny_llama_dir):
    from harness.models.runners.registry import get_runner

    endpoint = {"base_url": server.url, "concurrency": 2}
    api = get_runner("openai", "tiny", RunnerSettings(backend="openai", max_model_len=2048, endpoint=endpoint, tokenizer=str(tiny_llama_dir)))  # fmt: skip
    hf = get_runner("hf", str(tiny_llama_dir), RunnerSettings(backend="hf", dtype="float32"))
    try:
        from harness.models.runners.base import GenerationRequest

        greedy = hf.generate([GenerationRequest("The grass is green. The sky is", 3)])[0]
        reqs = [
            LoglikelihoodRequest("The grass is green. The sky is", greedy),
            LoglikelihoodRequest("The grass is green. ", "The sky is blue"),
            LoglikelihoodRequest("", "hello world"),
        ]
        a, b = api.loglikelihood(reqs), hf.loglikelihood(reqs)
    finally:
        hf.close()
        api.close()
    assert [g for _, g in a] == [g for _, g in b] and a[0][1] is True
    assert [x for x, _ in a] == pytest.approx([x for x, _ in b], abs=1e-4)


def test_chat_route_equals_in_process_chat_template(chat_model_dir, tmp_path):
    common = ["--chat", "--system-prompt", "Answer briefly.", "--tasks", TASKS, "--samples", "2"]
    assert _eval(["--ckpts", str(chat_model_dir), "--max-model-len", "2048", *common], tmp_path / "hf") == 0
    with TinyServer(str(chat_model_dir)) as s:
        assert _eval([*_served(s, chat_model_dir), *common], tmp_path / "api") == 0
    hf, api = _records(tmp_path / "hf"), _records(tmp_path / "api")
    assert hf.keys() == api.keys() and len(api) == 4
    for key in hf:
        assert api[key]["prediction"] == hf[key]["prediction"]
        # the template's tokens count inside the 1k budget
        assert api[key]["num_tokens"] == hf[key]["num_tokens"] <= 1024
        assert api[key]["metadata"]["fitted_length"] == 1024 - api[key]["metadata"]["chat_template_tokens"]
    prov = json.loads((tmp_path / "api" / "results.json").read_text())["provenance"]
    assert prov["template"] == "chat" and len(prov["chat_template"]) == 16
    assert prov["system_prompt"] == "Answer briefly."


def test_backoff_doubles_and_a_4xx_is_not_retried(server):
    from harness.core.errors import UserError
    from harness.models.runners.endpoint import Endpoint, EndpointError, RequestRejected, api_base
    from harness.models.runners.replies import Completion

    waits: list[float] = []
    ep = Endpoint(server.url, retries=3, sleep=waits.append)
    payload = {"model": "tiny", "prompt": "The sky is", "max_tokens": 2, "temperature": 0.0}
    server.fail = [429, 500, 502]
    assert isinstance(ep.post("/completions", payload, Completion).choices[0].text, str)
    assert waits == [0.5, 1.0, 2.0]
    waits.clear()
    server.fail = [500, 503, 500, 502]
    with pytest.raises(EndpointError, match=r"answered 502 \(injected 502\) after 4 tries"):
        ep.post("/completions", payload, Completion)
    assert waits == [0.5, 1.0, 2.0]
    waits.clear()
    with pytest.raises(RequestRejected, match="404"):
        ep.post("/completions", {**payload, "model": "other"}, Completion)
    assert waits == [] and server.fail == []
    assert api_base("http://127.0.0.1:8000") == api_base("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    assert api_base("https://api.example.com/openai/v1") == "https://api.example.com/openai/v1"
    with pytest.raises(UserError, match="not a URL"):
        api_base("127.0.0.1:8000")


def test_loglikelihood_tasks_through_the_endpoint_or_unavailable_with_the_reason(server, tiny_llama_dir, tmp_path):
    args = ["--tasks", "vt,serve_choice", "--samples", "2"]
    assert _eval(["--ckpts", str(tiny_llama_dir), "--max-model-len", "2048", *args], tmp_path / "hf") == 0
    assert _eval([*_served(server, tiny_llama_dir), *args], tmp_path / "api") == 0
    hf = {k: r for k, r in _records(tmp_path / "hf").items() if k[0] == "serve_choice"}
    api = {k: r for k, r in _records(tmp_path / "api").items() if k[0] == "serve_choice"}
    assert hf.keys() == api.keys() and len(api) == 2
    for k in hf:
        assert api[k]["metadata"]["logprobs"] == pytest.approx(hf[k]["metadata"]["logprobs"], abs=1e-4)
    with TinyServer(str(tiny_llama_dir), logprobs=False) as s:
        assert _eval([*_served(s, tiny_llama_dir), *args], tmp_path / "nolp") == 0
    results = json.loads((tmp_path / "nolp" / "results.json").read_text())
    reasons = {t: r for suite in results["suites"].values() for t, r in suite["unavailable"].items()}
    assert "refuses prompt log-probs" in reasons["serve_choice"] and "vt" not in reasons
    assert {k[0] for k in _records(tmp_path / "nolp")} == {"vt"}  # the rest ran; nothing scored 0 for it
