"""HELMET's "reference" protocol: HELMET's released per-length files (tests/helmet/fixtures, in the
data.tar.gz layout), its lengths, sample counts, chat policy, filters and headline.

The prompt hashes and counts are benchmarks/helmet_parity.py's output (tests/helmet/parity_pins.json):
HELMET's own data.py + model_utils.tokenize at 4526dfb on these files built the same prompts, and
its metric code gave the same scores, with 0 mismatches (LongQA / Summ: test_long_parity.py). Re-make the pins with
    PYTHONPATH=<pytrec_eval> .venv/bin/python benchmarks/helmet_parity.py --helmet <checkout> \\
        --pins tests/helmet/parity_pins.json
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.core.errors import TaskUnavailable, UserError
from tasks.helmet import reference
from tasks.registry import get_task, suite_headline

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
PINS = json.loads((HERE / "parity_pins.json").read_text())


@pytest.fixture
def released(monkeypatch):
    monkeypatch.setenv("HARNESS_HELMET", str(FIXTURES))
    monkeypatch.setenv("HARNESS_ICL_DATA", str(HERE / "icl_fixture"))  # tasks.icl's layout (trec_coarse)
    return FIXTURES


@pytest.fixture(scope="module")
def parity_tokenizer(tmp_path_factory):
    """The tokenizer helmet_parity.py uses (harness.models.embedded's test BPE)."""
    from harness.models.embedded import build_tokenizer
    from harness.models.tokenization import load_tokenizer

    return load_tokenizer(str(build_tokenizer(tmp_path_factory.mktemp("parity-tok"))))


def test_parity_pins_hold_without_the_checkout(released, parity_tokenizer):
    assert PINS["prompt_mismatches"] == 0 and PINS["metric_mismatches"] == 0
    assert (PINS["prompts"], PINS["scores"]) == (179, 1416)  # the released files and LongQA / Summ
    assert (PINS["released"]["prompts"], PINS["released"]["scores"]) == (102, 816)
    for case, pin in PINS["cases"].items():
        if pin["data"] != "released":  # LongQA / Summ: tests/helmet/test_long_parity.py
            continue
        name, length = case.split("@")
        task = get_task(name)  # the default protocol is HELMET's
        assert task.protocol == "reference"
        got = [
            hashlib.sha256(task.sample(int(length), i, 42, parity_tokenizer).prompt.encode()).hexdigest()[:24]
            for i in range(pin["items"])
        ]
        assert got == pin["prompt_sha256"], case


def test_a_prompt_over_the_length_is_cut_as_helmet_cuts_it(released, parity_tokenizer):
    # the 8K JSON KV file's long object (HELMET's item 2 for seed 42): its context's end goes
    s = get_task("helmet_json_kv").sample(8192, 2, 42, parity_tokenizer)
    assert s.metadata["context_tokens_cut"] > 0 and s.num_tokens + 100 <= 8192
    assert s.metadata["protocol"] == "reference" and s.metadata["helmet_file"] == "json_kv/test_k105_dep6.jsonl"
    assert s.answer_prefix == "\nCorresponding value:"


def test_lengths_counts_and_chat_policy(released):
    nq = get_task("helmet_nq")
    with pytest.raises(UserError, match=r"no file .*kilt/nq-dev-multikilt_1000_k220_dep6.jsonl.*--helmet-data"):
        nq.task_lengths(None, 131072, None)  # all five by default: 32K's file is not among the fixtures
    assert nq.task_lengths([8192, 16384], 131072, None) == [8192, 16384]
    with pytest.raises(UserError, match="no HELMET config at length 4K.*--protocol exact-length"):
        nq.task_lengths([4096], 131072, None)
    assert reference.LENGTHS == (8192, 16384, 32768, 65536, 131072)
    assert reference.run_for("helmet_msmarco", 65536).test == "msmarco/test_reranking_data_k600_dep3.jsonl"
    assert reference.run_for("helmet_hotpotqa", 131072).test == "kilt/hotpotqa-dev-multikilt_1000_k1000_dep3.jsonl"
    assert reference.run_for("helmet_alce_asqa_citation_rec", 131072).k == 700
    assert reference.run_for("helmet_narrativeqa", 8192).k == 7892
    chat = {"Cite", "LongQA", "Summ"}
    for name in ("helmet_json_kv", "helmet_niah_mv", "helmet_popqa", "helmet_msmarco", "helmet_alce_qampari",
                 "helmet_icl_banking77", "helmet_narrativeqa", "helmet_infbench_choice", "helmet_multi_lexsum"):  # fmt: skip
        task = get_task(name)
        assert task.protocols == ("reference", "exact-length")
        assert task.default_samples(8192) == (500 if "icl" in name else 100), name
        assert task.uses_chat_template() == (task.category in chat), name
        task.set_protocol("exact-length")
        assert task.default_samples(8192) is None and task.uses_chat_template(), name
        assert task.task_lengths(None, 131072, None)[0] == 4096


def test_headline_is_the_mean_of_the_seven_category_means():
    from tasks.helmet.suite import CATEGORIES

    for suite in ("helmet", "helmet-nojudge"):
        headline = suite_headline(suite)
        assert headline is not None and headline.groups == {"HELMET": CATEGORIES}
        assert "7 category means" in headline.label
    assert list(CATEGORIES) == ["Recall", "RAG", "Re-rank", "Cite", "ICL", "LongQA", "Summ"]
    spec = suite_headline("helmet-nojudge").to_spec(["helmet_nq", "helmet_json_kv"])
    assert spec["categories_total"] == {"HELMET": 7} and list(spec["groups"]["HELMET"]) == ["Recall", "RAG"]


def test_llama2_budget_and_filters(tmp_path, monkeypatch, bpe_tokenizer_dir, bpe_tokenizer):
    from tasks.helmet import judged
    from tasks.helmet import prompts as P

    monkeypatch.delenv(reference.LLAMA2_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reference.llama2_tokenizer.cache_clear()
    with pytest.raises(TaskUnavailable, match="HARNESS_LLAMA2_TOKENIZER=DIR.*--protocol exact-length"):
        reference.llama2_tokenizer()
    # the test BPE stands in for Llama-2's tokenizer
    monkeypatch.setenv(reference.LLAMA2_ENV, str(bpe_tokenizer_dir))
    reference.llama2_tokenizer.cache_clear()
    reference.llama2_length.cache_clear()
    text = " ".join(f"word{i}" for i in range(400))
    cut = reference.truncate_llama2(text, 100)
    sep = len(bpe_tokenizer(P.TRUNCATION_POSTFIX)["input_ids"])
    enc = bpe_tokenizer(text, return_offsets_mapping=True)
    assert cut == text[: enc["offset_mapping"][100 - sep][1]] + P.TRUNCATION_POSTFIX
    assert reference.truncate_llama2("short text", 100) == "short text"
    # NarrativeQA keeps documents of MORE than the bound, Multi-LexSum those of AT LEAST it
    docs = {"a": "one two", "b": " ".join(["many"] * 50), "c": " ".join(["more"] * 80)}
    test = tuple(
        {"document": {"text": t}, "question": {"text": q}, "answers": [{"text": "x"}]} for q, t in docs.items()
    )
    monkeypatch.setattr(judged, "_narrativeqa", lambda folder: (test, test, "h"))
    monkeypatch.setattr(judged, "NARRATIVEQA_MIN_TOKENS", reference.llama2_length(docs["b"]))
    qa = get_task("helmet_narrativeqa")
    assert qa._pick(0, 42)["question"]["text"] == "c"
    with pytest.raises(UserError, match="fewer than 2 documents"):
        qa._pick(1, 42)
    val = tuple(
        {"id": q, "sources": [t], "summary/short": "s", "summary/long": "l", "summary/short_keypoints": ["k"]}
        for q, t in docs.items()
    )
    monkeypatch.setattr(judged, "_multi_lexsum", lambda folder: (val, val, "h"))
    monkeypatch.setattr(judged, "MULTI_LEXSUM_MIN_TOKENS", reference.llama2_length(docs["b"]))
    ml = get_task("helmet_multi_lexsum")
    assert [ml._pick(i, 42)["id"] for i in range(2)] == ["b", "c"]  # <= 100 left: file order
    reference.llama2_tokenizer.cache_clear()
    reference.llama2_length.cache_clear()


def test_eval_under_the_reference_protocol(tiny_llama_dir, released, tmp_path):
    from harness.cli import main

    out = tmp_path / "out"
    base = ["eval", "--ckpts", str(tiny_llama_dir), "--tasks", "helmet_nq,helmet_niah_mv", "--samples", "1"]
    base += ["--max-new-tokens", "4", "--helmet-data", str(released), "--no-progress", "--cache-dir", "none"]
    assert main([*base, "--lengths", "4k", "--out", str(out)]) == 2  # HELMET has no 4K config
    assert not out.exists()
    assert main([*base, "--lengths", "8k", "--out", str(out)]) == 0
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert {(r["task"], r["length"]) for r in recs} == {("helmet_nq", 8192), ("helmet_niah_mv", 8192)}
    assert all(r["settings"]["protocol"] == "reference" and r["metadata"]["protocol"] == "reference" for r in recs)
