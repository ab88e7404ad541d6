"""HELMET's released code never stops at a newline (tasks.helmet.released.RELEASED_STOP): its RAG,
re-rank and ICL configs say `stop_new_line: true`, its argument is `--stop_newline`, so the model
generates up to the whole budget and all of it is scored. Under the reference protocol our
requests carry no stop either; the exact-length protocol keeps its stop at the first newline. The
tasks' version is 2, so records made with the old stop are never reused."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import ClassVar

import pytest

from harness.cli import main
from harness.models.runners import registry
from tasks.registry import get_task

HERE = Path(__file__).parent
QUESTION = re.compile(r"Question: who founded the place number (\d+)\?")


class ScriptedRunner:
    """Says "unanswerable" on its first line and the fixture's answer on the next, cut at the
    request's stop strings as the real runners cut (harness.models.runners.common.cut_at_stop)."""

    submit_all = True
    seen: ClassVar[list] = []

    def __init__(self, model_path, settings):
        from harness.models.tokenization import load_tokenizer

        self.tokenizer = load_tokenizer(model_path)

    def generate(self, requests):
        from harness.models.runners.common import cut_at_stop

        ScriptedRunner.seen += list(requests)
        replies = [f"unanswerable\nPerson{QUESTION.findall(r.prompt)[-1]} Smith" for r in requests]
        return [cut_at_stop(text, r.stop) for text, r in zip(replies, requests)]

    def close(self):
        pass


@pytest.fixture
def released(monkeypatch):
    monkeypatch.setenv("HARNESS_HELMET", str(HERE / "fixtures"))
    monkeypatch.setenv("HARNESS_ICL_DATA", str(HERE / "icl_fixture"))


@pytest.fixture
def scripted(monkeypatch, released):
    registry.backend_names()  # discover the real backends first: the copy below must hold them
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_runner("scripted-helmet-stop", help="replies past the first line")(ScriptedRunner)
    ScriptedRunner.seen = []
    return ScriptedRunner


@pytest.mark.parametrize("name", ["helmet_nq", "helmet_msmarco", "helmet_icl_trec_coarse"])
def test_reference_samples_stop_nowhere_exact_length_at_a_newline(name, released, bpe_tokenizer):
    task = get_task(name)
    assert task.protocol == "reference" and task.version == "2"
    assert "stop" not in task.sample(8192, 0, 42, bpe_tokenizer).metadata
    task.set_protocol("exact-length")
    assert task.sample(8192, 0, 42, bpe_tokenizer).metadata["stop"] == ["\n"]


def test_the_model_generates_and_is_scored_past_the_first_line(tiny_llama_dir, tmp_path, scripted):
    out = tmp_path / "out"
    args = ["--tasks", "helmet_nq", "--lengths", "8k", "--samples", "2", "--backend", "scripted-helmet-stop"]
    assert (
        main(["eval", "--ckpts", str(tiny_llama_dir), "--out", str(out), "--no-progress", "--cache-dir", "none", *args])
        == 0
    )
    assert [(r.stop, r.max_new_tokens) for r in scripted.seen] == [((), 20)] * 2
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert len(recs) == 2
    for r in recs:
        # the answer on the second line counts (SubEM over the whole output): with the old stop at
        # the first newline the prediction was "unanswerable", scored 0
        assert r["task_version"] == "2" and r["prediction"].startswith("unanswerable\nPerson")
        assert r["score"] == 1.0
