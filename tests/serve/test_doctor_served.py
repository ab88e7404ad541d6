"""`harness doctor` against a served model (tests/serve/tiny_server.py): a server that caps the
context below the requested length fails with the server's number; a server whose tokenizer is not
the local one fails the token-count check; a server that answers empty text fails the canaries."""

from __future__ import annotations

from tiny_server import TinyServer

from harness.cli import main


def _doctor(capsys, server, tokenizer, *extra):
    served = ["--backend", "openai", "--base-url", server.url, "--model", "tiny", "--tokenizer", str(tokenizer)]
    code = main(["doctor", *served, "--no-progress", "--concurrency", "1", "--retries", "0", *extra])
    out = capsys.readouterr().out
    return code, {line[6:22].strip(): line for line in out.splitlines() if line[:4] in ("PASS", "WARN", "FAIL", "SKIP")}


def test_server_context_below_the_length_fails_with_its_number(tiny_llama_dir, capsys):
    with TinyServer(str(tiny_llama_dir), max_model_len=768) as server:
        code, lines = _doctor(capsys, server, tiny_llama_dir, "--lengths", "1k", "--canaries", "0")
    assert code == 1 and lines["context"].startswith("FAIL")
    assert "max_model_len 768" in lines["context"] and "1K" in lines["context"]


def test_served_token_counts_compared(tiny_llama_dir, byte_tokenizer_dir, capsys):
    with TinyServer(str(tiny_llama_dir), tokenize=True) as server:
        code, lines = _doctor(capsys, server, tiny_llama_dir, "--lengths", "1k", "--canaries", "0")
        assert code == 0 and lines["served tokens"].startswith("PASS")
        code, lines = _doctor(capsys, server, byte_tokenizer_dir, "--lengths", "1k", "--canaries", "0")
        assert code == 1 and lines["served tokens"].startswith("FAIL") and "--tokenizer" in lines["served tokens"]
    with TinyServer(str(tiny_llama_dir)) as server:  # no /tokenize: not compared, said so
        code, lines = _doctor(capsys, server, tiny_llama_dir, "--lengths", "1k", "--canaries", "0")
    assert lines["served tokens"].startswith("SKIP")


def test_empty_served_answers_fail_the_canaries(tiny_llama_dir, capsys):
    def empty(path, answer):
        if path == "/v1/completions":
            return {**answer, "choices": [{**answer["choices"][0], "text": ""}]}
        return answer

    with TinyServer(str(tiny_llama_dir), mangle=empty) as server:
        code, lines = _doctor(capsys, server, tiny_llama_dir, "--lengths", "1k", "--canaries", "2")
    assert code == 1 and lines["canaries"].startswith("FAIL") and "empty" in lines["canaries"]


def test_content_filter_is_never_stored_as_an_empty_answer(tiny_llama_dir, tmp_path, capsys):
    """A provider's content_filter finish (issue 40): one line naming it, exit 2, nothing stored."""
    import json

    def filtered(path, answer):
        if path == "/v1/completions":
            return {**answer, "choices": [{**answer["choices"][0], "text": "", "finish_reason": "content_filter"}]}
        return answer

    out = tmp_path / "out"
    with TinyServer(str(tiny_llama_dir), mangle=filtered) as server:
        served = [
            "--backend",
            "openai",
            "--base-url",
            server.url,
            "--model",
            "tiny",
            "--tokenizer",
            str(tiny_llama_dir),
        ]
        code = main(
            ["eval", *served, "--tasks", "vt", "--lengths", "1k", "--samples", "1", "--no-progress",
             "--concurrency", "1", "--retries", "0", "--out", str(out)]
        )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # (the server's weight loading printed before)
    assert err.startswith("error:") and "content_filter" in err
    lines = (out / "samples.jsonl").read_text().splitlines() if (out / "samples.jsonl").exists() else []
    assert not [json.loads(x) for x in lines[1:]]  # no record


def test_served_rope_is_checked_from_the_local_config(tiny_llama_dir, tmp_path, capsys):
    """A server taking lengths past the trained positions (vLLM with VLLM_ALLOW_LONG_MAX_MODEL_LEN):
    the config.json beside --tokenizer says the model was trained on 8192 positions with no scaling,
    so 16K is extrapolation unless the server overrode RoPE; without a config.json: SKIP, naming how."""
    import shutil

    with TinyServer(str(tiny_llama_dir), max_model_len=20000) as server:
        code, lines = _doctor(capsys, server, tiny_llama_dir, "--lengths", "16k", "--canaries", "0")
        assert code == 0 and lines["rope"].startswith("WARN") and "8192 trained positions" in lines["rope"]
        assert (
            "server was started with a RoPE scaling override" in lines["rope"] and "--rope-scaling" not in lines["rope"]
        )
        bare = tmp_path / "tok"
        shutil.copytree(tiny_llama_dir, bare)
        (bare / "config.json").unlink()
        _code, lines = _doctor(capsys, server, bare, "--lengths", "1k", "--canaries", "0")
    assert lines["rope"].startswith("SKIP") and "--tokenizer DIR" in lines["rope"]
