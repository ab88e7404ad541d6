"""Paper exports and charts of a non-RULER selection: the page's charts, `harness report --format
latex` (compiled with pdflatex when installed, always parsed) and the figure files (SVG parsed,
PDF read back with poppler's pdftotext/pdftoppm, PNG opened with Pillow).

Tools missing locally skip their checks with the reason; under CI=true they fail instead, as the
other optional parts do (scripts/setup.sh --all installs poppler-utils and TeX)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from harness.cli import main

from .export_fixtures import HELMET_LENGTHS, HELMET_STEPS, helmet_dirs  # noqa: F401

NS = {"s": "http://www.w3.org/2000/svg"}


def need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        reason = f"{tool} not installed (apt-get install -y {package}, or bash scripts/setup.sh --all)"
        if os.environ.get("CI") == "true":  # CI must not go green with the check missing
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def board(helmet_dirs):  # noqa: F811
    from leaderboards.build import build, load_runs

    return build(load_runs(list(helmet_dirs.values())), baseline="helmet-full")


def test_non_ruler_selection_is_charted(board):
    from leaderboards.render import render_html

    block = board["series"]["suites"][0]
    assert block["suite"] == "custom" and block["threshold"] == 85.6
    assert [s["run"] for s in block["by_length"]] == ["helmet-full", "helmet-anchor"]
    assert all(len(p) == 5 and p[3] < p[1] < p[4] for s in block["by_length"] for p in s["points"])
    assert {s["run"]: s["window"] for s in block["by_step"]} == {
        r: [100, 300] for r in ("helmet-full", "helmet-anchor")
    }
    html = render_html(board)
    for chart in ("by-length", "by-step", "eff-by-step"):
        assert f'data-chart="{chart}"' in html
    assert html.count('class="band"') == 2 and html.count('class="window"') == 2


def test_effective_length_per_step_is_the_one_definition(board, helmet_dirs):  # noqa: F811
    from harness.core.effective_length import effective_length_value

    data = json.loads((helmet_dirs["helmet-anchor"] / "results.json").read_text())
    per_length = data["suites"]["custom"]["per_length"]
    eff = next(e for e in board["series"]["suites"][0]["eff_by_step"] if e["run"] == "helmet-anchor")
    for step, value in eff["points"]:
        means = {int(L): s["per_step"][str(step)] for L, s in per_length.items()}
        assert value == effective_length_value(means, 85.6)
    assert [st for st, _ in eff["points"]] == HELMET_STEPS


def _latex(helmet_dirs, capsys, *extra) -> str:  # noqa: F811
    dirs = [str(d) for d in helmet_dirs.values()]
    assert main(["report", *dirs, "--format", "latex", "--baseline", "helmet-full", *extra]) == 0
    return capsys.readouterr().out


def _balanced(text: str) -> bool:
    depth = 0
    for ch in re.sub(r"\\[{}]", "", text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def test_latex_table_numbers_are_the_results(helmet_dirs, capsys):  # noqa: F811
    tex = _latex(helmet_dirs, capsys)
    assert _balanced(tex)
    lines = tex.splitlines()
    for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
        assert lines.count(rule) == 1
    body = lines[lines.index(r"\midrule") + 1 : lines.index(r"\bottomrule")]
    assert [row.split(" & ")[0] for row in body] == [r"helmet-full\textsuperscript{b}", "helmet-anchor"]
    header = next(line for line in lines if line.startswith("Run & Mode"))
    cols = header.removesuffix(r" \\").split(" & ")
    for row in body:
        name = row.split(" & ")[0].removesuffix(r"\textsuperscript{b}")
        data = json.loads((helmet_dirs[name] / "results.json").read_text())["suites"]["custom"]
        cells = dict(zip(cols, row.removesuffix(r" \\").split(" & ")))
        assert len(cells) == len(cols) == 2 + 1 + len(HELMET_LENGTHS) + 1
        for L in HELMET_LENGTHS:
            stats = data["per_length"][str(L)]
            mean, half = re.fullmatch(r"(?:\\textbf\{)?([\d.]+)\}?\\,\{\\scriptsize\$\\pm\$([\d.]+)\}(?:\$\^\{\*\}\$)?",
                                      cells[f"{L // 1024}K"]).groups()  # fmt: skip
            assert float(mean) == round(stats["mean"], 1)
            assert float(half) == round((stats["ci_high"] - stats["ci_low"]) / 2, 1)
    # Best per column in bold: the anchor run scores higher at every length in this fixture.
    assert body[1].count(r"\textbf{") == len(HELMET_LENGTHS) + 1 and r"\textbf{" not in body[0]


def test_latex_range_flag_and_escaping(helmet_dirs, capsys):  # noqa: F811
    from leaderboards.latex import escape

    tex = _latex(helmet_dirs, capsys, "--interval", "range", "--digits", "2")
    assert re.search(r"\{\\scriptsize\[\d+\.\d\d, \d+\.\d\d\]\}", tex) and r"$\pm$" not in tex.split(r"\midrule")[1]
    assert escape(r"a_b & {c} \input{x} <s>") == (
        r"a\_b \& \{c\} \textbackslash{}input\{x\} \textless{}s\textgreater{}"
    )


def test_latex_compiles(helmet_dirs, capsys, tmp_path):  # noqa: F811
    pdflatex = need("pdflatex", "texlive-latex-base texlive-latex-recommended")
    tex = _latex(helmet_dirs, capsys)
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
    assert "helmet-anchor" in text and "16K" in text


def test_report_figures_svg_pdf_png(helmet_dirs, tmp_path, capsys):  # noqa: F811
    from PIL import Image

    out = tmp_path / "figs"
    assert main(["report", *map(str, helmet_dirs.values()), "--figures", str(out)]) == 0
    err = capsys.readouterr().err
    names = sorted(p.name for p in out.iterdir())
    stems = {"custom-score-vs-length"} | {
        f"custom-{r}-{k}" for r in helmet_dirs for k in ("score-vs-step", "effective-length-vs-step")
    }
    assert names == sorted(f"{s}.{ext}" for s in stems for ext in ("svg", "pdf", "png"))
    assert all(f"wrote {out / n}" in err for n in names)
    root = ET.parse(out / "custom-score-vs-length.svg").getroot()
    assert root.get("data-chart") == "by-length" and len(root.findall(".//s:polygon[@class='band']", NS)) == 2
    with Image.open(out / "custom-score-vs-length.png") as img:
        assert img.format == "PNG" and img.size[0] >= 1000 and img.size[1] >= 500
        assert sum(1 for c in img.convert("L").histogram() if c) > 20  # lines, band and text, not a blank canvas
    pdf = out / "custom-score-vs-length.pdf"
    assert 3_000 < pdf.stat().st_size < 500_000
    text = subprocess.run(
        [need("pdftotext", "poppler-utils"), str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    for word in ("average vs context length", "helmet-anchor", "helmet-full", "16K", "threshold 85.6"):
        assert word in " ".join(text.split()), word
    subprocess.run(
        [need("pdftoppm", "poppler-utils"), "-png", "-r", "50", str(pdf), str(tmp_path / "page")], check=True
    )
    with Image.open(next(tmp_path.glob("page*.png"))) as page:
        assert page.size == (round(6.4 * 50), round(3.6 * 50))


def test_leaderboard_writes_tex_and_figures(helmet_dirs, tmp_path, capsys):  # noqa: F811
    out, figs = tmp_path / "site", tmp_path / "figs"
    args = ["leaderboard", *map(str, helmet_dirs.values()), "--out", str(out)]
    assert main([*args, "--figures", str(figs), "--figure-formats", "svg"]) == 0
    printed = capsys.readouterr().out.split()
    assert str(out / "leaderboard.tex") in printed and str(figs / "custom-score-vs-length.svg") in printed
    assert (out / "leaderboard.tex").read_text().startswith("% Generated by") and not list(figs.glob("*.pdf"))
    assert main([*args, "--figures", str(figs), "--figure-formats", "svg,gif"]) == 2
    assert "--figure-formats 'svg,gif'" in capsys.readouterr().err


def test_latex_marks_what_the_delta_view_calls_significant(paired_board):
    from leaderboards.latex import to_latex

    tex = to_latex(paired_board)
    body = tex.split("\\midrule\n")[1].split("\\bottomrule")[0].splitlines()
    for row, line in zip(paired_board["rows"], body, strict=True):
        marks = sum(1 for c in paired_board["columns"] if (row.get("delta") or {}).get(c["id"], {}).get("sig"))
        assert line.count("$^{*}$") == marks
    assert sum(line.count("$^{*}$") for line in body) >= 3 and "differs from the baseline at 95" in tex
