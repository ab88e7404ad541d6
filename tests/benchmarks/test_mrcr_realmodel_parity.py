"""benchmarks/mrcr_realmodel_parity.py (and its mrcr_offline.py) without a server, a model or the reference's packages: the items
it builds (the released layout, read back by our loader), the card's loop over stand-in clients, the
o200k_base cache check, and the per-item comparison and report arithmetic on canned requests.

    pytest -q tests/benchmarks/test_mrcr_realmodel_parity.py

The run itself (vllm serve + SmolLM2 + the card's client) is recorded in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import mrcr_offline as mo
import mrcr_realmodel_parity as mp


def words(messages: list[dict]) -> int:
    """A stand-in count (no tokenizer here): whitespace-separated words of every message."""
    return sum(len(m["content"].split()) for m in messages)


def test_built_items_are_the_released_layout_and_read_back(tmp_path, monkeypatch):
    specs = ((300, 4, False), (500, 1, False), (400, 2, True))
    rows = mo.write_data(tmp_path, words, specs)
    from tasks.mrcr import data

    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    try:
        for needles in mp.NEEDLES:
            items = data.load_items(needles)  # our boundary validation accepts every row
            assert len(items) == len(rows[needles]) == 3
            for it, row, (target, distractors, accented) in zip(items, rows[needles], specs):
                msgs = json.loads(row["prompt"])
                assert list(it.messages) == msgs and it.answer == row["answer"]
                assert row["answer"] == row["random_string_to_prepend"] + msgs[row["desired_msg_index"]]["content"]
                asks = [m["content"].split("User: ")[-1] for m in msgs if m["role"] == "user"][:-1]
                assert len(asks) == needles + distractors and row["total_messages"] == len(msgs)
                needle = msgs[row["desired_msg_index"] - 1]["content"].split("User: ")[-1]
                assert asks.count(needle) == needles  # the needles: one request, asked `needles` times
                which = [i for i, a in enumerate(asks) if a == needle].index((row["desired_msg_index"] - 1) // 2)
                assert f"to the {mo.ordinal(which + 1)} (1 indexed)" in msgs[-1]["content"]
                assert words(msgs) <= target  # as large as whole sentences allow under the target
                assert ("é" in row["prompt"] or "\\u00e9" in row["prompt"]) == accented
    finally:
        data.clear_cache()
    assert mo.write_data(tmp_path / "again", words, specs) == rows  # deterministic


def test_sizing_stops_at_the_last_sentence_count_under_the_target():
    item = mo.sized_item(7, 2, (400, 4, False), words)
    size = words(json.loads(item["prompt"]))
    sentences = json.loads(item["prompt"])[1]["content"].count(".")  # of each piece
    assert mo.build_item(7, 2, sentences, 4, False) == item
    bigger = mo.build_item(7, 2, sentences + 1, 4, False)
    assert size <= 400 < words(json.loads(bigger["prompt"]))
    assert [mo.ordinal(k) for k in (1, 2, 3, 4, 11, 12, 13, 21, 22)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd"
    ]  # fmt: skip


def _stub_reference(monkeypatch, refuse_from: int):
    """openai and tiktoken stand-ins: create() refuses prompts of `refuse_from` words or more with a 400."""
    sent = []

    class APIStatusError(Exception):
        def __init__(self, status_code):
            self.status_code = status_code

    class Completions:
        def create(self, **kw):
            sent.append(kw)
            if words(kw["messages"]) >= refuse_from:
                raise APIStatusError(400)
            msg = types.SimpleNamespace(content="echo " + kw["messages"][-1]["content"][:12])
            return types.SimpleNamespace(choices=[types.SimpleNamespace(message=msg)])

    client = types.SimpleNamespace(chat=types.SimpleNamespace(completions=Completions()))
    monkeypatch.setitem(
        sys.modules, "openai", types.SimpleNamespace(OpenAI=lambda: client, APIStatusError=APIStatusError)
    )
    enc = types.SimpleNamespace(encode=lambda text: text.split())
    monkeypatch.setitem(sys.modules, "tiktoken", types.SimpleNamespace(get_encoding=lambda name: enc))
    return sent


def test_the_card_loop_skips_sends_and_records_refusals(tmp_path, monkeypatch):
    rows = mo.write_data(tmp_path, words, ((200, 4, False), (400, 4, False), (700, 4, False)))
    sizes = [words(json.loads(r["prompt"])) for r in rows[2]]
    sent = _stub_reference(monkeypatch, refuse_from=sizes[1])
    loop = mp.card_loop(tmp_path / "2needle.parquet", "M", sizes[2] - 1, greedy=True)
    assert [x["row"] for x in loop] == [0, 1, 2]
    assert loop[0]["response"].startswith("echo ") and loop[0]["error"] is None
    assert (loop[1]["response"], loop[1]["error"], loop[1]["skipped"]) == (None, "400", False)  # refused, recorded
    assert loop[2]["skipped"] and loop[2]["response"] is None  # over MAX_CONTEXT_WINDOW: not sent
    assert len(sent) == 2 and all(s["model"] == "M" and s["temperature"] == 0.0 for s in sent)
    assert sent[0]["messages"] == json.loads(rows[2][0]["prompt"])
    sent.clear()
    mp.card_loop(tmp_path / "2needle.parquet", "M", 10**6, greedy=False)
    assert len(sent) == 3 and all(set(s) == {"model", "messages"} for s in sent)  # the card's request as it is


def test_the_o200k_cache_is_kept_only_with_tiktokens_hash(tmp_path, monkeypatch):
    import hashlib

    cache = tmp_path / "cache"
    cache.mkdir()
    name = hashlib.sha1(mo.O200K_URL.encode()).hexdigest()
    (cache / name).write_bytes(b"not o200k\n")
    monkeypatch.setitem(sys.modules, "quicktok", None)  # not importable
    with pytest.raises(mo.BenchError, match="quicktok"):
        mo.o200k_cache(cache)
    wrong = types.SimpleNamespace(decode_single_token_bytes=lambda r: b"x")
    monkeypatch.setitem(sys.modules, "quicktok", types.SimpleNamespace(get_encoding=lambda n: wrong))
    monkeypatch.setattr(mo, "O200K_RANKS", 3)
    with pytest.raises(mo.BenchError, match="sha256 differs"):
        mo.o200k_cache(cache)
    data = b"eA== 0\neA== 1\neA== 2\n"  # what the wrong ranks write: taken once its hash is the expected one
    monkeypatch.setattr(mo, "O200K_SHA256", hashlib.sha256(data).hexdigest())
    assert mo.o200k_cache(cache) == cache and (cache / name).read_bytes() == data
    monkeypatch.setitem(sys.modules, "quicktok", None)
    assert mo.o200k_cache(cache) == cache  # a good file is read, nothing rebuilt


def _record(side, messages, status, text):
    reply = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9}}
    body = {"model": "M", "messages": messages}
    return {"side": side, "path": "/v1/chat/completions", "request": body, "status": status, "reply": reply if status == 200 else {"error": "too long"}}  # fmt: skip


def test_items_compared_side_by_side(tmp_path):
    rows = mo.write_data(tmp_path, words, ((150, 4, False), (250, 4, False), (350, 4, False)))
    rows = {2: rows[2]}  # one needle count is enough here
    m = [json.loads(r["prompt"]) for r in rows[2]]
    pre = [r["random_string_to_prepend"] for r in rows[2]]
    records = [
        _record("reference", m[0], 200, pre[0] + "x"),
        _record("reference", m[1], 200, "no prefix"),
        _record("reference", m[2], 400, None),
        _record("ours", m[0], 200, pre[0] + "x"),
        _record("ours", m[1][:-1] + [{"role": "user", "content": m[1][-1]["content"] + " "}], 200, "other"),
    ]
    ref = {"items": {"2:0": {"response": pre[0] + "x", "grade": 0.5, "o200k": 150}, "2:1": {"response": "no prefix", "grade": 0.0, "o200k": 5000}, "2:2": {"response": None, "error": "400", "grade": None, "o200k": 8000}}}  # fmt: skip
    ours = {"records": {"2:0": {"prediction": pre[0] + "x", "score": 0.5, "bin_tokens": 150, "length": 8192}, "2:1": {"prediction": "other", "score": 1.0, "bin_tokens": 5000, "length": 8192}}}  # fmt: skip
    items = mp.per_item(rows, ref, ours, records)
    assert [i["key"] for i in items] == ["2:0", "2:1", "2:2"]
    a, b, c = items
    assert a["same_prompt"] and a["ref_text"] == a["our_text"] == pre[0] + "x"
    assert not b["same_prompt"] and b["our_text"] == "other"  # our request differed by one space
    assert c["ref_status"] == [400] and c["ref_text"] is None and c["our_score"] is None and c["ref_grade"] is None
    for i in items:  # add_server_ids' bookkeeping, without a server
        i.update(same_ids=i["key"] == "2:0", ref_ids_len=1, our_ids_len=1)
    summary = {s["cell"]: s for s in mp.summarize(items)}
    cell = summary["2 needles, 8K"]
    counts = [cell[k] for k in ("n", "ref_sent", "ref_refused", "ref_graded", "ours_scored")]
    assert counts == [3, 3, 1, 2, 2]
    assert (cell["ref"], cell["ours"], cell["both"], cell["diff"]) == (25.0, 75.0, 2, 50.0)
    assert (cell["same_prompt"], cell["same_ids"], cell["same_text"], cell["same_grade"]) == (1, 1, 1, 1)
    assert cell["same_to_budget"] == 1
    assert cell["low"] <= 50.0 <= cell["high"] and summary["**all**"]["n"] == 3
    assert [mp.card_bin(t) for t in (100, 4095, 4096, 8192, 8193, None)] == [8192, 8192, 8192, 8192, 16384, None]


def test_our_output_cut_by_our_budget_counts_as_the_cards_prefix_only():
    def item(ref, ours, finish):
        return {"ref_text": ref, "our_text": ours, "our_finish": finish}

    assert mp.same_to_budget(item("abc", "abc", "stop"))
    assert mp.same_to_budget(item("abcdef", "abc", "length"))  # our 4096 tokens ended it; the card went on
    assert not mp.same_to_budget(item("abcdef", "abc", "stop"))  # ours stopped by itself: a different output
    assert not mp.same_to_budget(item("abxdef", "abc", "length"))
    assert not mp.same_to_budget(item(None, "abc", "length")) and not mp.same_to_budget(item("abc", None, None))


def test_requests_are_matched_to_items_by_their_random_string():
    prefixes = {"2:0": "abcDEF1234", "2:1": "zzzYYY9876"}
    ask = [{"role": "user", "content": "Prepend zzzYYY9876 to the 1st (1 indexed) poem about owls. Do not..."}]
    assert mp.item_key(ask, prefixes) == "2:1"
    assert mp.item_key([{"role": "user", "content": "no such string"}], prefixes) is None
    assert mp.item_key(None, prefixes) is None
    a = mp.parse_args(["--nemo-skills", "S", "--model", "M"])
    assert (a.decoding, a.items, mp.run_tag(a)) == ("greedy", [0, 1, 2, 3, 4], "greedy-float32-8192")
    a = mp.parse_args(["--nemo-skills", "S", "--model", "M", "--items", "4,2", "--dtype", "bfloat16"])
    assert (a.items, mp.run_tag(a)) == ([2, 4], "greedy-bfloat16-8192-i24")
    for bad in ("5", "x", ""):
        with pytest.raises(SystemExit):
            mp.parse_args(["--nemo-skills", "S", "--model", "M", "--items", bad])
    assert mp.run_tag(mp.parse_args(["--nemo-skills", "S", "--model", "M", "--decoding", "reference"])) == (
        "reference-float32-8192"
    )
