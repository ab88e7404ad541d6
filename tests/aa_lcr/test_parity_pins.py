"""AA-LCR parity with the reference's own code, pinned: benchmarks/aa_lcr_parity.py ran NeMo-Skills'
aalcr prepare.py (write_data_to_file), its prompt configs through prompt/utils.py (generic/default,
judge/aalcr) and its AALCRMetrics on fixtures/ and wrote the results to parity_pins.json; here ours
are recomputed and compared, without the checkout. Re-make them with `python
benchmarks/aa_lcr_parity.py --nemo-skills S --write-pins tests/aa_lcr/parity_pins.json`."""

from __future__ import annotations

import json

from .conftest import FIXTURES, HERE

PINS = json.loads((HERE / "parity_pins.json").read_text(encoding="utf-8"))


def test_pinned_run_had_no_mismatch():
    t = PINS["totals"]
    assert (t["questions"], t["prompts_compared"], t["scores_compared"], t["headlines_compared"]) == (5, 35, 220, 11)
    assert (t["prompt_mismatches"], t["score_mismatches"], t["headline_mismatches"], t["question_count"]) == (
        0,
        0,
        0,
        0,
    )


def test_prompts_and_grades_match_the_pins(bpe_tokenizer):
    from benchmarks import aa_lcr_parity as parity
    from harness.pipeline.reasoning import chat_messages
    from tasks.aa_lcr.prompts import judge_prompt

    with parity.our_task(FIXTURES) as task:
        samples = parity.our_samples(task, bpe_tokenizer)
        assert len(samples) == len(PINS["cases"])
        for s, c in zip(samples, PINS["cases"]):
            assert (s.index, s.metadata["row"], s.metadata["question_id"]) == (c["index"], c["row"], c["question_id"])
            assert parity.sha(s.input) == c["prompt_sha256"]
            assert parity.sha(json.dumps(list(chat_messages(s, None)), ensure_ascii=False)) == c["messages_sha256"]
            for kind, text in parity.answers(s.references[0]).items():
                assert parity.sha(judge_prompt(s.input, s.references[0], text)) == c["judge_sha256"][kind]
        for p in PINS["scores"]:
            s = samples[p["index"]]
            text, reply = parity.answers(s.references[0])[p["answer"]], parity.REPLIES[p["reply"]]
            got = parity.our_grade(task, text, s, reply)
            assert got == (p["reference"], p["judge_calls"]), (p["index"], p["answer"], p["reply"])
        for c in PINS["cut"]:
            assert parity.our_grade(task, samples[c["index"]].references[0], samples[c["index"]], "CORRECT", True) == (
                0.0,
                0,
            )


def test_pinned_grades_cover_the_pitfalls():
    by = {(p["answer"], p["reply"]): p for p in PINS["scores"] if p["index"] == 0}
    # an empty or blank answer is INCORRECT under a judge that says CORRECT, and the judge is not asked
    for kind in ("empty", "whitespace"):
        assert by[(kind, "CORRECT")]["reference"] == 0.0 and by[(kind, "CORRECT")]["judge_calls"] == 0
    # the reference's reading: casing and trailing words pass, a leading word or markdown does not
    assert {
        r: by[("answer", r)]["reference"] for r in ("correct", "Correct.", "padded", "CORRECT+words")
    } == dict.fromkeys(("correct", "Correct.", "padded", "CORRECT+words"), 1.0)
    assert {by[("answer", r)]["reference"] for r in ("INCORRECT", "incorrect", "bold", "sentence", "empty")} == {0.0}
    # a malformed reply is asked again (ATTEMPTS) before it is graded as the reference grades it
    assert by[("answer", "bold")]["judge_calls"] == 3 and by[("answer", "INCORRECT")]["judge_calls"] == 1
    assert [h["ours"] for h in PINS["headlines"] if h["reply"] in ("CORRECT", "INCORRECT")] == [100.0, 0.0]
