"""`harness eval --suite aa-lcr` end to end on the fixtures with a scripted model and a fake judge
server: empty and budget-cut answers are INCORRECT without a judge call (scitix/sieval issue 44), the
judge is in provenance and in each record's settings (another judge computes new records), a
question that does not fit is left out and counted, and without data the run stops in one line."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from harness.cli import main
from harness.models.runners import registry
from tasks.aa_lcr import data
from tests.helmet.judge_server import JudgeServer

# question id -> the scripted model's answer ("<cut>": a long answer that runs to the budget)
ANSWERS = {"1": "110", "2": "", "3": "<cut>", "4": "75,000 dollars"}


class ScriptedRunner:
    submit_all = True
    seen: ClassVar[list] = []

    def __init__(self, model_path, settings):
        self.sample_stats: dict[int, dict] = {}

    def generate(self, requests):
        ScriptedRunner.seen += list(requests)
        out, self.sample_stats = [], {}
        for i, r in enumerate(requests):
            qid = next(q for q, it in ((it.question_id, it) for it in data.load_items()) if it.question in r.prompt)
            text = ANSWERS[qid]
            self.sample_stats[i] = {
                "prompt_tokens": 1,
                "reused_tokens": 0,
                "new_tokens": r.max_new_tokens if text == "<cut>" else 3,
            }
            out.append("60 respondents and a 2% levy, as the" if text == "<cut>" else text)
        return out

    def close(self):
        pass


@pytest.fixture(scope="module")
def llama_8k(tmp_path_factory, bpe_tokenizer_dir):
    from harness.models.embedded import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("aalcr-llama"), bpe_tokenizer_dir, max_position_embeddings=8192)


@pytest.fixture
def scripted(monkeypatch, aa_lcr_data):
    registry.backend_names()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_runner("scripted-aalcr", help="answers AA-LCR")(ScriptedRunner)
    ScriptedRunner.seen = []
    return ScriptedRunner


def _eval(ckpt, out, server, *extra):
    args = ["eval", "--ckpts", str(ckpt), "--out", str(out), "--no-progress", "--cache-dir", "none"]
    args += ["--suite", "aa-lcr", "--backend", "scripted-aalcr", "--max-length", "6000"]
    return main([*args, "--judge-base-url", server.url, "--judge-model", server.name, *extra])


def _records(out):
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]


def test_suite_end_to_end_grades_before_the_judge(llama_8k, scripted, tmp_path, capsys):
    out = tmp_path / "run"
    with JudgeServer(lambda prompt: "CORRECT", name="judge-a", root="/models/judge-a") as server:
        assert _eval(llama_8k, out, server) == 0
        judged = [r["messages"][0]["content"] for r in server.requests]
    assert "1 of 5 questions do not fit 6000 tokens" in capsys.readouterr().err  # the long set, left out
    assert len(scripted.seen) == 4 and {r.max_new_tokens for r in scripted.seen} == {4096}
    # the judge, which says CORRECT to anything, was asked only about the two whole answers
    assert len(judged) == 2
    assert {p.split("CANDIDATE ANSWER TO ASSESS: ", 1)[1].split("\n")[0] for p in judged} == {"110", "75,000 dollars"}
    assert all(p.startswith("Assess whether") and "BEGIN INPUT DOCUMENTS" in p for p in judged)
    assert all(r["temperature"] == 0.0 and r["top_p"] == 0.95 and r["seed"] == 0 for r in server.requests)
    recs = {r["metadata"]["question_id"]: r for r in _records(out)}
    assert {q: r["score"] for q, r in recs.items()} == {"1": 1.0, "2": 0.0, "3": 0.0, "4": 1.0}
    assert all(r["metadata"]["too_long"] == 1 and r["length"] == 6000 for r in recs.values())
    results = json.loads((out / "results.json").read_text())
    judge = results["provenance"]["judge"]
    assert (judge["model"], judge["root"], judge["temperature"]) == ("judge-a", "/models/judge-a", 0.0)
    assert "aalcr.yaml" in judge["prompts"]
    assert all(r["settings"]["judge"]["model"] == "judge-a" for r in recs.values())
    block = results["suites"]["aa-lcr"]
    assert block["headline"]["groups"]["AA-LCR"]["per_length"]["6000"]["mean"] == pytest.approx(50.0)


def test_the_runs_budget_decides_which_questions_fit(llama_8k, scripted, tmp_path, capsys):
    """Questions are kept by prompt + the run's tokens to generate (--max-new-tokens), not our 4096:
    at 2000 tokens none fits with 4096 to generate, all but the long set with 64 (and the answer cut
    at 64 is still graded before the judge). The budget is in the samples' dataset hash."""
    with JudgeServer(lambda prompt: "CORRECT", name="judge-a") as server:
        assert _eval(llama_8k, tmp_path / "own", server, "--max-length", "2000") == 2
        assert "--max-length 2000 leaves no prompt for aa_lcr, which generates up to 4096" in capsys.readouterr().err
        assert _eval(llama_8k, tmp_path / "low", server, "--max-length", "2000", "--max-new-tokens", "64") == 0
        assert "1 of 5 questions do not fit 2000 tokens with 64 to generate" in capsys.readouterr().err
        assert len(server.requests) == 2
    assert len(scripted.seen) == 4 and {r.max_new_tokens for r in scripted.seen} == {64}
    recs = {r["metadata"]["question_id"]: r for r in _records(tmp_path / "low")}
    assert {q: r["score"] for q, r in recs.items()} == {"1": 1.0, "2": 0.0, "3": 0.0, "4": 1.0}
    assert all(r["num_tokens"] + 64 <= 2000 and r["metadata"]["max_new_tokens_default"] == 4096 for r in recs.values())
    assert {r["dataset_hash"] for r in recs.values()} != {data.items_hash()}


