"""HELMET's draws: which test items and demos its loaders take for a seed, and in which order.

    from tasks.helmet.draws import hf_shuffle, helmet_order, question_seed
    order = hf_shuffle(len(items), seed)          # datasets' Dataset.shuffle(seed=...) order

Shared by the exact-length tasks (tasks.helmet.tasks, alce, judged, infbench, icl_reference) and
the reference protocol's sample builders (tasks.helmet.released), so both draw HELMET's items alike:
the RAG and re-ranking files read once per seed (`_rag_data`, `_rerank_data`) and the re-ranking
demos as load_msmarco_rerank picks them (`rerank_demo_text`).
"""

from __future__ import annotations

import hashlib
import math
import random
from functools import lru_cache

import numpy as np

from harness.core.errors import TaskUnavailable
from tasks.helmet import data

HELMET_TEST_SAMPLES = 100  # configs/*.yaml max_test_samples
SHOTS = 2


def hf_shuffle(n: int, seed: int) -> list[int]:
    """The order datasets' Dataset.shuffle(seed=...) gives: np.random.default_rng(seed).permutation."""
    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


def question_seed(key) -> int:
    """HELMET's per-question demo seed: sha256 of the key, mod 2**31."""
    return int(hashlib.sha256(str(key).encode("utf-8")).hexdigest(), 16) % 2**31


def helmet_order(keys: list, seed: int) -> list[int]:
    """Record indices: those whose key HELMET's max_test_samples draw picks, then the others."""
    distinct = sorted(set(keys))
    picked = set(random.Random(seed).sample(distinct, min(HELMET_TEST_SAMPLES, len(distinct))))
    return [i for i, k in enumerate(keys) if k in picked] + [i for i, k in enumerate(keys) if k not in picked]


RAG_FILES = {
    "nq": ("kilt/nq-dev-multikilt_1000_k*_dep*.jsonl", "kilt/nq-train-multikilt_1000_k3_dep*.jsonl"),
    "triviaqa": ("kilt/triviaqa-dev-multikilt_1000_k*_dep*.jsonl", "kilt/triviaqa-train-multikilt_1000_k3_dep*.jsonl"),
    "hotpotqa": ("kilt/hotpotqa-dev-multikilt_1000_k*_dep*.jsonl", "kilt/hotpotqa-train-multikilt_1000_k3_dep*.jsonl"),
    "popqa": ("kilt/popqa_test_1000_k*_dep*.jsonl", "kilt/popqa_test_1000_k3_dep*.jsonl"),
}
POPQA_THRESHOLD = 3.0  # configs: kilt_popqa_3 (log10 popularity < 3)


@lru_cache(maxsize=16)
def _rag_data(dataset: str, folder: str | None, seed: int, test_glob: str = "", demo_glob: str = ""):
    """(test, demos, key, order, digest) of one test / demo file (globs: the largest k matching)."""
    test_glob, demo_glob = test_glob or RAG_FILES[dataset][0], demo_glob or RAG_FILES[dataset][1]
    test_path = data.find(test_glob, f"RAG {dataset}")
    demo_path = data.find(demo_glob, f"RAG {dataset} demos")
    need = ("question", "answers", "ctxs")
    test, h1 = data.read_records(test_path, need)
    demos, h2 = data.read_records(demo_path, need)
    if dataset == "popqa":
        try:
            test = tuple(r for r in test if math.log10(r["s_pop"]) < POPQA_THRESHOLD)
            demos = tuple(r for r in demos if math.log10(r["s_pop"]) < POPQA_THRESHOLD)
        except (KeyError, TypeError, ValueError):
            raise TaskUnavailable(f"{test_path}: PopQA records need a positive s_pop: {data.FIX}") from None
    key = "id" if all("id" in r for r in test) else "question"
    order = helmet_order([r[key] for r in test], seed)
    return test, demos, key, order, f"{h1}:{h2}"


@lru_cache(maxsize=8)
def _rerank_data(folder: str | None, seed: int, test_glob: str = "", demo_glob: str = ""):
    test_path = data.find(test_glob or "msmarco/test_reranking_data_k*_dep*.jsonl", "re-ranking (MS MARCO)")
    demo_path = data.find(demo_glob or "msmarco/test_reranking_data_k10_dep*.jsonl", "re-ranking demos")
    test, h1 = data.read_records(test_path, ("qid", "query", "ctxs"))
    demos, h2 = data.read_records(demo_path, ("qid", "query", "ctxs"))
    for r in test + demos:
        if not r["ctxs"] or not all(isinstance(c, dict) and {"id", "text", "label"} <= set(c) for c in r["ctxs"]):
            raise TaskUnavailable(f"{test_path}: every passage needs id, text and label: {data.FIX}")
    order = helmet_order([r["qid"] for r in test], seed)
    picked = _picked(test, seed)
    # HELMET drops every test qid from the demo pool when the pool is over twice the test data
    # (its test data: the items of the qids max_test_samples picked), else only the item's own
    demo_filtered = len(demos) > 2 * sum(1 for r in test if r["qid"] in picked)
    return test, demos, order, demo_filtered, picked, f"{h1}:{h2}"


def _picked(test, seed: int) -> frozenset:
    distinct = sorted({r["qid"] for r in test})
    return frozenset(random.Random(seed).sample(distinct, min(HELMET_TEST_SAMPLES, len(distinct))))


def rerank_demo_text(item: dict, demos, demo_filtered: bool, picked, template: str) -> str:
    """load_msmarco_rerank's 2 demos: the pool without the test qids (or the item's own), shuffled
    by the qid's sha256, first rows of distinct qids; passages then the label-sorted ranking."""
    pool = (
        [d for d in demos if d["qid"] not in picked] if demo_filtered else [d for d in demos if d["qid"] != item["qid"]]
    )
    chosen, seen = [], set()
    for i in hf_shuffle(len(pool), abs(question_seed(item["qid"]))):
        if pool[i]["qid"] in seen:
            continue
        seen.add(pool[i]["qid"])
        chosen.append(pool[i])
        if len(chosen) == SHOTS:
            break
    demo_text = ""
    for d in chosen:
        ranking = " > ".join(x["id"] for x in sorted(d["ctxs"], key=lambda x: x["label"], reverse=True))
        demo_text += (
            "\n\n".join(template.format(**c) for c in d["ctxs"])
            + f"\n\nQuery: {d['query']}\nRanking: {ranking}"
            + "\n\n"
        )
    return demo_text
