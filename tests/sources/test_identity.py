"""A record's identity includes every setting that changes its prediction (harness/core/identity.py).

Changing any such setting and evaluating into the same --out computes new records; results.json is
built from the records of the current command only and states the settings they were computed with.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.identity import NEUTRAL_SETTINGS, check_claims, record_key, settings_id
from harness.pipeline.store import read_store

BASE = ["--tasks", "vt", "--lengths", "1k", "--samples", "2", "--no-progress", "--cache-dir", "none"]


def _eval(model, out: Path, *extra: str) -> int:
    return main(["eval", "--ckpts", str(model), *BASE, "--out", str(out), *extra])


def test_settings_id_covers_everything_but_the_neutral_fields():
    s = {"backend": "hf", "dtype": "auto", "batch_size": 8, "rope_theta": None, "truncation": "none"}
    sid = settings_id(s)
    assert settings_id({**s, "truncation": "middle"}) == sid  # neutral: set by the task
    assert settings_id({k: v for k, v in s.items() if k != "rope_theta"}) == sid  # None == not recorded
    assert settings_id(dict(reversed(list(s.items())))) == sid  # key order is not identity
    for key, value in (("dtype", "bfloat16"), ("batch_size", 1), ("rope_theta", 1.0), ("anything_new", 3)):
        assert settings_id({**s, key: value}) != sid, key
    assert settings_id({**s, "judge": {"model": "x"}}) != sid  # a field nobody declared neutral joins identity
    assert set(NEUTRAL_SETTINGS) == {"truncation"}


def test_record_key_has_the_dataset_hash_then_the_settings_id_last():
    rec = {
        "checkpoint": {"fingerprint": "f"},
        "task": "t",
        "task_version": "1",
        "length": 1024,
        "index": 0,
        "seed": 42,
        "settings": {"dtype": "auto"},
    }
    # a record without a dataset hash (a task that reads no data) keys as ""
    assert record_key(rec) == ("f", "t", "1", 1024, 0, 42, "", settings_id({"dtype": "auto"}))
    # the data's hash is part of the identity: changed data is never answered by old records
    assert record_key({**rec, "dataset_hash": "abc"}) != record_key({**rec, "dataset_hash": "abd"})


def test_check_claims_refuses_a_provenance_its_records_contradict():
    rec = {"task": "t", "length": 1, "index": 0, "settings": {"dtype": "auto", "max_model_len": 2048}}
    check_claims([rec], {"dtype": "auto", "max_model_len": 2048, "answer_prefix": True})
    with pytest.raises(AssertionError, match="dtype"):
        check_claims([rec], {"dtype": "bfloat16"})
    with pytest.raises(AssertionError, match="answer_prefix"):
        check_claims([rec], {"answer_prefix": False})
    with pytest.raises(AssertionError, match="context"):
        check_claims([rec], {"max_model_len": [4096]})


@pytest.fixture(scope="module")
def base_store(tiny_llama_dir, chat_model_dir, tmp_path_factory):
    """Stores of the default command: plain (tiny_llama_dir) and --chat (chat_model_dir)."""
    root = tmp_path_factory.mktemp("base")
    assert _eval(tiny_llama_dir, root / "plain") == 0
    assert _eval(chat_model_dir, root / "chat", "--chat") == 0
    return root


# (flags, results.json provenance key, the value it must then state); each is one setting changed
CHANGES = [
    (["--rope-theta", "5000"], "rope_theta", 5000.0),
    (
        ["--rope-scaling", '{"rope_type": "linear", "factor": 2.0}'],
        "rope_scaling",
        {"rope_type": "linear", "factor": 2.0},
    ),
    (["--dtype", "bfloat16"], "dtype", "bfloat16"),
    (["--max-model-len", "4096"], "max_model_len", 4096),
    (["--batch-size", "1"], "batch_size", 1),
    (["--no-answer-prefix"], "answer_prefix", False),
    (["--max-new-tokens", "7"], "max_new_tokens", {"*": 7}),
    (["--strip-thinking"], "strip_thinking", True),
]
CHAT_CHANGES = [
    (["--system-prompt", "Be brief."], "system_prompt", "Be brief."),
    ([], "template", "none"),  # the chat model without --chat: the other template
]


def _check_changed(out: Path, key: str, value, before: int) -> None:
    records = read_store(out / "samples.jsonl")[1]
    assert len(records) == 2 * before, "a changed setting computes new records"
    results = json.loads((out / "results.json").read_text())
    assert results["provenance"][key] == value
    cell = results["suites"]["custom"]["per_task"]["vt"]["1024"]
    assert cell["num_samples"] == 2  # only this command's records, not old and new averaged together
    new = records[before:]
    check_claims(new, results["provenance"])
    with pytest.raises(AssertionError):
        check_claims(records[:before], results["provenance"])  # the old records would contradict it
    # `harness report samples.jsonl` re-aggregates the last-written settings only
    from harness.pipeline.reaggregate import results_from_store

    again = results_from_store(out / "samples.jsonl")
    assert again["suites"]["custom"]["per_task"]["vt"]["1024"]["num_samples"] == 2
    if key in again["provenance"]:
        assert again["provenance"][key] == value


@pytest.mark.parametrize(("flags", "key", "value"), CHANGES, ids=[c[1] for c in CHANGES])
def test_each_setting_changes_the_identity(flags, key, value, base_store, tiny_llama_dir, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(base_store / "plain", out)
    before = len(read_store(out / "samples.jsonl")[1])
    assert _eval(tiny_llama_dir, out, *flags) == 0
    _check_changed(out, key, value, before)


@pytest.mark.parametrize(("flags", "key", "value"), CHAT_CHANGES, ids=[c[1] for c in CHAT_CHANGES])
def test_each_chat_setting_changes_the_identity(flags, key, value, base_store, chat_model_dir, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(base_store / "chat", out)
    before = len(read_store(out / "samples.jsonl")[1])
    assert _eval(chat_model_dir, out, *(["--chat", *flags] if flags else [])) == 0
    _check_changed(out, key, value, before)


def test_the_chat_template_text_is_part_of_the_identity(base_store, chat_model_dir, tmp_path):
    from transformers import AutoTokenizer

    model = tmp_path / "other-template"
    shutil.copytree(chat_model_dir, model)
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = tok.chat_template.replace("<|end|>", "<|eot|>")  # same tokens, another template
    tok.save_pretrained(model)
    out = tmp_path / "out"
    shutil.copytree(base_store / "chat", out)
    before = read_store(out / "samples.jsonl")[1]
    assert _eval(model, out, "--chat") == 0
    after = read_store(out / "samples.jsonl")[1]
    assert len(after) == 2 * len(before)
    assert after[-1]["settings"]["chat_template"] != before[0]["settings"]["chat_template"]


def test_the_same_command_again_computes_nothing_and_old_stores_keep_their_identity(
    base_store, tiny_llama_dir, tmp_path
):
    """A store written before chat_template/tensor_parallel_size were recorded (its records lack
    them) is read with the same identity: the same command resumes, computing nothing."""
    out = tmp_path / "out"
    shutil.copytree(base_store / "plain", out)
    path = out / "samples.jsonl"
    header, *lines = path.read_text().splitlines()
    old = []
    for line in lines:
        rec = json.loads(line)
        for field in ("chat_template", "tensor_parallel_size"):
            rec["settings"].pop(field, None)
        old.append(json.dumps(rec))
    path.write_text("\n".join([header, *old]) + "\n")
    before = path.read_text()
    assert _eval(tiny_llama_dir, out) == 0
    assert path.read_text() == before  # nothing recomputed, nothing appended
    results = json.loads((out / "results.json").read_text())
    assert results["suites"]["custom"]["per_task"]["vt"]["1024"]["num_samples"] == 2


def test_a_served_model_change_computes_new_records(tiny_llama_dir, tmp_path):
    from tiny_server import TinyServer

    out = tmp_path / "out"
    for name in ("model-a", "model-b"):
        with TinyServer(str(tiny_llama_dir), name=name) as server:
            argv = ["eval", "--backend", "openai", "--base-url", server.url, "--model", name]
            argv += ["--tokenizer", str(tiny_llama_dir), *BASE, "--out", str(out)]
            assert main(argv) == 0
        results = json.loads((out / "results.json").read_text())
        assert results["provenance"]["endpoint"]["model"] == name
        assert results["provenance"]["batch_size"] is None  # the server batches; --batch-size is not claimed
        assert results["suites"]["custom"]["per_task"]["vt"]["1024"]["num_samples"] == 2
    records = read_store(out / "samples.jsonl")[1]
    assert len(records) == 4 and {r["settings"]["endpoint"]["model"] for r in records} == {"model-a", "model-b"}
