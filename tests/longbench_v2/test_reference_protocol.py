"""LongBench v2 under the reference protocol: pred.py's 120,000-token cap, brought down to what a
shorter context allows; always the chat route; result.py's six columns as the headline."""

from __future__ import annotations

import json

import pytest

from tasks.longbench_v2 import data
from tasks.registry import get_task, suite_headline

from .helpers import make_items

ITEMS = make_items()
LONG_TEXT = "".join(f"w{i % 10} " for i in range(70000))  # 210,000 bytes: a byte tokenizer's tokens


@pytest.fixture
def long_item(tmp_path, monkeypatch):
    items = [dict(ITEMS[0], context=LONG_TEXT)]
    (tmp_path / "data.json").write_text(json.dumps(items))
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    yield items[0]
    data.clear_cache()


def _task(protocol: str = "reference"):
    task = get_task(f"longbench_v2_{ITEMS[0]['difficulty']}_{ITEMS[0]['length']}")
    task.set_protocol(protocol)
    return task


def test_reference_caps_at_120000_on_a_128k_model(long_item, byte_tokenizer):
    task = _task()
    (length,) = task.task_lengths(None, 131072, None)
    s = task.sample(length, 0, 42, byte_tokenizer)
    ids = byte_tokenizer(task.sample(0, 0, 42, byte_tokenizer).prompt)["input_ids"]
    assert length == 131072 and s.metadata["truncation"]["max_length"] == 120000
    assert s.prompt == byte_tokenizer.decode(ids[:60000] + ids[-60000:], skip_special_tokens=True)
    assert s.num_tokens == 120000 and s.metadata["protocol"] == "reference" and s.version == "2"
    exact = _task("exact-length")
    assert exact.sample(length, 0, 42, byte_tokenizer).metadata["truncation"]["max_length"] == 131072 - 128


def test_a_shorter_context_brings_the_cap_down(long_item, byte_tokenizer):
    task = _task()
    # the loop fits a chat-wrapped sample to the length minus the template's tokens (say 30)
    s = task.sample(4096 - 30, 0, 42, byte_tokenizer)
    assert s.metadata["truncation"]["max_length"] == 4096 - 30 - 128 and s.num_tokens <= 3938


def test_chat_route_always():
    for variant in ("", "cot_", "nocontext_", "untruncated_"):
        task = get_task(f"longbench_v2_{variant}hard_long")
        assert task.protocols == ("reference", "exact-length") and task.uses_chat_template()
        assert task.fit_chat_template


@pytest.mark.parametrize("suite", ["longbench-v2", "longbench-v2-cot", "longbench-v2-nocontext"])
def test_headline_is_result_pys_columns(suite):
    headline = suite_headline(suite)
    assert headline is not None and headline.weighting == "samples"
    assert list(headline.groups) == ["Overall", "Easy", "Hard", "Short", "Medium", "Long"]
    assert all(len(cats) == 1 for cats in headline.groups.values())
    assert len(headline.groups["Overall"]["Overall"]) == 6 and len(headline.groups["Easy"]["Easy"]) == 3


@pytest.mark.parametrize("protocol", ["reference", "exact-length"])
def test_untruncated_keeps_whole_what_the_120000_cap_cuts(long_item, byte_tokenizer, protocol):
    """THUDM/LongBench issue 93: the published cap cuts a 210,000-token item on a 256K model; the
    untruncated suite's task (pred.py with max_len at the context) sends it whole, and cuts only an
    item over the context, by pred.py's rule, saying so in its record."""
    d, length_class = ITEMS[0]["difficulty"], ITEMS[0]["length"]
    capped, whole = _task(), get_task(f"longbench_v2_untruncated_{d}_{length_class}")
    whole.set_protocol(protocol)
    assert capped.sample(262144, 0, 42, byte_tokenizer).metadata["truncation"]["truncated"]
    s = whole.sample(262144, 0, 42, byte_tokenizer)
    ids = byte_tokenizer(whole.sample(0, 0, 42, byte_tokenizer).prompt)["input_ids"]
    assert not s.metadata["truncation"]["truncated"] and s.num_tokens == len(ids) > 200000
    assert s.prompt == capped.sample(0, 0, 42, byte_tokenizer).prompt  # pred.py's 0-shot question
    small = whole.sample(131072, 0, 42, byte_tokenizer)  # over a 128K context: cut at it, not at 120000
    assert small.metadata["truncation"] == {
        "rule": "middle",
        "max_length": 131072 - 128,
        "original_tokens": len(ids),
        "truncated": True,
        "refit_tokens": 0,
    }
    assert suite_headline("longbench-v2-untruncated").groups.keys() == suite_headline("longbench-v2").groups.keys()
