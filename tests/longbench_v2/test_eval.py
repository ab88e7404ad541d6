"""`harness eval --suite longbench-v2*` end to end: a scripted runner checks the sample-weighted
categories (result.py's accuracy over questions) and the CoT's two steps; the tiny Llama runs the
whole path with the real hf backend."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from harness.cli import main
from harness.models.runners import registry
from tasks.longbench_v2 import data

from .helpers import make_items, write_data


@pytest.fixture
def lbv2_dir(tmp_path, monkeypatch):
    folder = tmp_path / "lbv2"
    folder.mkdir()
    write_data(folder)
    data.clear_cache()
    yield folder
    data.clear_cache()


class ScriptedRunner:
    """Answers (A) to every question; the CoT's first step writes a reasoning line. Records requests."""

    submit_all = True
    seen: ClassVar[list] = []

    def __init__(self, model_path, settings):
        self.settings = settings
        from harness.models.tokenization import load_tokenizer

        self.tokenizer = load_tokenizer(model_path)

    def generate(self, requests):
        ScriptedRunner.seen += list(requests)
        return [
            "Let me see: river comes first."
            if r.prompt.endswith("Let\u2019s think step by step:")
            else " **The correct answer is (A)**\n"
            for r in requests
        ]

    def close(self):
        pass


@pytest.fixture
def scripted(monkeypatch):
    registry.backend_names()  # discover the real backends first: the copy below must hold them
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_runner("scripted-lbv2", help="answers (A)")(ScriptedRunner)
    ScriptedRunner.seen = []
    return ScriptedRunner


def _eval(ckpt, out, *extra):
    return main(["eval", "--ckpts", str(ckpt), "--out", str(out), "--no-progress", "--cache-dir", "none", *extra])


def test_categories_are_accuracy_over_questions(tiny_llama_dir, lbv2_dir, tmp_path, scripted):
    out = tmp_path / "out"
    args = ["--suite", "longbench-v2", "--backend", "scripted-lbv2", "--max-length", "400"]
    assert _eval(tiny_llama_dir, out, *args, "--longbench-v2-data", str(lbv2_dir)) == 0
    items = make_items()
    right = [it["answer"] == "A" for it in items]

    def acc(pred):
        sel = [r for r, it in zip(right, items) if pred(it)]
        return 100.0 * sum(sel) / len(sel)

    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["longbench-v2"]
    assert suite["weighting"] == "samples" and suite["lengths"] == [400]
    cats = {c: v["400"]["mean"] for c, v in suite["categories"].items()}
    expected = {
        "Overall": acc(lambda it: True),
        "Easy": acc(lambda it: it["difficulty"] == "easy"),
        "Hard": acc(lambda it: it["difficulty"] == "hard"),
        "Short": acc(lambda it: it["length"] == "short"),
        "Medium": acc(lambda it: it["length"] == "medium"),
        "Long": acc(lambda it: it["length"] == "long"),
    }
    assert cats == pytest.approx(expected)
    # the cells' unweighted mean differs: the fixture's cells have 1-3 questions each
    per_task = [suite["per_task"][t]["400"]["mean"] for t in suite["evaluated"]]
    assert sum(per_task) / len(per_task) != pytest.approx(expected["Overall"])
    assert suite["per_length"]["400"]["mean"] == pytest.approx(expected["Overall"])
    assert suite["summary"]["avg"]["mean"] == pytest.approx(expected["Overall"])
    iv = suite["categories"]["Overall"]["400"]
    assert iv["ci_low"] <= iv["mean"] <= iv["ci_high"]
    prov = results["provenance"]
    assert prov["truncation"] == "middle" and prov["max_length"] == 400
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert len(recs) == len(items)
    for r in recs:
        t = r["metadata"]["truncation"]
        assert r["settings"]["truncation"] == "middle" and t["max_length"] == 400 - 128 and r["num_tokens"] <= 272
    assert any(r["metadata"]["truncation"]["truncated"] for r in recs)


def test_cot_runs_two_steps_and_no_context_runs_at_length_zero(tiny_llama_dir, lbv2_dir, tmp_path, scripted):
    out = tmp_path / "cot"
    args = ["--suite", "longbench-v2-cot", "--backend", "scripted-lbv2", "--max-length", "1400", "--samples", "1"]
    assert _eval(tiny_llama_dir, out, *args, "--longbench-v2-data", str(lbv2_dir)) == 0
    firsts = [r for r in scripted.seen if r.max_new_tokens == 1024]
    seconds = [r for r in scripted.seen if r.max_new_tokens == 128]
    assert len(firsts) == len(seconds) == 6
    assert all("The text is too long and omitted here." in r.prompt for r in seconds)
    assert all("Let\u2019s think step by step: Let me see: river comes first.\n\n" in r.prompt for r in seconds)
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert all(r["metadata"]["first_output"] == "Let me see: river comes first." for r in recs)
    assert all(r["prediction"].strip() == "**The correct answer is (A)**" for r in recs)
    assert {r["score"] for r in recs} <= {0.0, 1.0}

    scripted.seen = []
    out = tmp_path / "nc"
    args = ["--suite", "longbench-v2-nocontext", "--backend", "scripted-lbv2", "--samples", "1"]
    assert _eval(tiny_llama_dir, out, *args, "--longbench-v2-data", str(lbv2_dir)) == 0
    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["longbench-v2-nocontext"]
    assert suite["lengths"] == [0] and suite["summary"]["effective_length"]["label"] == "n/a"
    assert results["provenance"]["truncation"] == "none"
    assert all("<text>" not in r.prompt for r in scripted.seen)


def test_tiny_llama_end_to_end_with_chat_template(tiny_llama_dir, lbv2_dir, tmp_path, capsys):
    """The real hf backend; with --chat the template's tokens come out of the budget."""
    from harness.models.tokenization import load_tokenizer

    has_chat = bool(getattr(load_tokenizer(str(tiny_llama_dir)), "chat_template", None))
    out = tmp_path / "tiny"
    extra = ["--chat"] if has_chat else []
    args = ["--suite", "longbench-v2", "--samples", "1", "--max-length", "300", *extra]
    assert _eval(tiny_llama_dir, out, *args, "--longbench-v2-data", str(lbv2_dir)) == 0
    printed = capsys.readouterr().out
    assert "[Overall]" in printed or "Overall" in printed
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert len(recs) == 6 and all(r["length"] == 300 for r in recs)
    for r in recs:
        cap = r["metadata"]["truncation"]["max_length"]
        assert cap == 300 - 128 - r["metadata"].get("chat_template_tokens", 0)
        assert r["num_tokens"] + 128 <= 300


def test_leaderboard_shows_the_categories(tiny_llama_dir, lbv2_dir, tmp_path, scripted):
    outs = []
    for name in ("base", "other"):
        out = tmp_path / name
        args = ["--suite", "longbench-v2", "--backend", "scripted-lbv2", "--max-length", "400", "--name", name]
        assert _eval(tiny_llama_dir, out, *args, "--longbench-v2-data", str(lbv2_dir)) == 0
        outs.append(str(out))
    board_dir = tmp_path / "board"
    assert main(["leaderboard", *outs, "--out", str(board_dir), "--baseline", "base"]) == 0
    board = json.loads((board_dir / "leaderboard.json").read_text())
    text = json.dumps(board)
    for cat in ("Overall", "Easy", "Hard", "Short", "Medium", "Long"):
        assert f'"{cat}"' in text
    assert "LongBench v2" in text
