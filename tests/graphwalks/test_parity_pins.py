"""GraphWalks parity with lm-eval's own code, pinned: benchmarks/graphwalks_parity.py ran lm-eval's
graphwalks task (EleutherAI/lm-evaluation-harness lm_eval/tasks/graphwalks at the commit in the pins'
_source, loaded by lm_eval's TaskManager) on fixtures/ and wrote its prompts' hashes, its f1 and
flexible_f1 per canned response and its group aggregate to parity_pins.json; here ours are
recomputed and compared, without the checkout. Re-make them with `python
benchmarks/graphwalks_parity.py --reference CHECKOUT --commit SHA --write-pins tests/graphwalks/parity_pins.json`."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from tasks.graphwalks import data

HERE = Path(__file__).parent
PINS = json.loads((HERE / "parity_pins.json").read_text(encoding="utf-8"))
sys.path.insert(0, str(HERE.parents[1]))


@pytest.fixture
def ours(monkeypatch, bpe_tokenizer):
    from benchmarks import graphwalks_parity as parity

    monkeypatch.setenv(data.ENV_VAR, str(HERE / "fixtures"))
    data.clear_cache()
    yield parity.our_samples(bpe_tokenizer)
    data.clear_cache()


def test_pinned_run_had_no_mismatch():
    t = PINS["totals"]
    assert (t["prompts_compared"], t["scores_compared"], t["headlines_compared"]) == (13, 442, 34)
    assert (t["prompt_mismatches"], t["score_mismatches"], t["headline_mismatches"]) == (0, 0, 0)


def test_prompts_and_budget_match_the_reference(ours):
    assert len(ours) == len(PINS["cases"])  # every released row, and no other
    for case in PINS["cases"]:
        for _task, s in ours[(case["set"], case["row"])].values():
            assert hashlib.sha256(s.prompt.encode()).hexdigest() == case["prompt_sha256"], case
            assert s.max_new_tokens == case["max_gen_toks"] == 16384


def test_scores_match_the_reference(ours):
    """f1 (last line) and flexible_f1 on every canned response of every row, equal as floats."""
    seen = set()
    for p in PINS["scores"]:
        pair = sorted(ours[(p["set"], p["row"])].values(), key=lambda ts: ts[0].flexible)
        assert [t.score(p["response"], s) for t, s in pair] == [p["f1"], p["flexible_f1"]], p
        seen.add(p["case"])
    from benchmarks.graphwalks_parity import CASES

    assert seen == set(CASES)
    # the lm-eval 3377 pitfall is among them: an answer above the last line is 0 strictly, whole flexibly
    moved = [p for p in PINS["scores"] if p["case"] == "not_last_line" and p["flexible_f1"] > 0]
    assert moved and all(p["f1"] == 0.0 and p["flexible_f1"] == 1.0 for p in moved)


def test_headline_matches_the_group_aggregate(ours):
    """Our Overall (the samples of both sets pooled) is lm-eval's weight_by_size group value."""
    from benchmarks.graphwalks_parity import our_headline

    mine = []
    for p in PINS["scores"]:
        pair = sorted(ours[(p["set"], p["row"])].values(), key=lambda ts: ts[0].flexible)
        f1, flex = (t.score(p["response"], s) for t, s in pair)
        mine.append({"set": p["set"], "case": p["case"], "f1": f1, "flexible_f1": flex})
    for h in PINS["headlines"]:
        assert our_headline(mine, h["case"], h["metric"]) == pytest.approx(h["reference"], abs=1e-12), h
