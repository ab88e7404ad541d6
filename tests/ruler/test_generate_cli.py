"""`harness generate` end to end on 1K with the embedded default tokenizer."""

import json

from harness.cli import main
from harness.models.tokenization import count_tokens, load_tokenizer
from tasks.base import Sample


def test_generate_ruler_1k(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "generate",
            "--suite",
            "ruler",
            "--exclude",
            "niah_multikey_3",
            "--lengths",
            "1k",
            "--samples",
            "2",
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "qa_1: unavailable" in printed and "--squad" in printed
    assert json.loads((out / "unavailable.json").read_text()).keys() == {"qa_1", "qa_2"}
    assert not (out / "niah_multikey_3").exists()
    from harness.models.embedded import default_tokenizer_dir

    tok = load_tokenizer(str(default_tokenizer_dir()))
    for name in ("niah_single_1", "vt", "cwe", "fwe"):
        lines = (out / name / "1024.jsonl").read_text().splitlines()
        samples = [Sample.from_dict(json.loads(l)) for l in lines]
        assert [s.index for s in samples] == [0, 1]
        for s in samples:
            assert s.num_tokens == count_tokens(tok, s.prompt) and s.num_tokens + s.max_new_tokens <= 1024
            assert s.task == name and s.version and s.references


def test_generate_qa_with_local_file_and_bad_input(tmp_path, squad_file, capsys):
    out = tmp_path / "o"
    assert (
        main(
            [
                "generate",
                "--tasks",
                "qa_1",
                "--squad",
                str(squad_file),
                "--lengths",
                "1k",
                "--samples",
                "40",
                "--out",
                str(out),
                "--cache-dir",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )
    assert len((out / "qa_1" / "1024.jsonl").read_text().splitlines()) == 32  # capped at the data's size
    assert main(["generate", "--tasks", "nope", "--lengths", "1k", "--out", str(out)]) == 2
    assert main(["generate", "--tasks", "vt", "--lengths", "3k-16k", "--out", str(out)]) == 2
    assert "error:" in capsys.readouterr().err


def test_generate_reports_a_too_short_length_and_continues(tmp_path, capsys):
    out = tmp_path / "o"
    code = main(
        [
            "generate",
            "--tasks",
            "vt,fwe",
            "--lengths",
            "256",
            "--samples",
            "1",
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "c"),
        ]
    )
    assert code == 2
    captured = capsys.readouterr()
    assert "vt 256" in captured.out and "at least" in captured.out
    assert (out / "fwe" / "256.jsonl").exists()  # the other task still ran


def test_cache_dir_none_disables_the_cache(tmp_path, monkeypatch):
    from harness.cli import main

    monkeypatch.chdir(tmp_path)
    assert (
        main(["generate", "--tasks", "vt", "--lengths", "1k", "--samples", "1", "--out", "out", "--cache-dir", "none"])
        == 0
    )
    assert (tmp_path / "out").is_dir() and not (tmp_path / "none").exists()
