"""LongBench v1 parity with the reference's own code, pinned: benchmarks/longbench_parity.py ran pred.py's
get_pred and eval.py's scorer (THUDM/LongBench 2e00731) on the fixture files with the tests' BPE
tokenizer and wrote their results to parity_pins.json; here ours are recomputed and compared, without
the checkout. Re-make the pins with `python benchmarks/longbench_parity.py --reference CHECKOUT
--write-pins tests/longbench/parity_pins.json` (the fixture files: `python -m tests.longbench.fixture_data`)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from tasks.longbench import data

from . import fixture_data

PINS = json.loads((Path(__file__).parent / "parity_pins.json").read_text(encoding="utf-8"))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fixture_dir():
    data.set_data_dir(fixture_data.FOLDER)
    yield fixture_data.FOLDER
    data.set_data_dir(None)


def test_pinned_run_had_no_mismatch():
    totals = PINS["totals"]
    assert totals["prompts_compared"] == 188 and totals["prompts_truncated"] == 83
    assert totals["scores_compared"] == 350
    assert {k: v for k, v in totals.items() if k.endswith("mismatches")} == dict.fromkeys(
        (
            "prompt_mismatches",
            "chat_mismatches",
            "stop_mismatches",
            "max_new_tokens_mismatches",
            "metric_mismatches",
            "budget_rule_mismatches",
        ),
        0,
    )
    # pred.py's model2maxlen, for every model whose name gives its context
    assert {m: v["reference"] for m, v in PINS["budget_rule"].items()}["llama2-7b-chat-4k"] == 3500
    assert all(v["reference"] == v["ours"] for v in PINS["budget_rule"].values())


def test_fixture_files_are_the_generators():
    from tasks.longbench.prompts import DATASETS

    for task in DATASETS:
        lines = (fixture_data.FOLDER / f"{task}.jsonl").read_text(encoding="utf-8").splitlines()
        assert [json.loads(x) for x in lines] == fixture_data.records(task)


def test_prompts_chat_and_stop_rule_match_the_reference(fixture_dir, bpe_tokenizer):
    sys.path.insert(0, str(ROOT))
    from benchmarks.longbench_parity import our_prompts

    cases = PINS["cases"]
    runs = {(c["task"], c["context"], c["max_length"]) for c in cases}
    checked = 0
    for task, context, max_length in sorted(runs, key=str):
        want = sorted(
            (c for c in cases if (c["task"], c["context"], c["max_length"]) == (task, context, max_length)),
            key=lambda c: c["index"],
        )
        length, ours = our_prompts(task, len(want), context, max_length, bpe_tokenizer)
        for c, o in zip(want, ours, strict=True):
            assert length == c["budget"], (task, context, max_length)
            got = (hashlib.sha256(o["prompt"].encode()).hexdigest(), o["chat"], o["stop"], o["max_new_tokens"])
            assert got == (c["prompt_sha256"], c["chat"], c["stop"], c["max_new_tokens"]), (task, length, c["index"])
            checked += 1
    assert checked == PINS["totals"]["prompts_compared"]


def test_scores_match_eval_py(fixture_dir, bpe_tokenizer):
    from tasks.registry import get_task

    by_task: dict[str, list[dict]] = {}
    for m in PINS["metrics"]:
        by_task.setdefault(m["task"], []).append(m)
    for task, ms in by_task.items():
        t = get_task(task)
        samples = [t.sample(3500, i, 42, bpe_tokenizer) for i in range(t.num_samples_available(0) or 0)]
        preds = [(s, p) for s in samples for p in fixture_data.predictions(dict(data.load_records(task)[s.index]))]
        per_sample, whole = ms[:-1], ms[-1]
        assert [m["prediction"] for m in per_sample] == [p for _, p in preds]
        mine = [t.score(p, s) for s, p in preds]
        assert [round(100 * x, 2) for x in mine] == [m["reference"] for m in per_sample], task
        assert round(100 * sum(mine) / len(mine), 2) == whole["reference"], task
