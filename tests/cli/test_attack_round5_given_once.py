"""Two mistakes open since earlier rounds (issue 49): `harness generate --tokenizer ''` ran with the
embedded tokenizer in silence, and `harness train --data a,a` trained on one file twice without a
word. Each is now one line, exit 2, before any work."""

from __future__ import annotations

import json
import os

import pytest

from harness.cli import main


@pytest.mark.parametrize("flag", ["--tokenizer", "--cache-dir", "--essays", "--tasks"])
@pytest.mark.parametrize("value", ["", "  "])
def test_generate_refuses_an_empty_value(flag, value, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["generate", "--tasks", "vt", "--lengths", "1k", "--samples", "1", "--out", str(out)]
    argv = [*argv, flag, value] if flag != "--tasks" else [*argv[:1], "--tasks", value, *argv[3:]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {flag} is empty: give it a value or leave the flag out"
    assert not out.exists()


def _corpus(folder):
    folder.mkdir()
    path = folder / "a.jsonl"
    path.write_text("".join(json.dumps({"text": f"doc {i} " * 50}) + "\n" for i in range(5)))
    os.symlink(path, folder / "link.jsonl")
    return path


@pytest.mark.parametrize("spelling", ["same", "dot-slash", "symlink"])
def test_train_refuses_one_data_file_twice(spelling, tiny_llama_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _corpus(tmp_path / "data")
    second = {"same": "data/a.jsonl", "dot-slash": "./data/a.jsonl", "symlink": "data/link.jsonl"}[spelling]
    out = tmp_path / "run"
    argv = ["train", "--model", str(tiny_llama_dir), "--data", f"data/a.jsonl,{second}", "--out", str(out),
            "--mode", "anchor", "--window", "64", "--steps", "1", "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --data names ") and "--mixture" in err and err.count("\n") == 0, err
    assert not out.exists()
    assert path.exists()


def test_train_takes_two_different_files(tiny_llama_dir, tmp_path, monkeypatch):
    from harness.cli import build_parser
    from harness.commands.train import job_from_args

    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path / "data")
    (tmp_path / "data" / "b.jsonl").write_text((tmp_path / "data" / "a.jsonl").read_text())  # same text, two files
    args = build_parser().parse_args(["train", "--model", str(tiny_llama_dir), "--data", "data/a.jsonl,data/b.jsonl",
                                      "--out", "run", "--mode", "anchor", "--window", "64", "--steps", "1"])  # fmt: skip
    assert job_from_args(args).data.paths == ["data/a.jsonl", "data/b.jsonl"]
