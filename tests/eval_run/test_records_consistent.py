"""What harness eval writes is never reported as contradicting itself (harness/pipeline/record_checks.py):
real tiny runs of the toy and RULER tasks, plain and chat-wrapped (a chat template's tokens come
out of each length, so a prompt ends closest to its budget there), read back for aggregation."""

from __future__ import annotations

import json
import shutil

import toytasks  # noqa: F401  (registers the toy tasks and suites: their records are checked too)

from harness.cli import main
from harness.pipeline.reaggregate import results_from_store
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.store import read_store
from tasks.registry import all_suites

CHAT = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _eval(ckpt, out, *extra: str) -> None:
    argv = ["eval", "--ckpts", str(ckpt), "--out", str(out), "--no-progress", "--cache-dir", "none"]
    assert main([*argv, "--samples", "2", *extra]) == 0


def assert_consistent(out) -> list[dict]:
    """The run's records: none reported, and none left out of the re-aggregated results."""
    _, records = read_store(out / "samples.jsonl")
    assert records and split_inconsistent(records) == (records, None)
    assert "inconsistent_records" not in results_from_store(out / "samples.jsonl", suite_tasks=all_suites())
    return records


def test_toy_and_ruler_records_are_consistent(ckpt_series, tmp_path):
    ckpt = ckpt_series / "ckpt-10"
    _eval(ckpt, tmp_path / "toy", "--suite", "toy", "--lengths", "512,1k")  # a registry suite's label
    assert {r["suite"] for r in assert_consistent(tmp_path / "toy")} == {"toy"}
    _eval(ckpt, tmp_path / "mixed", "--tasks", "toy_choice,vt,niah_single_1,cwe,fwe", "--lengths", "1k")
    records = assert_consistent(tmp_path / "mixed")
    assert {(r["task"], r["length"]) for r in records} >= {("toy_choice", 0), ("vt", 1024)}


def test_chat_wrapped_ruler_records_are_consistent(ckpt_series, tmp_path):
    ckpt = tmp_path / "ckpt-10"
    shutil.copytree(ckpt_series / "ckpt-10", ckpt)
    config = json.loads((ckpt / "tokenizer_config.json").read_text())
    (ckpt / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": CHAT}))
    tasks = "vt,niah_single_1,niah_multikey_2,toy_digits"
    _eval(ckpt, tmp_path / "chat", "--tasks", tasks, "--lengths", "1k,2k", "--chat-template")
    records = assert_consistent(tmp_path / "chat")
    assert all(r["metadata"].get("chat_template_tokens") for r in records)
