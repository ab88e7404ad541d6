"""Instruct / reasoning controls (harness/pipeline/reasoning.py): every backend; here through the hf one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import UserError
from harness.core.identity import record_key, settings_id
from harness.pipeline.reasoning import Options, parse_max_new_tokens, strip_thinking
from harness.pipeline.store import read_store


@pytest.mark.parametrize(
    "raw, answer",
    [
        ("no thinking here", "no thinking here"),
        ("<think>the needle is 123? no, 456</think> 456", "456"),
        ("<think>a</think>x<think>b</think> y", "x y"),
        ("the template opened it</think>\n\n789", "789"),  # <think> was written by the chat template
        ("<think>ran out of tokens while thinking about 123", ""),  # no answer at all
        ("1</think>2</think> 3", "3"),
    ],
)
def test_strip_thinking(raw, answer):
    assert strip_thinking(raw) == answer


def test_parse_max_new_tokens():
    assert parse_max_new_tokens(None) == {}
    assert parse_max_new_tokens("256") == {"*": 256}
    assert parse_max_new_tokens("512, qa_1=1024,vt=64") == {"*": 512, "qa_1": 1024, "vt": 64}
    for bad, why in (("0", "at least 1"), ("vt=x", "not a whole number"), ("vt=1,vt=2", "twice"), ("1,,2", "empty")):
        with pytest.raises(UserError, match=why):
            parse_max_new_tokens(bad)
    assert Options(max_new_tokens={"*": 9, "vt": 3}).tokens_for("vt", 30) == 3
    assert Options(max_new_tokens={"*": 9}).tokens_for("cwe", 120) == 9
    assert Options().tokens_for("cwe", 120) == 120


def test_each_control_changes_the_identity_and_defaults_keep_it():
    def ident(
        o: Options,
    ) -> str:  # the record settings' identity with these controls (as harness.pipeline.evaluate builds them)
        base = {"backend": "hf", "dtype": "auto"}
        return settings_id({**base, "options": o.non_default()} if o.non_default() else base)

    assert ident(Options()) == settings_id({"backend": "hf", "dtype": "auto"})
    ids = {
        ident(o)
        for o in (
            Options(),
            Options(answer_prefix=False),
            Options(max_new_tokens={"*": 64}),
            Options(max_new_tokens={"*": 65}),
            Options(system_prompt=""),
            Options(system_prompt="Be brief."),
            Options(strip_thinking=True),
            Options(answer_prefix=False, strip_thinking=True),
        )
    }
    assert len(ids) == 8


def _eval(ckpt: Path, out: Path, *extra: str) -> int:
    argv = ["eval", "--ckpts", str(ckpt), "--tasks", "niah_single_1,vt", "--lengths", "1k", "--samples", "1"]
    return main([*argv, "--out", str(out), "--no-progress", "--cache-dir", "none", *extra])


def test_controls_are_run_settings_recorded_and_shown(tiny_llama_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert _eval(tiny_llama_dir, out) == 0
    default = {r["task"]: r for r in read_store(out / "samples.jsonl")[1]}
    assert all("options" not in r["settings"] for r in default.values())
    capsys.readouterr()

    flags = ["--no-answer-prefix", "--max-new-tokens", "vt=5", "--strip-thinking"]
    assert _eval(tiny_llama_dir, out, *flags) == 0
    table = capsys.readouterr().out
    assert "no answer prefix · max_new_tokens vt=5 · strip thinking" in table
    records = read_store(out / "samples.jsonl")[1]
    assert len(records) == 4  # nothing resumed into the default run's records: new keys
    new = {r["task"]: r for r in records[2:]}
    # the same model; the controls are part of the key through the record settings (harness/core/identity.py)
    assert new["vt"]["checkpoint"]["fingerprint"] == default["vt"]["checkpoint"]["fingerprint"]
    assert record_key(new["vt"]) != record_key(default["vt"])
    assert record_key(new["vt"])[:-1] == record_key(default["vt"])[:-1]
    assert new["vt"]["settings"]["options"] == {
        "answer_prefix": False,
        "max_new_tokens": {"vt": 5},
        "strip_thinking": True,
    }
    from tasks.ruler.templates import VT_ANSWER_PREFIX

    removed = new["vt"]["metadata"]["answer_prefix_removed"]
    assert (
        removed.startswith(VT_ANSWER_PREFIX.split("{")[0]) and "answer_prefix_removed" not in default["vt"]["metadata"]
    )
    assert new["vt"]["metadata"]["max_new_tokens_default"] == 30
    assert "max_new_tokens_default" not in new["niah_single_1"]["metadata"]
    assert new["vt"]["num_tokens"] < default["vt"]["num_tokens"]  # the prompt ends before the prefix
    prov = json.loads((out / "results.json").read_text())["provenance"]
    assert prov["answer_prefix"] is False and prov["max_new_tokens"] == {"vt": 5} and prov["strip_thinking"] is True
    # The same flags again: resumed, nothing new.
    assert _eval(tiny_llama_dir, out, *flags) == 0
    assert len(read_store(out / "samples.jsonl")[1]) == 4


def test_no_answer_prefix_leaves_default_samples_byte_identical(bpe_tokenizer):
    from harness.pipeline.reasoning import apply_options
    from tasks.generate import generate_samples
    from tasks.registry import get_task

    task = get_task("vt")
    (s,) = generate_samples(task, 1024, [0], bpe_tokenizer, seed=42, cache_dir=False)
    before = s.to_json()

    def count(text: str) -> int:
        return len(bpe_tokenizer(text)["input_ids"])

    t = apply_options(s, Options(answer_prefix=False), count)
    assert s.to_json() == before and apply_options(s, Options(), count) is s
    assert t.prompt == s.input and t.answer_prefix == "" and t.num_tokens == count(s.input)
    assert t.metadata["answer_prefix_removed"] == s.answer_prefix and t.input == s.input


def test_system_prompt_needs_chat_and_max_new_tokens_names_a_task(tiny_llama_dir, tmp_path, capsys):
    assert _eval(tiny_llama_dir, tmp_path / "a", "--system-prompt", "hi") == 2
    assert "--system-prompt needs --chat" in capsys.readouterr().err
    assert _eval(tiny_llama_dir, tmp_path / "b", "--max-new-tokens", "qa_9=3") == 2
    assert "names 'qa_9', which is not a generation task of this run" in capsys.readouterr().err
