"""HELMET's chat categories (Cite, LongQA, Summ) under --chat and the reference protocol: the sample
is fitted to L less the chat template's tokens, and its config (file, documents, generation budget)
is still L's, as HELMET picks it by input_max_length and counts the templated prompt against it.
Before the fix the plan asked the reference for the fitted length and stopped with "no HELMET
config at length 8162"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import ClassVar

import pytest

from harness.cli import main
from harness.core.errors import UserError
from harness.models.runners import registry
from tasks.helmet import reference

FIXTURES = Path(__file__).parent / "fixtures"
# a tiny template: a user turn between role tags, then the assistant's header
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


class ScriptedChat:
    """Answers one ASQA-style sentence with a citation; records the requests."""

    submit_all = True
    seen: ClassVar[list] = []

    def __init__(self, model_path, settings):
        from harness.models.tokenization import load_tokenizer

        self.tokenizer = load_tokenizer(model_path)

    def generate(self, requests):
        ScriptedChat.seen += list(requests)
        return ["The answer is in the documents [1]." for _ in requests]

    def close(self):
        pass


@pytest.fixture
def chat_model(tiny_llama_dir, tmp_path):
    """The tiny Llama's folder with a chat template in its tokenizer config."""
    folder = tmp_path / "tiny-chat"
    shutil.copytree(tiny_llama_dir, folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = CHAT_TEMPLATE
    config_path.write_text(json.dumps(config))
    return folder


@pytest.fixture
def scripted(monkeypatch):
    registry.backend_names()  # discover the real backends first: the copy below must hold them
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_runner("scripted-helmet-chat", help="one cited sentence")(ScriptedChat)
    ScriptedChat.seen = []
    monkeypatch.setenv("HARNESS_HELMET", str(FIXTURES))
    return ScriptedChat


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]


def test_cite_runs_with_chat_at_helmet_lengths(chat_model, tmp_path, scripted):
    out = tmp_path / "out"
    args = ["--tasks", "helmet_alce_asqa", "--chat", "--lengths", "8k", "--samples", "2"]
    rc = main(
        ["eval", "--ckpts", str(chat_model), "--out", str(out), "--no-progress", "--cache-dir", "none"]
        + [*args, "--backend", "scripted-helmet-chat"]
    )
    assert rc == 0
    recs = _records(out)
    run = reference.run_for("helmet_alce_asqa", 8192)
    assert len(recs) == 2
    for r in recs:
        meta = r["metadata"]
        assert r["length"] == 8192  # keyed and reported at HELMET's length
        assert meta["chat_template_tokens"] > 0 and meta["fitted_length"] == 8192 - meta["chat_template_tokens"]
        assert (meta["helmet_file"], meta["helmet_k"]) == (run.test, run.k)  # 8K's config: 30 documents
        assert meta["protocol"] == "reference" and meta["chat"] is True
        assert r["num_tokens"] + run.gen <= 8192
    # the model saw the user turn in the template, without HELMET's "Answer:" after the header
    assert len(scripted.seen) == 2
    for req in scripted.seen:
        assert req.prompt.startswith("<|user|>\n") and req.prompt.endswith("<|end|>\n<|assistant|>\n")


def test_the_fitted_sample_is_the_nominal_config_cut_to_the_budget(released_tokenizer):
    """Task.sample_fitted under the reference protocol: L's documents, cut to the budget; the
    exact-length protocol fits at the budget as before."""
    from tasks.registry import get_task

    task = get_task("helmet_alce_asqa")
    whole = task.sample(8192, 0, 42, released_tokenizer)
    budget = whole.num_tokens + 300 - 100  # the fixture's prompt overflows it by 100 tokens
    fitted = task.sample_fitted(8192, budget, 0, 42, released_tokenizer)
    assert fitted.metadata["helmet_k"] == whole.metadata["helmet_k"] == 30
    assert fitted.metadata["helmet_file"] == whole.metadata["helmet_file"]
    assert whole.metadata["context_tokens_cut"] == 0 and fitted.metadata["context_tokens_cut"] >= 100
    assert fitted.length == budget and fitted.num_tokens + 300 <= budget
    assert fitted.metadata["protocol"] == "reference"
    exact = get_task("helmet_alce_asqa")
    exact.set_protocol("exact-length")
    assert exact.sample_fitted(8192, budget, 0, 42, released_tokenizer) == exact.sample(
        budget, 0, 42, released_tokenizer
    )
    with pytest.raises(UserError, match="no HELMET config at length"):
        task.sample(8192 - 40, 0, 42, released_tokenizer)  # the fitted length alone names no config


@pytest.fixture
def released_tokenizer(monkeypatch, bpe_tokenizer):
    monkeypatch.setenv("HARNESS_HELMET", str(FIXTURES))
    return bpe_tokenizer
