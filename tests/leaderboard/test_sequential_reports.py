"""A run evaluated sequentially on the leaderboard and in `harness report`: the page's section, the
CSV and Markdown exports, the LaTeX table (compiled with pdflatex) and the terminal table, each
checked cell by cell against the results' "sequential" block (tests/leaderboard/sequential_fixtures.py)."""

from __future__ import annotations

import csv
import io
import re
import subprocess
from html.parser import HTMLParser

from harness.cli import main

from .conftest import XSS
from .sequential_fixtures import (  # noqa: F401
    LENGTHS,
    MISSING_CELL,
    paired_block,
    sequential_board,
    sequential_dirs,
    sequential_site,
)
from .test_exports import need


def _cells(block: dict) -> list[tuple[str, int, dict]]:
    return [(task, int(L), e) for task, by in block["cells"].items() for L, e in by.items()]


def test_sections_hold_every_cell_of_every_sequential_run(sequential_board):  # noqa: F811
    secs = {s["run"]: s for s in sequential_board["sequential"]}
    assert set(secs) == {"seq-anchor", "seq-width", XSS}  # the plain run "full" has none
    sec = secs["seq-anchor"]
    assert sec["paired"] and sec["what"] == "minus full" and sec["samples"]["ratio"] == 4321 / 19500
    grid = sec["suites"][0]
    assert grid["label"] == "RULER" and grid["lengths"] == ["4K", "8K", "16K"]
    assert [r["label"] for r in grid["rows"]][-1] == "Average (RULER)" and grid["rows"][-1]["average"]
    block = paired_block()
    assert len(sec["records"]) == len(_cells(block))
    by_label = {r["label"]: r for r in grid["rows"]}
    for task, L, e in _cells(block):
        row = by_label["Average (RULER)" if task == "average" else task]
        cell = row["cells"][LENGTHS.index(L)]
        want = "open" if e["stopped"] == "open" else e["verdict"]
        assert cell["status"] == want and cell["css"] == "v-" + want.replace(" ", "-")
        assert cell["n"] == f"n={e['n']}/500"  # the average's 6500 over 13 tasks: per task
    vt = by_label[MISSING_CELL[0]]["cells"][LENGTHS.index(MISSING_CELL[1])]
    assert vt["status"] is None and vt["text"] == "—"
    want: dict[str, int] = {}
    for _, _, e in _cells(block):
        key = "open" if e["stopped"] == "open" else e["verdict"]
        want[key] = want.get(key, 0) + 1
    assert {c["status"]: c["n"] for c in sec["counts"]} == want and len(want) == 5


def test_csv_is_one_line_per_cell_with_the_records_numbers(sequential_board):  # noqa: F811
    from leaderboards.sequential_export import HEADER, sequential_csv

    rows = list(csv.reader(io.StringIO(sequential_csv(sequential_board))))
    assert rows[0] == HEADER
    mine = [r for r in rows[1:] if r[0] == "seq-anchor"]
    block = paired_block()
    assert len(mine) == len(_cells(block))
    got = {(r[4], int(r[5])): r for r in mine}
    for task, L, e in _cells(block):
        r = got[(task, L)]
        assert r[1] == "full" and r[2] == "paired" and r[3] == "ruler"
        assert (float(r[7]), float(r[8]), float(r[9])) == (e["estimate"], *e["interval"])
        assert int(r[10]) == e["n"] and float(r[11]) == 500 and r[14] == e["stopped"]
    xss = [r for r in rows[1:] if r[0] == XSS]
    assert len(xss) == len(mine) and xss[0][1] == XSS  # text cells stay text ("<" starts no formula)
    assert sequential_csv({"sequential": []}) == ""


def test_markdown_tables_and_escaping(sequential_board):  # noqa: F811
    from leaderboards.sequential_export import sequential_markdown

    md = sequential_markdown(sequential_board)
    assert "**Sequential verdicts: seq-anchor** (minus full)" in md
    assert "| Task | 4K | 8K | 16K |" in md
    assert (
        "| niah_single_1 | better +7.2 \\[+1.1, +13.0\\] n=75/500 | worse -5.5 \\[-9.0, -2.0\\] n=150/500 | equiv n=50/500 |"
        in md
    )
    assert "| **Average (RULER)** | better +4.0 \\[+0.5, +7.5\\] n=100/500 | equiv n=125/500 |" in md
    assert "| niah_single_1 | within 96.0 \\[91.5, 99.5\\] n=60/500 |" in md  # width mode: the score
    assert XSS not in md and "&lt;script&gt;" in md


