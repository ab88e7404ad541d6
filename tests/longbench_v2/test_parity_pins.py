"""LongBench v2 parity with the reference's own code, pinned: benchmarks/longbench_v2_parity.py ran
pred.py's get_pred (a recording client in place of the server) and result.py (THUDM/LongBench 2e00731)
on fixtures/data.json with the tests' BPE tokenizer and wrote their results to parity_pins.json; here
ours are recomputed and compared, without the checkout. Re-make them with `python
benchmarks/longbench_v2_parity.py --reference CHECKOUT --write-pins tests/longbench_v2/parity_pins.json`."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from tasks.longbench_v2 import data

from .helpers import make_items

HERE = Path(__file__).parent
PINS = json.loads((HERE / "parity_pins.json").read_text(encoding="utf-8"))
sys.path.insert(0, str(HERE.parents[1]))


@pytest.fixture
def fixture_data(monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(HERE / "fixtures" / "data.json"))
    data.clear_cache()
    yield list(data.load_items())
    data.clear_cache()


def test_pinned_run_had_no_mismatch():
    t = PINS["totals"]
    assert (t["prompts_compared"], t["prompts_truncated"], t["scores_compared"], t["headlines_compared"]) == (
        99,
        50,
        79,
        54,
    )
    assert t["reference_over_context"] == 2 and t["dropped_by_reference"] == 11
    assert [v for k, v in t.items() if k.endswith("mismatches")] == [0] * 5


def test_fixture_file_is_the_helpers():
    assert json.loads((HERE / "fixtures" / "data.json").read_text(encoding="utf-8")) == make_items()


def test_prompts_and_scores_match_the_reference(fixture_data, bpe_tokenizer):
    from benchmarks import longbench_v2_parity as parity
    from tasks.longbench_v2 import tasks as v2_tasks

    ids = [it["_id"] for it in fixture_data]
    checked = scored = 0
    for variant, cap in parity.RUNS:
        v2_tasks.REFERENCE_CAP = parity.SCALED if cap == -parity.SCALED else 120000
        try:
            ours = dict(zip(ids, parity.our_samples(fixture_data, variant, cap, bpe_tokenizer)))
        finally:
            v2_tasks.REFERENCE_CAP = 120000
        for c in (c for c in PINS["cases"] if (c["variant"], c["cap"]) == (variant, cap)):
            task, s = ours[c["id"]]
            if c["step"] == 1:
                k = ids.index(c["id"])
                s = task.follow_up(s, parity.reasoning(k))
            assert c["role"] == "user" and task.uses_chat_template() and c["max_new_tokens"] == s.max_new_tokens
            if not c["over_context"]:
                assert hashlib.sha256(s.prompt.encode()).hexdigest() == c["prompt_sha256"], (variant, cap, c["id"])
            checked += 1
        for p in (p for p in PINS["scores"] if (p["variant"], p["cap"]) == (variant, cap)):
            task, s = ours[p["id"]]
            mine = task.score(p["response"], s) if p["response"] is not None else 0.0
            if p["reference"] is not None:  # None: pred.py dropped the item (an empty response)
                assert mine == float(p["reference"]), (variant, cap, p["id"])
                scored += 1
    assert (checked, scored) == (PINS["totals"]["prompts_compared"], PINS["totals"]["scores_compared"])


def test_headline_groups_are_result_pys_columns(fixture_data):
    """Pooled over the items pred.py kept, our Headline groups give result.py's numbers."""
    from tasks.longbench_v2.tasks import TASKS, suite_name
    from tasks.registry import suite_headline

    for variant, cap in {(h["variant"], h["cap"]) for h in PINS["headlines"]}:
        headline = suite_headline(suite_name(variant))
        assert headline is not None and headline.weighting == "samples"
        kept = {p["id"]: p["reference"] for p in PINS["scores"] if (p["variant"], p["cap"]) == (variant, cap)}
        for h in (h for h in PINS["headlines"] if (h["variant"], h["cap"]) == (variant, cap)):
            (names,) = headline.groups[h["group"]].values()
            cells = {(TASKS[n].difficulty, TASKS[n].length_class) for n in names}
            vals = [
                kept[it["_id"]]
                for it in fixture_data
                if (it["difficulty"], it["length"]) in cells and kept.get(it["_id"]) is not None
            ]
            assert round(100 * sum(vals) / len(vals), 1) == h["reference"], (variant, cap, h["group"])
