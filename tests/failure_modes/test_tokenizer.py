"""A tokenizer or EOS that is not the model's (docs/failure-modes.md): `harness doctor` fails it, eval
stops before loading the model or marks the cells it could not have scored."""

from __future__ import annotations

import json

import pytest

from .conftest import records
from .models import constant_model, copy_model, with_tokenizer

NIAH = ["--tasks", "niah_single_1", "--lengths", "1k"]


@pytest.fixture(scope="module")
def endless_model(tiny_llama_dir, tmp_path_factory, bpe_tokenizer):
    """A model whose end of turn is not the tokenizer's EOS: it never emits that EOS."""
    word = bpe_tokenizer(" the", add_special_tokens=False)["input_ids"][-1]
    return constant_model(tiny_llama_dir, tmp_path_factory.mktemp("endless") / "m", word)


def test_eos_that_is_not_the_models(endless_model, run, tmp_path):
    """vllm-project/vllm issue 4180: Llama-3-Instruct ends its turns with <|eot_id|>, the configs said
    <|end_of_text|>, and generation never stopped. Every canary runs to max new tokens (FAIL, naming
    the EOS cause); eval marks the cell."""
    out = tmp_path / "out"
    doctor = run("doctor", "--ckpts", str(endless_model), *NIAH, "--canaries", "2")
    ev = run("eval", "--ckpts", str(endless_model), *NIAH, "--samples", "2", "--out", str(out))
    assert doctor.code == 1 and doctor.lines["canaries"].startswith("FAIL")
    assert "max new tokens" in doctor.lines["canaries"] or "same text" in doctor.lines["canaries"]
    assert "!max-len" in ev.out
    cell = json.loads((out / "results.json").read_text())["suites"]["custom"]["per_task"]["niah_single_1"]["1024"]
    assert cell["degenerate"]["at_max"] == 1.0


def test_tokenizer_larger_than_the_embedding(tiny_llama_dir, run, tmp_path):
    """EuroEval/EuroEval issue 52: "The vocab size of the tokenizer is larger than the vocab size of the
    model": ids past the embedding index nothing (an IndexError, or garbage on a GPU). Eval stops
    before loading the model; the doctor names both sizes."""
    from harness.models.embedded import build_tokenizer

    m = with_tokenizer(copy_model(tiny_llama_dir, tmp_path / "m"), build_tokenizer(tmp_path / "tok", vocab_size=8192))
    out = tmp_path / "out"
    doctor = run("doctor", "--ckpts", str(m), *NIAH, "--canaries", "0")
    ev = run("eval", "--ckpts", str(m), *NIAH, "--samples", "1", "--out", str(out))
    assert doctor.code == 1 and doctor.failed("vocabulary", "4096")
    assert ev.code == 2 and "vocabulary" in ev.last_error and not records(out)
