"""A small HELMET data folder in the layout of HELMET's data.tar.gz (plus prompts/), built by the
tests. Field names follow what HELMET's data.py reads; the contents are our own."""

from __future__ import annotations

import json
import random
from pathlib import Path

TOPICS = ["river", "castle", "violin", "comet", "harbor", "glacier", "orchard", "lantern", "canyon", "meadow"]


def _passage(rng: random.Random, i: int, answer: str | None = None) -> dict:
    topic = rng.choice(TOPICS)
    words = " ".join(rng.choice(TOPICS) for _ in range(rng.randint(12, 24)))
    text = f"The {topic} number {i} is described here: {words}."
    if answer:
        text += f" It was founded by {answer}."
    return {"title": f"{topic.title()} {i}", "text": text}


def _qa_record(rng: random.Random, q: int, n_ctxs: int, with_id: bool, pop: float | None = None) -> dict:
    answer = f"Person{q} Smith"
    gold_at = rng.randrange(n_ctxs)
    ctxs = []
    for i in range(n_ctxs):
        c = _passage(rng, 100 * q + i, answer if i == gold_at else None)
        c["has_answer"] = i == gold_at
        ctxs.append(c)
    rec = {"question": f"who founded the place number {q}?", "answers": [answer, f"P. {q} Smith"], "ctxs": ctxs}
    if with_id:
        rec["id"] = f"q{q}"
    if pop is not None:
        rec["s_pop"] = pop
    return rec


def _rerank_record(rng: random.Random, q: int, n_ctxs: int, title: bool = True) -> dict:
    ctxs = []
    for i in range(n_ctxs):
        c = _passage(rng, 1000 * q + i)
        c["id"] = str(1000 * q + i)
        c["label"] = rng.choice([0, 0, 0, 1, 2, 3])
        if not title:
            del c["title"]
        ctxs.append(c)
    return {"qid": f"{q}", "query": f"what is known about item {q}", "ctxs": ctxs}


def _alce_item(rng: random.Random, q: int, qampari: bool) -> dict:
    docs = [dict(_passage(rng, 10 * q + i), score=1.0) for i in range(6)]
    item = {
        "question": f"which places relate to topic {q}?",
        "docs": docs,
        "answer": f"Topic {q} relates to River {q}.",
    }
    if qampari:
        item["answers"] = [[f"River {q}", f"the river {q}"], [f"Castle {q}"], [f"Comet {q}"]]
    else:
        item["qa_pairs"] = [
            {"question": f"first place {q}?", "short_answers": [f"River {q}", f"river {q}"]},
            {"question": f"second place {q}?", "short_answers": [f"Castle {q}"]},
        ]
        item["annotations"] = [{"long_answer": item["answer"]}, {"long_answer": item["answer"]}]
    return item


def _alce_prompt(rng: random.Random, qampari: bool) -> dict:
    demos = [
        {
            "question": f"demo question {i}?",
            "answer": f"Demo answer {i} [1][2].",
            "docs": [_passage(rng, 900 + 10 * i + j) for j in range(3)],
        }
        for i in range(4)
    ]
    return {
        "instruction": "Instruction: Answer the question using the search results and cite them as [x].",
        "demo_sep": "\n\n\n",
        "demo_prompt": "{instruction}\n\nQuestion: {question}\n\n{context}\n\nAnswer: {answer}"
        if not qampari
        else "{instruction}\n\nQuestion: {question}\n\n{context}\nAnswer: {answer}",
        "doc_prompt": "Document [{ID}](Title: {title}): {text}",
        "demos": demos,
    }


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _infbench(rng: random.Random, kind: str, n: int = 4) -> list[dict]:
    rows = []
    for i in range(n):
        book = " ".join(f"Chapter {j}: the {rng.choice(TOPICS)} keeper {i} walked on." for j in range(20))
        options = [f"Keeper {i}", f"Ranger {i}", f"Sailor {i}", f"Miller {i}"]
        answer = [options[i % 4]] if kind == "choice" else [f"Keeper {i}", f"the keeper {i}"]
        if kind == "sum":
            answer = [f"  Keeper {i} walks by the {rng.choice(TOPICS)}. "]
        rows.append(
            {
                "id": i,
                "context": book,
                "input": f"Who walked in story {i}?" if kind != "sum" else "",
                "answer": answer,
                "options": options if kind == "choice" else [],
            }
        )
    return rows


def write_helmet(folder: Path) -> Path:
    rng = random.Random(11)
    other = random.Random(12)
    for kind in ("qa", "choice", "sum"):
        _jsonl(folder / "infbench" / f"longbook_{kind}_eng.jsonl", _infbench(other, kind))
    _jsonl(
        folder / "infbench" / "longbook_sum_eng_keypoints.jsonl",
        [{"id": i, "keypoints": [f"Keeper {i} walks.", "The story ends."]} for i in range(4)],
    )
    kilt = folder / "kilt"
    for ds in ("nq", "triviaqa", "hotpotqa"):
        with_id = ds != "nq"
        _jsonl(kilt / f"{ds}-dev-multikilt_1000_k8_dep6.jsonl", [_qa_record(rng, q, 8, with_id) for q in range(4)])
        _jsonl(
            kilt / f"{ds}-train-multikilt_1000_k3_dep6.jsonl", [_qa_record(rng, 50 + q, 3, with_id) for q in range(5)]
        )
    pops = [50.0, 200.0, 5000.0, 10.0]  # log10 < 3 keeps all but 5000
    _jsonl(kilt / "popqa_test_1000_k8_dep6.jsonl", [_qa_record(rng, q, 8, True, pops[q]) for q in range(4)])
    _jsonl(
        kilt / "popqa_test_1000_k3_dep6.jsonl",
        [_qa_record(rng, q if q < 2 else 60 + q, 3, True, [20.0, 30.0, 40.0, 9000.0, 70.0][q]) for q in range(5)],
    )
    _jsonl(folder / "msmarco" / "test_reranking_data_k20_dep3.jsonl", [_rerank_record(rng, q, 12) for q in range(3)])
    _jsonl(
        folder / "msmarco" / "test_reranking_data_k10_dep3.jsonl", [_rerank_record(rng, 10 + q, 10) for q in range(4)]
    )
    (folder / "alce").mkdir(parents=True, exist_ok=True)
    (folder / "alce" / "asqa_eval_gtr_top2000.json").write_text(
        json.dumps([_alce_item(rng, q, False) for q in range(4)])
    )
    (folder / "alce" / "qampari_eval_gtr_top2000.json").write_text(
        json.dumps([_alce_item(rng, q, True) for q in range(4)])
    )
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    (folder / "prompts" / "asqa_revised.json").write_text(json.dumps(_alce_prompt(rng, False)))
    (folder / "prompts" / "qampari_revised.json").write_text(json.dumps(_alce_prompt(rng, True)))
    return folder
