"""HELMET's LongQA and Summ under the reference protocol, pinned: benchmarks/helmet_parity.py ran
HELMET's own load_narrativeqa, load_infbench and load_multi_lexsum (4526dfb, through load_data and
model_utils.tokenize) on the rows of tests/helmet/long_documents.py with its character-level
stand-in for Llama-2's tokenizer, and wrote the sha256 of HELMET's prompts, its item counts and
its En.QA / En.MC scores to parity_pins.json (cases with "data": "hub"). Here ours are rebuilt
from the same rows and compared, without the checkout. Re-make the pins with
    PYTHONPATH=<pytrec_eval> .venv/bin/python benchmarks/helmet_parity.py --helmet <checkout> \\
        --pins tests/helmet/parity_pins.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from harness.core.errors import UserError
from tasks.helmet import reference
from tasks.registry import get_task

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the parity script's modules import each other by name

import helmet_parity_long as parity

from tests.helmet import long_documents as docs

PINS = json.loads((Path(__file__).parent / "parity_pins.json").read_text())
HUB = {case: pin for case, pin in PINS["cases"].items() if pin["data"] == "hub"}


@pytest.fixture(scope="module")
def long_data(tmp_path_factory):
    """Our side reads the rows from --helmet-data's layout and counts Llama-2 tokens with the stand-in."""
    llama2, folder, rows = parity.prepare(tmp_path_factory.mktemp("helmet-long"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HARNESS_HELMET", str(folder))
        mp.setenv(reference.LLAMA2_ENV, str(llama2))
        reference.llama2_tokenizer.cache_clear()
        reference.llama2_length.cache_clear()
        yield rows
    reference.llama2_tokenizer.cache_clear()
    reference.llama2_length.cache_clear()


def _check(pin: dict, tok) -> None:
    name, length, cap = pin["task"], pin["length"], pin["max_test_samples"]
    with parity.max_test_samples(cap):
        samples = parity.our_samples(name, length, pin["items"], tok)
        got = [hashlib.sha256(s.prompt.encode()).hexdigest()[:24] for s in samples]
        assert got == pin["prompt_sha256"], (name, length, cap)
        if pin["items"] < cap:  # HELMET's filters keep no more items than these
            with pytest.raises(UserError):
                get_task(name).sample(length, pin["items"], parity.SEED, tok)
    assert sum(s.metadata["context_tokens_cut"] > 0 for s in samples) == pin["context_cut"], (name, length)
    ours = [x for s in samples for x in parity.our_scores(get_task(name), s)] if name in parity.METRICS else []
    assert ours == pytest.approx(pin["helmet_scores"], abs=1e-9), (name, length)


def test_the_pinned_run_compared_every_case_without_a_mismatch():
    assert PINS["hub"] == {"prompts": 77, "prompt_mismatches": 0, "scores": 600, "metric_mismatches": 0}
    full = [pin for pin in HUB.values() if pin["max_test_samples"] == parity.TEST_SAMPLES]
    assert sorted((pin["task"], pin["length"]) for pin in full) == sorted(
        (name, length) for name, _, _ in parity.CASES for length in reference.LENGTHS
    )
    for pin in full:
        assert pin["items"] == 3 and pin["prompt_mismatches"] == pin["metric_mismatches"] == 0, pin["task"]
        assert pin["scores"] == (60 if pin["task"] in parity.METRICS else 0), pin["task"]
        if pin["length"] < 131072:  # every document is over these budgets; one noise document overflows
            assert (pin["truncated_llama2"], pin["context_cut"]) == (3, 1), (pin["task"], pin["length"])
    # Multi-LexSum with max_test_samples 2: 3 cases pass the filter, so HELMET shuffles and takes 2
    (capped,) = [pin for pin in HUB.values() if pin["max_test_samples"] != parity.TEST_SAMPLES]
    assert (capped["task"], capped["length"], capped["max_test_samples"]) == parity.CAPPED
    first = HUB["helmet_multi_lexsum@8192"]["prompt_sha256"]
    assert capped["prompt_sha256"] == [first[2], first[1]]  # datasets' shuffle(seed=42) of 3: [2, 1, 0]


def test_the_documents_sit_on_both_sides_of_each_bound(long_data):
    standin = reference.llama2_tokenizer()  # HARNESS_LLAMA2_TOKENIZER: the stand-in, BOS counted
    text = long_data["narrativeqa"]["test"][0]["document"]["text"]
    assert len(standin(text)["input_ids"]) == docs.standin_tokens(text) == docs.NARRATIVEQA_BOUND + 1
    nqa = [docs.standin_tokens(r["document"]["text"]) for r in long_data["narrativeqa"]["test"]]
    assert nqa == [131073, 131073, 131072, 131112, 3000]  # more than 131,072 kept: 3 questions
    mls = long_data["allenai/multi_lexsum"]["validation"]
    assert [docs.standin_tokens("\n\n".join(r["sources"])) for r in mls] == [65536, 65535, 65537, 66036, 66436, 2000]
    assert [r["summary/short"] is None for r in mls] == [False, False, False, False, True, False]
    books = long_data["xinrongzhang2022/infinitebench"]["longbook_qa_eng"]
    assert [docs.standin_tokens(r["context"]) for r in books] == [65536, 65535, 65836, 90000, 2500]
    assert [reference.llama2_length(r["context"]) for r in books] == [65536, 65535, 65836, 90000, 2500]


def test_our_prompts_and_scores_are_helmets_at_8k(long_data, bpe_tokenizer):
    for pin in HUB.values():
        if pin["length"] == 8192:
            _check(pin, bpe_tokenizer)


@pytest.mark.slow
def test_our_prompts_and_scores_are_helmets_at_every_length(long_data, bpe_tokenizer):
    for pin in HUB.values():
        if pin["length"] != 8192:
            _check(pin, bpe_tokenizer)


def test_multi_lexsum_offers_what_its_filter_keeps(long_data):
    """A default run takes every case HELMET's filter keeps (3 here), never asks past them."""
    from harness.pipeline.sample_plan import _num_samples

    task = get_task("helmet_multi_lexsum")
    before = task.protocol
    try:
        task.set_protocol("reference")
        kept = HUB["helmet_multi_lexsum@8192"]["items"]
        assert task.num_samples_available(8192) == kept == 3
        assert _num_samples(task, 8192, None, tokenizer=None) == kept
        task.set_protocol("exact-length")
        assert task.num_samples_available(8192) == 5  # every case with a short summary, unfiltered
    finally:
        task.set_protocol(before)