def test_leaderboard_files_carry_the_section(sequential_site, site):  # noqa: F811
    html = (sequential_site / "index.html").read_text(encoding="utf-8")
    assert (sequential_site / "leaderboard-sequential.csv").read_text().startswith("Run,Against,Rule,")
    assert "Sequential verdicts: seq-anchor" in (sequential_site / "leaderboard.md").read_text()
    assert "Sequential evaluation of seq-anchor" in (sequential_site / "leaderboard.tex").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # Runs without a block: no section, no file.
    assert not (site / "leaderboard-sequential.csv").exists()
    assert 'id="lb-sequential"' not in (site / "index.html").read_text(encoding="utf-8")


class _Cells(HTMLParser):
    """Every td of the page's sequential tables: (classes, text)."""

    def __init__(self):
        super().__init__()
        self.cells: list[tuple[str, str]] = []
        self._in: list | None = None
        self._table = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "seq-table" in (a.get("class") or ""):
            self._table = True
        elif tag == "td" and self._table:
            self._in = [a.get("class") or "", ""]

    def handle_endtag(self, tag):
        if tag == "td" and self._in is not None:
            self.cells.append((self._in[0], " ".join(self._in[1].split())))
            self._in = None
        elif tag == "table":
            self._table = False

    def handle_data(self, data):
        if self._in is not None:
            self._in[1] += data


def test_page_cells_show_verdict_interval_and_n(sequential_board):  # noqa: F811
    from leaderboards.render import render_html

    parser = _Cells()
    parser.feed(render_html(sequential_board))
    cells = parser.cells
    per_grid = 14 * 3  # 13 tasks and the average, 3 lengths
    assert len(cells) == 2 * per_grid + 13  # two paired runs, the width run's one length
    assert cells[0] == ("seq v-better", "better +7.2 [+1.1, +13.0] n=75/500")
    assert ("seq v-equivalent", "equiv 0.0 [-3.1, +2.9] n=50/500") in cells  # the page shows its interval too
    assert ("seq v-open", "open +2.0 [-8.0, +12.0] n=25/500") in cells
    assert ("seq v-none", "—") in cells
    assert ("seq v-within-width", "within 96.0 [91.5, 99.5] n=60/500") in cells


def test_report_text_prints_the_grid(sequential_dirs, capsys):  # noqa: F811
    assert main(["report", str(sequential_dirs["seq-anchor"])]) == 0
    out = capsys.readouterr().out
    assert "sequential: paired against full (results/full, its missing samples evaluated too)" in out
    assert "samples 4321 of the fixed protocol's 19500 (0.22x)" in out
    assert (
        "alpha 0.05 family-wise over 41 cells (Bonferroni: 0.0012 each); equivalent = the interval inside ±5 points"
        in out
    )
    assert re.search(r"^niah_single_1 +better \+7\.2 \[\+1\.1, \+13\.0\] n=75/500 +worse -5\.5", out, re.MULTILINE)
    assert re.search(
        r"^Average \(ruler\) +better \+4\.0 \[\+0\.5, \+7\.5\] n=100/500 +equiv n=125/500 +undecided", out, re.MULTILINE
    )


def test_latex_tables_compile_and_show_verdicts(sequential_dirs, capsys, tmp_path):  # noqa: F811
    pdflatex = need("pdflatex", "texlive-latex-base texlive-latex-recommended")
    runs = [str(sequential_dirs[n]) for n in ("seq-anchor", "full", XSS, "seq-width")]
    assert main(["report", *runs, "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert tex.count(r"\begin{table}") == 4 and tex.count(r"\label{tab:sequential-") == 3
    assert r"\textbf{better} $+$7.2\\{\scriptsize [$+$1.1, $+$13.0] $n$=75/500}" in tex
    assert r"\textless{}script\textgreater{}" in tex and "<script>" not in tex
    doc = "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n" + tex + "\\end{document}\n"
    (tmp_path / "t.tex").write_text(doc, encoding="utf-8")
    proc = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    text = subprocess.run(
        [need("pdftotext", "poppler-utils"), str(tmp_path / "t.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert "Sequential evaluation of seq-anchor" in " ".join(text.split())
    assert "better +7.2" in text and "n=75/500" in text and "within 96.0" in text and "undec." in text
