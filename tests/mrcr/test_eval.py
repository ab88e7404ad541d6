"""`harness eval --suite mrcr` end to end on the tiny Llama (the real hf backend), offline on the
fixtures: the card's bins as lengths, the items left out counted, the headline per needle count."""

from __future__ import annotations

import json

from harness.cli import main


def _eval(ckpt, out, *extra):
    return main(["eval", "--ckpts", str(ckpt), "--out", str(out), "--no-progress", "--cache-dir", "none", *extra])


def _records(out):
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]


def test_reference_protocol_end_to_end(tiny_chat_llama, mrcr_data, stand_in_counter, tmp_path, capsys):
    out = tmp_path / "ref"
    args = ["--suite", "mrcr", "--chat", "--mrcr-data", str(mrcr_data), "--max-new-tokens", "4", "--max-length", "608"]
    assert _eval(tiny_chat_llama, out, *args) == 0
    captured = capsys.readouterr()
    assert "items do not fit the 608-token window (prompt + 4 to generate" in captured.err
    assert "counting o200k_base tokens of 8 2needle.parquet" in captured.err
    recs = _records(out)
    assert {r["task"] for r in recs} == {"mrcr_2needle", "mrcr_4needle"}  # no 8-needle item fits 4700
    for r in recs:
        meta = r["metadata"]
        assert r["length"] == 8192 and meta["bin"] == "[4096, 8192]" and meta["protocol"] == "reference"
        assert r["num_tokens"] + 4 <= 608 and 0.0 <= r["score"] <= 1.0 and meta["max_new_tokens_default"] == 4096
        assert meta["bin_items"] - meta["too_long"] == sum(1 for x in recs if x["task"] == r["task"])
    assert any(r["metadata"]["too_long"] for r in recs)
    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["mrcr"]
    assert suite["protocol"] == "reference"
    assert set(suite["headline"]["groups"]) == {"2 needles", "4 needles", "8 needles"}
    # a task none of whose items fits: listed as unavailable, with the count
    assert suite["unavailable"] == {
        "mrcr_8needle": "none of the 4 items of 8 needles, bin [4096, 8192] fits the 608-token window with 4 "
        "to generate: a longer context or --max-length reaches it"
    }
    assert suite["evaluated"] == ["mrcr_2needle", "mrcr_4needle"] and suite["lengths"] == [8192]


def test_the_runs_budget_decides_which_items_fit(tiny_chat_llama, mrcr_data, stand_in_counter, tmp_path, capsys):
    """Items are kept by prompt + the run's tokens to generate (--max-new-tokens), not the card's
    4096: a window of 4700 holds every fixture item with 4 to generate (with 4096, only the prompts
    of 604 tokens or fewer, while 4 were generated). The kept rows are the samples' data, so the
    budget is in their dataset hash."""
    common = ["--suite", "mrcr", "--chat", "--mrcr-data", str(mrcr_data), "--max-length", "4700"]
    assert _eval(tiny_chat_llama, tmp_path / "low", *common, "--max-new-tokens", "4") == 0
    assert "do not fit" not in capsys.readouterr().err
    recs = _records(tmp_path / "low")
    assert {r["task"] for r in recs} == {"mrcr_2needle", "mrcr_4needle", "mrcr_8needle"}
    assert all(r["metadata"]["too_long"] == 0 and r["num_tokens"] + 4 <= 4700 for r in recs)
    assert max(r["num_tokens"] for r in recs) > 4700 - 4096  # an item the card's budget would leave out
    assert _eval(tiny_chat_llama, tmp_path / "low5", *common, "--max-new-tokens", "5", "--tasks", "mrcr_2needle") == 0
    hashes = {r["dataset_hash"] for r in recs if r["task"] == "mrcr_2needle"}
    assert len(hashes) == 1 and hashes.isdisjoint(r["dataset_hash"] for r in _records(tmp_path / "low5"))


def test_completion_protocol_for_a_base_checkpoint(tiny_llama_dir, mrcr_data, stand_in_counter, tmp_path):
    out = tmp_path / "base"
    args = ["--tasks", "mrcr_8needle", "--protocol", "completion", "--mrcr-data", str(mrcr_data)]
    assert _eval(tiny_llama_dir, out, *args, "--max-new-tokens", "4", "--samples", "2") == 0
    recs = _records(out)
    assert len(recs) == 2 and all(r["metadata"]["protocol"] == "completion" for r in recs)
    assert json.loads((out / "results.json").read_text())["provenance"]["protocol"] == "completion"


def test_reference_protocol_needs_the_chat_template(tiny_chat_llama, mrcr_data, stand_in_counter, tmp_path, capsys):
    """Without --chat no chat template is loaded: one line says to pass it (or to use the completion
    protocol), before any model is loaded."""
    args = ["--tasks", "mrcr_2needle", "--mrcr-data", str(mrcr_data), "--max-new-tokens", "4"]
    assert _eval(tiny_chat_llama, tmp_path / "x", *args) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("MRCR:")]
    assert len(err) == 1 and "pass --chat for a chat model, or --protocol completion" in err[0]


def test_generate_writes_the_completion_samples(bpe_tokenizer_dir, mrcr_data, stand_in_counter, tmp_path):
    """`harness generate --protocol completion` writes one bin's samples, every item of it (no window)."""
    out = tmp_path / "gen"
    args = ["generate", "--tasks", "mrcr_4needle", "--protocol", "completion", "--lengths", "8k,16k"]
    assert main([*args, "--tokenizer", str(bpe_tokenizer_dir), "--mrcr-data", str(mrcr_data), "--out", str(out)]) == 0
    made = {
        L: [json.loads(x) for x in (out / "mrcr_4needle" / f"{L}.jsonl").read_text().splitlines()]
        for L in (8192, 16384)
    }
    assert [len(v) for v in made.values()] == [4, 2]  # the fixture's 4-needle bins under the stand-in counter
    for s in (s for v in made.values() for s in v):  # (one fixture item opens with a system message)
        assert s["answer_prefix"] == "\n\nAssistant:" and s["input"].startswith(("User: ", "System: "))
        assert s["metadata"]["protocol"] == "completion" and s["metadata"]["window"] is None
