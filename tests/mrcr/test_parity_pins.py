"""MRCR parity with the references' own code, pinned: benchmarks/mrcr_parity.py ran NeMo-Skills'
prepare.py and eval_mrcr, lm-eval's MRCR task (doc_to_text, process_results) and evalscope's bins on
fixtures/ with the tests' BPE tokenizer and wrote their results to parity_pins.json; here ours are
recomputed and compared, without the checkouts. Re-make them with `python benchmarks/mrcr_parity.py
--nemo-skills S --lm-eval L --evalscope E --write-pins tests/mrcr/parity_pins.json`."""

from __future__ import annotations

import hashlib
import json

from .conftest import HERE

PINS = json.loads((HERE / "parity_pins.json").read_text(encoding="utf-8"))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_pinned_run_had_no_mismatch():
    t = PINS["totals"]
    assert (t["prompts_compared"], t["scores_compared"], t["headlines_compared"], t["bins_seen"]) == (24, 264, 10, 4)
    mismatches = {k: v for k, v in t.items() if k.endswith("mismatches")}
    assert len(mismatches) == 7 and set(mismatches.values()) == {0}
    # the card's text and evalscope's code put these exact counts in different bins (we follow the card)
    assert PINS["edges"] == [16384, 32768, 65536, 131072, 262144, 524288, 1048577]


def test_prompts_bins_and_scores_match_the_pins(mrcr_data, stand_in_counter, chat_tokenizer):
    from benchmarks import mrcr_parity as parity
    from harness.pipeline.reasoning import chat_messages, chat_prompt
    from tasks.mrcr import data

    checked = scored = 0
    for needles in parity.NEEDLES:
        chat = parity.our_samples(needles, "reference", chat_tokenizer)
        comp = parity.our_samples(needles, "completion", chat_tokenizer)
        rows = parity.released_rows(needles)
        for c in (c for c in PINS["cases"] if c["needles"] == needles):
            (_, cs), (_, ps) = chat[c["row"]], comp[c["row"]]
            messages = list(data.load_items(needles)[c["row"]].messages)
            assert _sha(json.dumps(messages, ensure_ascii=False)) == c["messages_sha256"]
            assert _sha(json.dumps(list(chat_messages(cs, None)), ensure_ascii=False)) == c["messages_sha256"]
            assert _sha(chat_prompt(chat_tokenizer, cs, None)) == c["chat_sha256"] and cs.answer_prefix == ""
            assert _sha(ps.input) == c["completion_sha256"] and ps.answer_prefix == "\n\nAssistant:"
            assert cs.length == ps.length == c["bin"]
            checked += 1
        for p in (p for p in PINS["scores"] if p["needles"] == needles):
            (task, cs), (ctask, ps) = chat[p["row"]], comp[p["row"]]
            pred = parity.predictions(rows[p["row"]])[p["kind"]]
            assert task.score(pred, cs) == p["reference"] == p["lm_eval"], (needles, p["row"], p["kind"])
            assert ctask.score(" " + pred, ps) == p["lm_eval"]
            scored += 1
    assert (checked, scored) == (PINS["totals"]["prompts_compared"], PINS["totals"]["scores_compared"])


def test_pinned_scores_cover_the_grader_cases():
    kinds = {p["kind"] for p in PINS["scores"]}
    assert {"exact", "no_prefix", "space_before_prefix", "empty", "long_other"} <= kinds
    by_kind = {k: [p["reference"] for p in PINS["scores"] if p["kind"] == k] for k in kinds}
    assert set(by_kind["exact"]) == {1.0} and set(by_kind["no_prefix"]) == {0.0} and set(by_kind["empty"]) == {0.0}
    assert set(by_kind["space_before_prefix"]) == {0.0} and all(0 < v < 1 for v in by_kind["space_after_prefix"])


def test_headline_is_the_mean_per_needle_count_and_bin():
    for h in PINS["headlines"]:
        rows = {c["row"] for c in PINS["cases"] if c["needles"] == h["needles"] and c["bin"] == h["bin"]}
        vals = [p["reference"] for p in PINS["scores"] if p["needles"] == h["needles"] and p["row"] in rows]
        assert abs(sum(vals) / len(vals) - h["reference"]) < 1e-12
