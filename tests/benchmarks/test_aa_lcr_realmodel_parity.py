"""benchmarks/aa_lcr_realmodel_parity.py without a server, a model or NeMo-Skills' checkout: its
arguments, the released-layout data it writes (read back by our loader), and the side-by-side rows
and cells built from recorded requests.

    pytest -q tests/benchmarks/test_aa_lcr_realmodel_parity.py

The run itself (vllm serve + SmolLM2 + NeMo-Skills' client and judge step) is in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import aa_lcr_realmodel_parity as al

from tasks.aa_lcr.prompts import judge_prompt, question_prompt


def test_arguments_and_run_folder():
    a = al.parse_args(["--nemo-skills", "N", "--model", "M"])
    assert (a.dtype, a.max_model_len, a.concurrency, a.report) == ("float32", 8192, 8, False)
    assert al.run_tag(a) == "float32-8192"
    with pytest.raises(SystemExit):
        al.parse_args(["--model", "M"])  # the checkout is required


def test_written_data_is_the_released_layout_and_reads_back(tmp_path, monkeypatch):
    from tasks.aa_lcr import data

    rows = al.write_data(tmp_path)
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    try:
        items = data.load_items()  # our boundary validation accepts every row and file
    finally:
        data.clear_cache()
    assert [it.question_id for it in items] == [r["question_id"] for r in rows] == [str(k) for k in range(1, 11)]
    for it, (qid, category, set_id, docs, question, answer) in zip(items[5:], al.SETS):
        assert (it.question_id, it.question, it.answer) == (qid, question, answer)
        assert list(it.filenames) == [name for name, _, _ in docs]
        for _, facts, _ in docs:
            assert all(fact in it.prompt for fact in facts)  # each set's facts are in its documents
    sizes = [int(r["input_tokens"]) for r in rows[5:]]
    assert sizes == sorted(sizes) and sizes[0] > 500  # a few hundred to a few thousand tokens, growing
    assert al.write_data(tmp_path / "again") == rows  # deterministic
    assert (tmp_path / al.ZIP_NAME).read_bytes() == (tmp_path / "again" / al.ZIP_NAME).read_bytes()


def _record(side, content, text, status=200):
    reply = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9}}
    request = {"model": "m", "messages": [{"role": "user", "content": content}], "temperature": 0.0}
    return {"side": side, "path": "/v1/chat/completions", "request": request, "status": status, "reply": reply}


def _canned():
    """Three questions: the same answer and verdict on both sides; a differing answer (its judge
    request then differs); one the reference's server refused (no answer, no judgement, unscored)."""
    rows = [
        {"question_id": "1", "document_category": "A", "question": "Q one?", "answer": "1"},
        {"question_id": "2", "document_category": "A", "question": "Q two?", "answer": "2"},
        {"question_id": "3", "document_category": "B", "question": "Q three?", "answer": "3"},
    ]
    prompts = {r["question_id"]: question_prompt(["doc " + r["question_id"]], r["question"]) for r in rows}
    records = []
    for side, second in (("reference", "two"), ("ours", "2")):
        records += [_record(side, prompts["1"], "one"), _record(side, prompts["2"], second)]
        records += [_record(side, judge_prompt(prompts["1"], "1", "one"), "CORRECT")]
        records += [
            _record(side, judge_prompt(prompts["2"], "2", second), "INCORRECT" if side == "reference" else "CORRECT")
        ]
    records += [_record("reference", prompts["3"], None, status=400), _record("ours", prompts["3"], "three")]
    records += [_record("ours", judge_prompt(prompts["3"], "3", "three"), "CORRECT")]
    ref = {"items": {
        "1": {"generation": "one", "finish_reason": "stop", "judgement": "CORRECT", "score": 1.0},
        "2": {"generation": "two", "finish_reason": "stop", "judgement": "INCORRECT", "score": 0.0},
        "3": {"generation": None, "error": "BadRequestError: 400", "judgement": None, "score": None},
    }}  # fmt: skip
    ours = {"records": {"1": {"prediction": "one", "score": 1.0}, "2": {"prediction": "2", "score": 1.0},
                        "3": {"prediction": "three", "score": 1.0}}}  # fmt: skip
    return rows, ref, ours, records


def test_rows_and_cells_from_recorded_requests():
    rows, ref, ours, records = _canned()
    answers, judges = al.split_calls(al.chat_records(records, "ours"), {r["question_id"]: r["question"] for r in rows})
    assert sorted(answers) == sorted(judges) == ["1", "2", "3"]  # the judge prompt holds the question too
    by_q = al.item_rows(rows, ref, ours, records)
    for r in by_q:
        r["ref_ids_len"] = r["our_ids_len"] = None
        r["same_ids"] = r["ref_msgs"] is not None and r["ref_msgs"] == r["our_msgs"]  # as vLLM's /tokenize would
    al.mark_same(by_q)
    one, two, three = by_q
    assert all(one[k] for k in al.SAME)
    assert two["same_prompt"] and not two["same_output"] and not two["same_judge_request"] and not two["same_score"]
    assert three["ref_error"] == "BadRequestError: 400" and three["ref_judge_requests"] == 0
    assert (three["our_score"], three["ref_score"], three["same_prompt"]) == (1.0, None, True)
    assert len(one["ref_msgs"]) == 64 and one["ref_msgs"] == one["our_msgs"]  # kept as hashes only
    cells = {c["cell"]: c for c in al.summarize(by_q)}
    a, b, total = cells["A"], cells["B"], cells["**all**"]
    assert (a["n"], a["ref"], a["ours"], a["both"], a["diff"], a["low"], a["high"]) == (
        2,
        50.0,
        100.0,
        2,
        50.0,
        0.0,
        100.0,
    )
    assert (b["ref_unscored"], b["our_unscored"], b["ref"], b["ours"], b["both"], b["diff"]) == (
        1,
        0,
        None,
        100.0,
        0,
        None,
    )
    assert (total["n"], total["same_prompt"], total["same_output"], total["same_verdict"], total["same_score"]) == (
        3,
        3,
        1,
        1,
        1,
    )
