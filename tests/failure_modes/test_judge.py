"""A model judge that grades what it should not (docs/failure-modes.md): an empty answer is scored 0
without asking any judge, and a verdict the harness cannot read stops the run instead of scoring."""

from __future__ import annotations

import json
import os

import pytest

from harness.models import judge as J
from tests.helmet.judge_server import JudgeServer
from tests.helmet.test_judge import _write_judged_data

from .conftest import records

QA = ["--tasks", "helmet_narrativeqa", "--lengths", "2k", "--protocol", "exact-length", "--max-new-tokens", "8"]


@pytest.fixture
def judged_data(tmp_path, monkeypatch):
    _write_judged_data(tmp_path / "helmet")
    monkeypatch.setenv("HARNESS_HELMET", str(tmp_path / "helmet"))
    J._describe.cache_clear()
    yield
    for var in (J.ENV_BASE_URL, J.ENV_MODEL, J.ENV_API_KEY_ENV):  # set_judge writes them for the workers
        os.environ.pop(var, None)
    J._describe.cache_clear()


def test_judge_that_grades_an_empty_answer_correct(eos_model, judged_data, run, tmp_path):
    """scitix/sieval PR 44 (NVIDIA-NeMo/Skills PR 935): the AA-LCR equality checker returned CORRECT
    for an empty candidate. Here a judge grades everything correct; a model that answers nothing
    scores 0 (no judge is asked), and the cell is marked empty."""
    out = tmp_path / "out"
    with JudgeServer(lambda prompt: '{"fluency": 1, "correctness": 3}') as judge:
        ev = run("eval", "--ckpts", str(eos_model), *QA, "--samples", "2", "--out", str(out),
                 "--judge-base-url", judge.url, "--judge-model", "judge")  # fmt: skip
    assert ev.code == 0 and not judge.requests  # nothing to judge
    assert [r["score"] for r in records(out)] == [0.0, 0.0] and "!empty" in ev.out
    results = json.loads((out / "results.json").read_text())
    assert results["suites"]["custom"]["per_task"]["helmet_narrativeqa"]["2048"]["mean"] == 0.0


def test_judge_verdict_in_words_is_never_read_as_correct(tiny_llama_dir, judged_data, run, tmp_path):
    """scitix/sieval PR 44, review: "The candidate answer is not correct." parsed as CORRECT (the
    negation fell through to a match on CORRECT). The judge here must give JSON scores; a reply in
    words is asked again, then the run stops with one line and stores nothing for the sample."""
    out = tmp_path / "out"
    with JudgeServer(lambda prompt: "The candidate answer is not correct.") as judge:
        ev = run("eval", "--ckpts", str(tiny_llama_dir), *QA, "--samples", "1", "--out", str(out),
                 "--judge-base-url", judge.url, "--judge-model", "judge")  # fmt: skip
    assert ev.code == 2 and "no readable scores" in ev.last_error
    assert len(judge.requests) == J.ATTEMPTS and not records(out)
