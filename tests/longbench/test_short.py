"""MMLU (5-shot acc) and HellaSwag (0-shot acc_norm) through lm-eval's evaluator on tiny local
files with the tiny Llama, checked against a brute-force scorer that builds lm-eval's prompts
from the task definitions and reads log-likelihoods off the model directly."""

from __future__ import annotations

import json
import re

import pytest

from harness.errors import TaskUnavailable
from tasks.registry import all_suites, get_task
from tasks.short import data


def _w(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _brute_ll(model_dir_runner, context, continuation):
    """log p(continuation | context) straight from the model (no runner, no lm-eval)."""
    import torch

    tok, model = model_dir_runner.tok, model_dir_runner.model
    ctx = tok(context)["input_ids"]
    full = tok(context + continuation)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([full])).logits[0].double()
    logp = torch.log_softmax(logits, -1)
    return float(sum(logp[i - 1, full[i]] for i in range(len(ctx), len(full))))


@pytest.fixture
def short_dirs(tmp_path, monkeypatch):
    test, dev = [], []
    for subject in ("anatomy", "astronomy"):
        for i in range(2):
            test.append({"question": f"Which {subject} fact number {i} is true? ", "subject": subject,
                         "choices": [f"fact {i}", "the moon", "a bone", "none of these"], "answer": (i + len(subject)) % 4})
        for i in range(5):
            dev.append({"question": f"Dev {subject} {i}?", "subject": subject, "choices": ["w", "x", "y", "z"], "answer": i % 4})
    (tmp_path / "mmlu").mkdir()
    _w(tmp_path / "mmlu" / "test.jsonl", test)
    _w(tmp_path / "mmlu" / "dev.jsonl", dev)
    hs = [{"ind": i, "activity_label": "Baking cookies", "ctx_a": "A woman mixes flour.", "ctx_b": "she",
           "ctx": "", "endings": [f"puts the tray [title] in the oven {i}.", "runs away quickly.", "eats", "sings a very long song about dough"],
           "source_id": "x", "split": "val", "split_type": "indomain", "label": str(i % 4)} for i in range(3)]
    (tmp_path / "hs").mkdir()
    _w(tmp_path / "hs" / "validation.jsonl", hs)
    monkeypatch.setenv(data.MMLU_ENV, str(tmp_path / "mmlu"))
    monkeypatch.setenv(data.HELLASWAG_ENV, str(tmp_path / "hs"))
    data.clear_caches()
    yield {"test": test, "dev": dev, "hs": hs}
    data.clear_caches()


def test_mmlu_matches_brute_force(short_dirs, tiny_runner):
    task = get_task("mmlu")
    assert task.num_samples_available(0) == 4 and task.kind == "loglikelihood"
    out = task.evaluate_with_runner(tiny_runner, 0, [0, 1, 2, 3], 42, None)
    assert [r["index"] for r in out] == [0, 1, 2, 3]
    order = data.mmlu_files()[1]  # sample index -> (subject, row of that subject)
    assert sorted(order) == [("anatomy", 0), ("anatomy", 1), ("astronomy", 0), ("astronomy", 1)]
    for rec in out:
        subject, row = order[rec["index"]]
        doc = [d for d in short_dirs["test"] if d["subject"] == subject][row]
        shots = [d for d in short_dirs["dev"] if d["subject"] == subject][:5]

        def fmt(d):
            return f"{d['question'].strip()}\nA. {d['choices'][0]}\nB. {d['choices'][1]}\nC. {d['choices'][2]}\nD. {d['choices'][3]}\nAnswer:"

        context = (f"The following are multiple choice questions (with answers) about {subject}.\n\n"
                   + "".join(fmt(d) + " " + "ABCD"[d["answer"]] + "\n\n" for d in shots) + fmt(doc))
        lls = [_brute_ll(tiny_runner, context, " " + c) for c in "ABCD"]
        best = max(range(4), key=lambda k: lls[k])
        assert rec["metadata"]["loglikelihoods"] == pytest.approx(lls, abs=1e-6)
        assert rec["prediction"] == "ABCD"[best]
        assert rec["score"] == float(best == doc["answer"])
        assert rec["metadata"]["num_fewshot"] == 5 and rec["metadata"]["lm_eval_version"].startswith("0.4")
    # micro average = mean over questions
    assert sum(r["score"] for r in out) / 4 == pytest.approx(sum(r["score"] for r in out) / len(out))


def _preprocess(text):
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def test_hellaswag_acc_norm_matches_brute_force(short_dirs, tiny_runner):
    task = get_task("hellaswag")
    out = task.evaluate_with_runner(tiny_runner, 0, [2, 0, 1], 42, None)
    assert [r["index"] for r in out] == [2, 0, 1]
    assert sorted(r["metadata"]["doc_id"] for r in out) == [0, 1, 2]
    for rec in out:
        doc = short_dirs["hs"][data.hellaswag_file()[1][rec["index"]]]
        query = _preprocess(doc["activity_label"] + ": " + doc["ctx_a"] + " " + doc["ctx_b"].capitalize())
        choices = [_preprocess(e) for e in doc["endings"]]
        lls = [_brute_ll(tiny_runner, query, " " + c) for c in choices]
        norm = max(range(4), key=lambda k: lls[k] / len(choices[k]))  # acc_norm: by the ending's characters
        assert rec["metadata"]["loglikelihoods"] == pytest.approx(lls, abs=1e-6)
        assert rec["score"] == float(norm == int(doc["label"]))
        assert rec["metadata"]["metric"] == "acc_norm" and rec["metadata"]["num_fewshot"] == 0
    assert all_suites()["short"] == ["mmlu", "hellaswag"]


def test_short_missing_data(monkeypatch, tmp_path):
    monkeypatch.setenv(data.MMLU_ENV, str(tmp_path))
    data.clear_caches()
    with pytest.raises(TaskUnavailable, match="test.jsonl not found"):
        get_task("mmlu").check_available()
    monkeypatch.delenv(data.HELLASWAG_ENV, raising=False)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(TaskUnavailable, match="HARNESS_HELLASWAG"):
        get_task("hellaswag").check_available()
    data.clear_caches()
