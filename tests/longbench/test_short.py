"""MMLU (5-shot acc) and HellaSwag (0-shot acc_norm) through lm-eval's evaluator on tiny local
files with the tiny Llama, checked against a brute-force scorer that builds lm-eval's prompts
from the task definitions and reads log-likelihoods off the model directly."""

from __future__ import annotations

import re

import pytest

from harness.core.errors import TaskUnavailable
from tasks.registry import all_suites, get_task
from tasks.short import data


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

        context = (
            f"The following are multiple choice questions (with answers) about {subject}.\n\n"
            + "".join(fmt(d) + " " + "ABCD"[d["answer"]] + "\n\n" for d in shots)
            + fmt(doc)
        )
        lls = [_brute_ll(tiny_runner, context, " " + c) for c in "ABCD"]
        best = max(range(4), key=lambda k: lls[k])
        assert rec["metadata"]["loglikelihoods"] == pytest.approx(lls, abs=1e-6)
        assert rec["prediction"] == "ABCD"[best]
        assert rec["score"] == float(best == doc["answer"])
        assert rec["metadata"]["num_fewshot"] == 5 and rec["metadata"]["lm_eval_version"].startswith("0.4")
    # the reported MMLU cell (harness.pipeline.aggregate) is the mean over these 4 questions
    assert _mmlu_cell(out) == pytest.approx(100 * sum(r["score"] for r in out) / 4)


def _mmlu_cell(out):
    """The MMLU score harness.pipeline.aggregate reports for one checkpoint's records (x100)."""
    from harness.pipeline.aggregate import aggregate

    ckpt = {"path": "ckpt-1", "step": 1, "fingerprint": "fp"}
    records = [
        {
            "type": "sample",
            "run": "r",
            "checkpoint": ckpt,
            "suite": "short",
            "task": "mmlu",
            "task_version": "1",
            "length": 0,
            "index": r["index"],
            "seed": 42,
            "dataset_hash": "h",
            "prediction": r["prediction"],
            "score": r["score"],
            "metric": "acc",
            "num_tokens": None,
            "settings": {},
            "metadata": r["metadata"],
        }
        for r in out
    ]
    res = aggregate(
        records,
        {"short": {"tasks": ["mmlu"], "lengths": [0]}},
        {"name": "r", "model": ".", "mode": None, "checkpoints": [dict(ckpt, training=None)]},
        {},
    )
    return res["suites"]["short"]["per_task"]["mmlu"]["0"]["mean"]


def test_mmlu_is_micro_averaged_over_questions(tmp_path, monkeypatch):
    """Subjects of unequal size: the reported MMLU is the mean over questions (lm-eval's `mmlu`
    group, the paper's number), not the mean of per-subject accuracies."""
    from .helpers import FakeRunner, write_short_files

    # FakeRunner's log-likelihood is minus the continuation's length: " A".." D" tie, so every
    # prediction is "A" (argmax takes the first) and a question scores 1 exactly when its answer is A.
    answers = {"anatomy": [0, 0, 1], "astronomy": [1]}
    files = write_short_files(tmp_path, sizes=(("anatomy", 3), ("astronomy", 1)), answers=answers)
    monkeypatch.setenv(data.MMLU_ENV, str(files["mmlu"]))
    data.clear_caches()
    try:
        task = get_task("mmlu")
        n = task.num_samples_available(0)
        assert n == 4
        out = task.evaluate_with_runner(FakeRunner(lambda p: ""), 0, list(range(n)), 42, None)
    finally:
        data.clear_caches()
    assert {r["prediction"] for r in out} == {"A"}
    per_subject = {s: 100 * sum(a == 0 for a in ans) / len(ans) for s, ans in answers.items()}  # 66.7, 0
    micro = 100 * sum(a == 0 for ans in answers.values() for a in ans) / n  # 2/4 = 50
    macro = sum(per_subject.values()) / len(per_subject)  # 33.3
    assert micro != pytest.approx(macro)
    assert _mmlu_cell(out) == pytest.approx(micro)


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
