"""`harness import --out` is checked like every --out (issue 49, open since earlier rounds):
`--out ''` wrote ./results.json into the working directory, exit 0."""

from __future__ import annotations

import pytest

from harness.cli import main

from .formats import write_lm_eval


@pytest.mark.parametrize(
    ("out", "phrase"),
    [("", "--out is empty"), ("   ", "--out is empty"), ("afile/r.json", "is a file"), ("adir.json", "is a directory")],
)
def test_an_unusable_out_is_one_line_and_writes_nothing(out, phrase, tmp_path, monkeypatch, capsys):
    src = write_lm_eval(tmp_path / "lm")
    work = tmp_path / "work"
    work.mkdir()
    (work / "afile").write_text("x")
    (work / "adir.json").mkdir()
    monkeypatch.chdir(work)
    assert main(["import", str(src), "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and phrase in err and err.count("\n") == 0, err
    assert sorted(p.name for p in work.iterdir()) == ["adir.json", "afile"]


def test_a_json_path_and_a_directory_are_written(tmp_path, monkeypatch, capsys):
    src = write_lm_eval(tmp_path / "lm")
    monkeypatch.chdir(tmp_path)
    assert main(["import", str(src), "--out", "row.json"]) == 0
    assert main(["import", str(src), "--out", "rows/llama"]) == 0, capsys.readouterr().err
    assert (tmp_path / "row.json").is_file() and (tmp_path / "rows" / "llama" / "results.json").is_file()
