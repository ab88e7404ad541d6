"""A run's record warnings travel into every export, and a run name opening with `[` compiles
(issue 49). Before, `harness report` alone said that a store held records that contradict
themselves or conflict; the leaderboard page, its CSV, JSON and Markdown and the LaTeX table showed
such a run with no mark. A run named "[x] ..." broke the LaTeX table's compile: after `\\\\` or
`\\midrule` a cell opening with `[` is read as their optional argument."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from attack5_data import results, write_run

INCONSISTENT = {"count": 2, "reasons": {"metric 'exact_match' is not vt's ('string_match_all')": 2}}


def _marked(d):
    d.update(inconsistent_records=INCONSISTENT, conflicting_records=3)


@pytest.fixture
def runs(tmp_path):
    return [write_run(tmp_path / "bad", results("edited-store", _marked)), write_run(tmp_path / "ok", results("clean"))]


def test_the_marks_reach_the_page_and_every_export(runs, tmp_path, capsys):
    site = tmp_path / "site"
    assert main(["leaderboard", *map(str, runs), "--out", str(site)]) == 0
    contradict, conflict = "2 record(s) contradict themselves", "3 record(s) share an identity"
    csv_rows = {line.split(",", 1)[0]: line for line in (site / "leaderboard.csv").read_text().splitlines()}
    assert contradict in csv_rows["edited-store"] and conflict in csv_rows["edited-store"]
    assert "record(s)" not in csv_rows["clean"]
    flags = {r["run"]: r["flags"] for r in json.loads((site / "leaderboard.json").read_text())["rows"]}
    assert any(contradict in f for f in flags["edited-store"]) and flags["clean"] == []
    md = (site / "leaderboard.md").read_text()
    assert "| edited-store ⚑ |" in md and "| clean |" in md
    assert f"⚑ edited-store: {contradict}" in md and conflict in md
    assert "task or length set differs" not in md  # the sets are the same: only the records are marked
    tex = (site / "leaderboard.tex").read_text()
    assert r"edited-store\textsuperscript{\dag}" in tex and contradict in tex and conflict in tex
    html = (site / "index.html").read_text()
    assert contradict in html and conflict in html


def test_report_latex_carries_them(runs, capsys):
    assert main(["report", *map(str, runs), "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert r"edited-store\textsuperscript{\dag}" in tex and "contradict themselves" in tex


def test_a_run_merged_from_two_files_keeps_the_marks_of_each(tmp_path, capsys):
    def other_suite(d):
        d["suites"]["ruler-copy"] = d["suites"].pop("ruler")
        d.update(conflicting_records=1)

    first = write_run(tmp_path / "a", results("split", _marked))
    second = write_run(tmp_path / "b", results("split", other_suite))
    site = tmp_path / "site"
    assert main(["leaderboard", str(first), str(second), "--out", str(site)]) == 0
    row = json.loads((site / "leaderboard.json").read_text())["rows"][0]
    assert any("2 record(s) contradict" in f for f in row["flags"])
    assert any("4 record(s) share an identity" in f for f in row["flags"])  # 3 + 1


@pytest.mark.parametrize("name", ["[x] run", "]y", "[2pt]"])
def test_a_name_opening_with_a_bracket_compiles(name, tmp_path, capsys):
    pdflatex, pdftotext = shutil.which("pdflatex"), shutil.which("pdftotext")
    if pdflatex is None or pdftotext is None:
        pytest.skip("pdflatex/pdftotext not installed (bash scripts/setup.sh --all)")
    runs = [write_run(tmp_path / "a", results(name, lambda d: d["run"].update(mode="[m]"))),
            write_run(tmp_path / "b", results("[second]"))]  # fmt: skip
    assert main(["report", *map(str, runs), "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    doc = "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n" + tex + "\\end{document}\n"
    (tmp_path / "t.tex").write_text(doc, encoding="utf-8")
    proc = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                          check=False, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    text = subprocess.run([pdftotext, str(tmp_path / "t.pdf"), "-"], capture_output=True, text=True, check=True).stdout
    assert name in text and "[second]" in text and "[m]" in text
