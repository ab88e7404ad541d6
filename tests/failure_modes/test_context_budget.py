"""A prompt and its budget past the context (docs/failure-modes.md): where other harnesses cut the
prompt (from the left, or to nothing), `harness doctor` fails the check and `harness eval` stops
before any sample is generated."""

from __future__ import annotations

from .conftest import records

NIAH = ["--tasks", "niah_single_1"]


def test_left_truncation_would_cut_the_haystack(tiny_llama_dir, run, tmp_path):
    """EleutherAI/lm-evaluation-harness issue 3115 (and marin's RULER runs): a prompt longer than
    max_length is truncated from the left, which strips the start of the haystack and the task's
    instruction. Here no prompt is ever cut: a length beyond the context is a FAIL and an error."""
    out = tmp_path / "out"
    flags = ["--ckpts", str(tiny_llama_dir), "--max-model-len", "1024", *NIAH, "--lengths", "2k"]
    doctor = run("doctor", *flags, "--canaries", "0")
    ev = run("eval", *flags, "--samples", "1", "--out", str(out))
    assert doctor.code == 1 and doctor.failed("context", "1024")
    assert ev.code == 2 and "beyond the context" in ev.last_error and not records(out)


def test_generation_budget_past_the_context(tiny_llama_dir, run, tmp_path):
    """huggingface/open-r1 issue 310: context + max_new_tokens past max_length, and the context was cut
    to 0 tokens ("Truncating context to 0 tokens") with the run going on. Here the prompt, the thinking
    budget and the answer budget are summed against the context before any work."""
    out = tmp_path / "out"
    flags = ["--ckpts", str(tiny_llama_dir), "--max-model-len", "1024", *NIAH, "--lengths", "1k"]
    doctor = run("doctor", *flags, "--max-new-tokens", "600", "--canaries", "0")
    ev = run("eval", *flags, "--max-new-tokens", "600", "--samples", "1", "--out", str(out))
    thinking = run("doctor", *flags, "--max-thinking-tokens", "512", "--canaries", "0")
    ok = run("doctor", *flags, "--canaries", "0")
    assert doctor.code == 1 and doctor.failed("budget", "niah_single_1 at 1K", "> the context 1024")
    assert ev.code == 2 and "600 to generate > context 1024" in ev.last_error and not records(out)
    assert thinking.code == 1 and thinking.failed("budget", "prompt + thinking + answer", "--max-thinking-tokens")
    assert ok.code == 0 and ok.lines["budget"].startswith("PASS")
