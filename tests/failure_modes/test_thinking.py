"""Reasoning models (docs/failure-modes.md): a thought that fills the one budget, a reasoning parser
that leaves the content empty, a thought scored as the answer. `harness doctor` fails each canary
run; `harness eval` marks the cells, and --max-thinking-tokens gives the answer its own budget."""

from __future__ import annotations

import json

import pytest

from .conftest import records, served
from .models import CHAT, copy_model, with_chat_template
from .servers import ThinkingServer

NIAH = ["--tasks", "niah_single_1", "--lengths", "1k"]


def _cell(out) -> dict:
    return json.loads((out / "results.json").read_text())["suites"]["custom"]["per_task"]["niah_single_1"]["1024"]


def test_thought_fills_the_answer_budget(tiny_llama_dir, run, tmp_path):
    """scitix/sieval PR 11: with max_tokens = answer budget + thinking budget, 469 of 500 CWE answers
    were cut at 4K. A model whose thought outlasts niah's 128 tokens: every canary ends inside its
    thought (FAIL, naming --max-thinking-tokens); with a thinking budget the thought is closed at it,
    the answer keeps its 128 tokens, and results.json counts the closed thoughts per cell."""
    one, split = tmp_path / "one", tmp_path / "split"
    with ThinkingServer(str(tiny_llama_dir), thought=300) as server:
        flags = [*served(server, tiny_llama_dir), *NIAH]
        doctor = run("doctor", *flags, "--canaries", "2")
        budgeted = run("doctor", *flags, "--canaries", "2", "--max-thinking-tokens", "64")
        ev_one = run("eval", *flags, "--samples", "2", "--strip-thinking", "--out", str(one))
        ev_split = run("eval", *flags, "--samples", "2", "--max-thinking-tokens", "64", "--out", str(split))
    assert doctor.code == 1 and doctor.failed("canaries", "inside its thought", "--max-thinking-tokens")
    assert budgeted.lines["canaries"].startswith("PASS") and "score 100" in budgeted.lines["canaries"]
    # one budget: no answer at all, and the cell says so instead of scoring 0 in silence
    assert ev_one.code == 0 and "!empty" in ev_one.out and _cell(one)["mean"] == 0.0
    # its own budget: the thought closed at 64 tokens, the answer found, each record's account kept
    assert ev_split.code == 0 and _cell(split)["mean"] == 100.0
    assert _cell(split)["budget"] == {"thinking_cut": 2, "answer_cut": 0, "n": 2}
    assert "think-cut=2/2" in ev_split.out and "thinking budget 64" in ev_split.out
    recs = records(split)
    assert all(r["metadata"]["thinking_cut"] and r["metadata"]["thinking_tokens"] == 64 for r in recs)
    assert all("</think>" in r["metadata"]["raw_prediction"] and "<think>" not in r["prediction"] for r in recs)


@pytest.fixture(scope="module")
def chat_model(tiny_llama_dir, tmp_path_factory):
    return with_chat_template(copy_model(tiny_llama_dir, tmp_path_factory.mktemp("chat") / "m"), CHAT)


def test_reasoning_parser_leaves_no_content(chat_model, run, tmp_path):
    """BerriAI/litellm-docs PR 559: a reasoning model's thought took all of max_tokens, and the reply
    came back with finish_reason "length" and an empty content, read as an ordinary short answer.
    Served with a reasoning parser (the thought in reasoning_content, content null): the canaries are
    all empty (FAIL) and eval marks the cell and says so in its last line."""
    out = tmp_path / "out"
    with ThinkingServer(str(chat_model), thought=300, parser=True) as server:
        flags = [*served(server, chat_model), "--chat", "--no-answer-prefix", *NIAH]
        doctor = run("doctor", *flags, "--canaries", "2")
        ev = run("eval", *flags, "--samples", "2", "--out", str(out))
    assert doctor.code == 1 and doctor.failed("canaries", "empty")
    assert ev.code == 0 and "!empty" in ev.out and "predictions are empty" in ev.out.strip().splitlines()[-1]
    assert _cell(out)["degenerate"]["empty"] == 1.0


def test_thought_scored_as_the_answer(tiny_llama_dir, run):
    """allenai/olmo-eval issue 348 (and IBM/AssetOpsBench PR 418): reasoning-regime tasks scored the
    raw output, <think> included, so an answer named while thinking overrode the final one (132
    verdicts differed). A run of a thinking model without --strip-thinking is a FAIL."""
    with ThinkingServer(str(tiny_llama_dir), thought=20) as server:
        flags = [*served(server, tiny_llama_dir), *NIAH, "--canaries", "2"]
        doctor = run("doctor", *flags)
        stripped = run("doctor", *flags, "--strip-thinking")
    assert doctor.code == 1 and doctor.failed("canaries", "<think>", "--strip-thinking")
    assert stripped.code == 0 and stripped.lines["canaries"].startswith("PASS")


def _icl_data(folder):
    d = folder / "trec_coarse"
    d.mkdir(parents=True)
    rows = [{"text": f"what is item {i}?", "label": i % 2} for i in range(12)]
    (d / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    (d / "labels.json").write_text(json.dumps(["DESC", "ENTY"]))
    return str(folder)


def test_stop_string_ends_the_thought(tiny_llama_dir, run, tmp_path):
    """stanford-crfm/helm PR 3507 ("reasoning models were using new line token as first output ... all
    model responses were empty"), sgl-project/sglang issue 40529, vllm-project/vllm PR 52486: a task's
    stop string (HELMET ICL's newline) fires inside the thought. Without a thinking budget the cell
    is marked empty; with one, the stops apply to the answer alone and the answers are there."""
    one, split = tmp_path / "one", tmp_path / "split"
    flags = [
        "--tasks",
        "icl_trec_coarse",
        "--lengths",
        "1k",
        "--samples",
        "2",
        "--icl-data",
        _icl_data(tmp_path / "icl"),
    ]
    with ThinkingServer(str(tiny_llama_dir), thought=20, answer="1") as server:
        ev_one = run("eval", *served(server, tiny_llama_dir), *flags, "--strip-thinking", "--out", str(one))
        ev_split = run("eval", *served(server, tiny_llama_dir), *flags, "--max-thinking-tokens", "64",
                       "--out", str(split))  # fmt: skip
    assert ev_one.code == 0 and "!empty" in ev_one.out
    assert all(r["prediction"] == "" for r in records(one))
    assert ev_split.code == 0 and "!empty" not in ev_split.out
    assert all(r["prediction"] == "1" and not r["metadata"]["thinking_cut"] for r in records(split))
