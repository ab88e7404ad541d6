"""Served models whose context is not the one the run needs (docs/failure-modes.md): each is named by
`harness doctor` with a FAIL line, and `harness eval` stops before storing a prediction."""

from __future__ import annotations

from .conftest import records, served
from .servers import QuietCapServer, TinyServer, TruncatingServer

NIAH = ["--tasks", "niah_single_1"]


def test_every_request_answered_400_is_never_a_score(tiny_llama_dir, run, tmp_path):
    """allenai/olmo-eval issue 310: max_tokens past max_model_len, every request answered 400, and the
    run reported 'Success' with 0.0. Here the server reports no context and takes 1,500 tokens, while
    --max-model-len claims 4,096: the doctor's probe at the longest request is refused, eval stops."""
    out = tmp_path / "out"
    with QuietCapServer(str(tiny_llama_dir), cap=1500) as server:
        flags = [*served(server, tiny_llama_dir), "--max-model-len", "4096", *NIAH, "--lengths", "2k"]
        doctor = run("doctor", *flags, "--canaries", "1")
        ev = run("eval", *flags, "--samples", "2", "--out", str(out))
        ok = run("doctor", *flags[:-1], "1k", "--canaries", "0")  # the lengths it takes: the probe passes
    assert doctor.code == 1 and doctor.failed("served context", "refuses", "400")
    assert ev.code == 2 and "400" in ev.last_error and not records(out) and not (out / "results.json").exists()
    assert ok.code == 0 and "served context" not in ok.lines  # (--canaries 0: no request sent)


def test_served_context_below_the_length(tiny_llama_dir, run, tmp_path):
    """vllm-project/vllm issue 2565: vLLM computed a 200K model's max_model_len as 4K. The server's own
    number is named, and nothing is evaluated at a length beyond it."""
    out = tmp_path / "out"
    with TinyServer(str(tiny_llama_dir), max_model_len=768) as server:
        flags = [*served(server, tiny_llama_dir), *NIAH, "--lengths", "1k"]
        doctor = run("doctor", *flags, "--canaries", "0")
        ev = run("eval", *flags, "--samples", "1", "--out", str(out))
    assert doctor.code == 1 and doctor.failed("context", "max_model_len 768")
    assert ev.code == 2 and "768" in ev.last_error and not records(out)


def test_rope_scaling_on_the_server_command_line_not_in_its_context(tiny_llama_dir, run, tmp_path):
    """modelscope/ms-swift issue 5146 (and 4893): vLLM derives max_model_len from config.json, not from
    the RoPE scaling given on its command line, so the context is the unscaled one while the user asks
    for the scaled one. --max-model-len beyond what the server reports is refused with both numbers."""
    out = tmp_path / "out"
    with TinyServer(str(tiny_llama_dir), max_model_len=1024) as server:
        flags = [*served(server, tiny_llama_dir), "--max-model-len", "2048", *NIAH, "--lengths", "2k"]
        doctor = run("doctor", *flags, "--canaries", "0")
        ev = run("eval", *flags, "--samples", "1", "--out", str(out))
    assert doctor.code == 1 and doctor.failed("model", "--max-model-len 2048", "1024")
    assert ev.code == 2 and "1024" in ev.last_error and not records(out)


def test_server_that_cuts_prompts_in_silence(tiny_llama_dir, run, tmp_path):
    """ollama/ollama issues 8099 and 3839: a prompt past num_ctx is cut to its tail with a 200 OK (a
    160,689-token prompt read as 16,387, the answer invented). The doctor's probe and every eval
    request compare the prompt tokens the server read with those sent."""
    out = tmp_path / "out"
    with TruncatingServer(str(tiny_llama_dir), keep=300) as server:
        flags = [*served(server, tiny_llama_dir), *NIAH, "--lengths", "1k"]
        doctor = run("doctor", *flags, "--canaries", "1")
        ev = run("eval", *flags, "--samples", "2", "--out", str(out))
    assert doctor.code == 1 and doctor.failed("served context", "read 300 of")
    assert ev.code == 2 and "read 300 of" in ev.last_error and not records(out)
    with TinyServer(str(tiny_llama_dir)) as server:  # a server that reads it whole passes the same probe
        doctor = run("doctor", *served(server, tiny_llama_dir), *NIAH, "--lengths", "1k", "--canaries", "1")
    assert doctor.lines["served context"].startswith("PASS")


def test_local_tokenizer_is_not_the_servers(tiny_llama_dir, byte_tokenizer_dir, run, tmp_path):
    """huggingface/text-generation-inference issue 1073 (and vLLM PR 44708): the client counted 1,807
    tokens, the server 2,309, so every length was measured wrong. The counts of a probe are compared
    (POST /tokenize), and an eval whose prompts the server counts otherwise stops."""
    out = tmp_path / "out"
    with TinyServer(str(tiny_llama_dir), tokenize=True) as server:
        doctor = run("doctor", *served(server, byte_tokenizer_dir), *NIAH, "--lengths", "1k", "--canaries", "0")
        ev = run("eval", *served(server, byte_tokenizer_dir), *NIAH, "--lengths", "1k", "--samples", "1",
                 "--out", str(out))  # fmt: skip
    assert doctor.code == 1 and doctor.failed("served tokens", "--tokenizer")
    assert ev.code == 2 and "another tokenizer" in ev.last_error and not records(out)