def test_another_judge_computes_new_records(llama_8k, scripted, tmp_path):
    out = tmp_path / "run"
    with JudgeServer(lambda prompt: "CORRECT", name="judge-a") as a:
        assert _eval(llama_8k, out, a) == 0
        assert _eval(llama_8k, out, a) == 0  # the same judge again: nothing new to compute
        assert len(a.requests) == 2
    n = len(scripted.seen)
    assert n == 4
    with JudgeServer(lambda prompt: "INCORRECT", name="judge-b") as b:
        assert _eval(llama_8k, out, b) == 0
        assert len(b.requests) == 2
    assert len(scripted.seen) == 2 * n  # regenerated: the records' keys name the judge
    recs = _records(out)
    assert {r["settings"]["judge"]["model"] for r in recs} == {"judge-a", "judge-b"}
    by_judge = {
        m: sorted(r["score"] for r in recs if r["settings"]["judge"]["model"] == m) for m in ("judge-a", "judge-b")
    }
    assert by_judge == {"judge-a": [0.0, 0.0, 1.0, 1.0], "judge-b": [0.0, 0.0, 0.0, 0.0]}


def test_missing_data_is_one_line_naming_the_flag(llama_8k, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from harness.core import hub

    hub.reset()
    data.clear_cache()
    args = ["eval", "--ckpts", str(llama_8k), "--out", str(tmp_path / "x"), "--no-progress", "--suite", "aa-lcr"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--aa-lcr-data DIR" in err[0]


def test_no_judge_is_one_line_naming_the_judge_flags(llama_8k, aa_lcr_data, tmp_path, monkeypatch, capsys):
    for var in ("HARNESS_JUDGE_BASE_URL", "HARNESS_JUDGE_MODEL"):
        monkeypatch.delenv(var, raising=False)
    args = ["eval", "--ckpts", str(llama_8k), "--out", str(tmp_path / "x"), "--no-progress", "--suite", "aa-lcr"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--judge-base-url URL --judge-model NAME" in err[0]
