"""Writes tests/helmet/fixtures/: small files in the layout of HELMET's data.tar.gz (and its
repository's prompts/), at the per-length names HELMET's configs read, for the reference protocol's
tests and benchmarks/helmet_parity.py. The contents are our own; the field names are the ones
HELMET's data.py reads. Re-make them with

    .venv/bin/python -m tests.helmet.released_layout

Only 8K (and 16K for NQ and JSON KV, to show that each length reads its own file) is written. The
8K JSON KV file holds one object too long for 8K tokens of the test BPE, so HELMET's cut of the
context's end (model_utils.tokenize) is exercised.
"""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

from tests.helmet.fixtures import _alce_item, _alce_prompt, _qa_record, _rerank_record

FOLDER = Path(__file__).parent / "fixtures"


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _kv_row(rng: random.Random, pairs: int, depth: float) -> dict:
    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    kvs = [(uid(), uid()) for _ in range(pairs)]
    at = round(depth * (pairs - 1))
    body = ",\n ".join(f'"{k}": "{v}"' for k, v in kvs)
    return {
        "context": "JSON data:\n{" + body + "}",
        "question": f'"{kvs[at][0]}"',
        "answer": kvs[at][1],
        "demos": [[f'"{k}"', v] for k, v in kvs[:3]],
        "num_kvs": pairs,
        "depth": depth,
    }


def _ruler_row(rng: random.Random, i: int, kind: str, values: int) -> dict:
    key = f"{rng.choice(['amber', 'silent', 'brave'])}-{rng.choice(['harbor', 'meadow', 'comet'])}-{i}"
    outs = [str(rng.randrange(10**6, 10**7)) for _ in range(values)]
    needles = [f"One of the special magic {kind} for {key} is: {v}." for v in outs]
    filler = [f"The grass is green and the sky is blue, line {j}." for j in range(12)]
    lines = filler[:5] + needles + filler[5:]
    return {
        "index": i,
        "context": " ".join(lines),
        "query": key,
        "type_needle_v": kind,
        "outputs": outs,
        "length": 8192,
    }


def write(folder: Path = FOLDER) -> Path:
    rng = random.Random(36)
    kilt = folder / "kilt"
    _jsonl(kilt / "nq-dev-multikilt_1000_k50_dep6.jsonl", [_qa_record(rng, q, 5, False) for q in range(3)])
    _jsonl(kilt / "nq-dev-multikilt_1000_k105_dep6.jsonl", [_qa_record(rng, q, 7, False) for q in range(3)])
    _jsonl(kilt / "nq-train-multikilt_1000_k3_dep6.jsonl", [_qa_record(rng, 50 + q, 3, False) for q in range(4)])
    _jsonl(kilt / "triviaqa-dev-multikilt_1000_k50_dep6.jsonl", [_qa_record(rng, q, 5, True) for q in range(3)])
    _jsonl(kilt / "triviaqa-train-multikilt_1000_k3_dep6.jsonl", [_qa_record(rng, 60 + q, 3, True) for q in range(4)])
    _jsonl(kilt / "hotpotqa-dev-multikilt_1000_k50_dep3.jsonl", [_qa_record(rng, q, 5, True) for q in range(3)])
    _jsonl(kilt / "hotpotqa-train-multikilt_1000_k3_dep3.jsonl", [_qa_record(rng, 70 + q, 3, True) for q in range(4)])
    pops = [50.0, 200.0, 5000.0, 10.0]  # log10(s_pop) < 3 keeps all but 5000
    _jsonl(kilt / "popqa_test_1000_k50_dep6.jsonl", [_qa_record(rng, q, 5, True, pops[q]) for q in range(4)])
    _jsonl(
        kilt / "popqa_test_1000_k3_dep6.jsonl",
        [_qa_record(rng, q if q < 2 else 60 + q, 3, True, [20.0, 30.0, 40.0, 9000.0, 70.0][q]) for q in range(5)],
    )
    msmarco = folder / "msmarco"
    _jsonl(msmarco / "test_reranking_data_k50_dep3.jsonl", [_rerank_record(rng, q, 12) for q in range(3)])
    _jsonl(msmarco / "test_reranking_data_k10_dep3.jsonl", [_rerank_record(rng, 10 + q, 10) for q in range(4)])
    kv = folder / "json_kv"
    _jsonl(kv / "test_k105_dep6.jsonl", [_kv_row(rng, 400, 0.6), _kv_row(rng, 8, 0.0), _kv_row(rng, 8, 1.0)])
    _jsonl(kv / "test_k220_dep6.jsonl", [_kv_row(rng, 12, 0.4), _kv_row(rng, 12, 0.8)])
    for task, kind, values in (
        ("niah_multikey_2", "number", 1),
        ("niah_multikey_3", "uuid", 1),
        ("niah_multivalue", "numbers", 4),
    ):
        _jsonl(folder / "ruler" / task / "validation_8192.jsonl", [_ruler_row(rng, i, kind, values) for i in range(3)])
    (folder / "alce").mkdir(parents=True, exist_ok=True)
    (folder / "alce" / "asqa_eval_gtr_top2000.json").write_text(
        json.dumps([_alce_item(rng, q, False) for q in range(3)])
    )
    (folder / "alce" / "qampari_eval_gtr_top2000.json").write_text(
        json.dumps([_alce_item(rng, q, True) for q in range(3)])
    )
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    (folder / "prompts" / "asqa_revised.json").write_text(json.dumps(_alce_prompt(rng, False)))
    (folder / "prompts" / "qampari_revised.json").write_text(json.dumps(_alce_prompt(rng, True)))
    return folder


def write_icl(folder: Path = Path(__file__).parent / "icl_fixture") -> Path:
    """tasks.icl's layout for trec_coarse (HELMET reads ICL from the hub): more than 500 test rows,
    so HELMET's label-balanced draw of its 500 test items runs."""
    rng = random.Random(37)
    labels = ["ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"]
    words = ["what", "who", "river", "year", "name", "city", "mean", "many", "first", "color"]

    def rows(n: int) -> list[dict]:
        return [
            {"text": " ".join(rng.choice(words) for _ in range(4)) + f" {i}?", "label": rng.randrange(6)}
            for i in range(n)
        ]

    d = folder / "trec_coarse"
    _jsonl(d / "train.jsonl", rows(300))
    _jsonl(d / "test.jsonl", rows(510))
    (d / "labels.json").write_text(json.dumps(labels))
    return folder


if __name__ == "__main__":
    print(write(), write_icl())
