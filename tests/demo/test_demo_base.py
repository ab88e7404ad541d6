"""The demo base model's tokenizer and initial weights (training/demo_base.py) and the repeat documents."""

from __future__ import annotations

import json
import string

import pytest

from training import demo_base, demo_corpus


@pytest.fixture(scope="module")
def demo_tok_dir(tmp_path_factory):
    return demo_base.build_tokenizer(tmp_path_factory.mktemp("demo-tok"))


@pytest.fixture(scope="module")
def demo_tok(demo_tok_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(demo_tok_dir), local_files_only=True)


def test_digits_are_single_tokens_and_bos_comes_first(demo_tok):
    text = "One of the special magic numbers for stone-lamp is: 4829301."
    ids = demo_tok(text)["input_ids"]
    assert ids[0] == demo_tok.bos_token_id and ids.count(demo_tok.bos_token_id) == 1
    pieces = [demo_tok.decode([i]) for i in ids[1:]]
    assert "".join(pieces) == text
    assert [p.strip() for p in pieces if p.strip().isdigit()] == list("4829301")
    assert len(demo_tok) == demo_base.VOCAB_SIZE


def test_instructions_are_compact_but_random_strings_stay_characters(demo_tok):
    noise = demo_corpus.NOISE
    assert len(demo_tok(noise, add_special_tokens=False)["input_ids"]) <= len(noise.split()) + 6
    code = "Qx7Zr2Lw9Kp4"
    assert len(demo_tok(code, add_special_tokens=False)["input_ids"]) >= len(code) - 2


def test_tokenizer_is_deterministic(tmp_path, demo_tok_dir):
    again = demo_base.build_tokenizer(tmp_path / "again")
    vocab = lambda d: json.loads((d / "tokenizer.json").read_text())["model"]["vocab"]
    assert vocab(again) == vocab(demo_tok_dir)


def test_every_demo_task_fits_at_1k(tmp_path, demo_tok_dir):
    """With this tokenizer the demo's four tasks have a 1K sample (vt's fixed part needs ~1.7K bytes)."""
    from harness.cli import main
    from harness.demo.config import DEFAULT_TASKS

    rc = main(
        [
            "generate",
            "--tasks",
            ",".join(DEFAULT_TASKS),
            "--lengths",
            "1k",
            "--tokenizer",
            str(demo_tok_dir),
            "--samples",
            "2",
            "--out",
            str(tmp_path / "gen"),
            "--cache-dir",
            "none",
        ]
    )
    assert rc == 0
    for task in DEFAULT_TASKS:
        rows = (tmp_path / "gen" / task / "1024.jsonl").read_text().splitlines()
        assert len(rows) == 2


def test_initial_model_loads_with_its_tokenizer(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = demo_base.build_initial_model(tmp_path / "init", layers=1, hidden=32, heads=2, max_len=1024)
    model = AutoModelForCausalLM.from_pretrained(str(out), local_files_only=True)
    tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    assert model.config.vocab_size == len(tok) and model.config.max_position_embeddings == 1024
    assert model.config.num_hidden_layers == 1 and not model.config.tie_word_embeddings


def test_repeat_documents_repeat_one_long_string():
    docs = [d for d in demo_corpus.documents(400, seed=4, repeat_share=0.5) if d["kind"] == "repeat"]
    assert 150 < len(docs) < 250
    alphabet = set(string.ascii_letters + string.digits)
    for d in docs:
        parts = d["text"].replace(" | ", "\n").replace(" ", "\n").split("\n")
        assert 2 <= len(parts) <= 4 and len(set(parts)) == 1
        assert 30 <= len(parts[0]) <= 60 and set(parts[0]) <= alphabet


def test_zero_shares_keep_the_old_corpus(tmp_path):
    """Adding the repeat type must not move the documents of an existing command: this is the corpus of
    the stop-11 pretraining attempt, whose sha256 was recorded then."""
    digest = demo_corpus.write(
        tmp_path / "c.jsonl", 40000, seed=1, max_lines=40, short_share=0.7, short_lines=6, copy_share=0.4
    )
    assert digest.startswith("dd58880b")


def test_cli_rejects_shares_summing_to_one(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        demo_corpus.main([str(tmp_path / "x.jsonl"), "--copy-share", "0.5", "--repeat-share", "0.5"])
    assert e.value.code == 2
    assert "sum below 1" in capsys.readouterr().err
