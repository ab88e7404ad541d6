"""CSV / JSON / Markdown exports show exactly the page's numbers."""

from __future__ import annotations

import csv
import io
import json

import pytest

from leaderboards.export import csv_table, to_csv, to_json, to_markdown

from .conftest import XSS


def _parse_csv(text):
    return list(csv.reader(io.StringIO(text)))


def test_csv_cells_round_trip_to_the_model(board):
    rows = _parse_csv(to_csv(board))
    header, body = rows[0], rows[1:]
    assert header[:4] == ["Run", "Model", "Mode", "Checkpoints"] and header[-1] == "Flags"
    assert [r[0] for r in body] == [r["run"] for r in board["rows"]]  # the <script> name survives as text
    for line, row in zip(body, board["rows"]):
        rec = dict(zip(header, line))
        for col in board["columns"]:
            name = f"{col['group']} {col['label']}"
            cell = row["cells"][col["id"]]
            if not col["numeric"]:
                assert rec[name] == ("" if cell["text"] == "—" else cell["text"])
            elif cell["value"] is None:
                assert rec[name] == "" and rec[name + " std"] == ""  # missing is empty, never 0
            else:
                assert float(rec[name]) == pytest.approx(cell["value"], abs=0.005)
                assert float(rec[name + " std"]) == pytest.approx(cell["std"], abs=0.005)
    flagged = {r[0]: r[-1] for r in body}
    assert "lacks qa_1, qa_2" in flagged["anchor-11of13"] and flagged["full"] == ""


def test_delta_csv(board):
    rows = _parse_csv(to_csv(board, "delta"))
    rec = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    full, anchor = board["rows"][0], board["rows"][1]
    col = next(c for c in board["columns"] if c["key"] == "avg" and c["suite"] == "ruler")
    name = f"{col['group']} {col['label']}"
    assert rec["full"][name] == "base"
    assert float(rec["anchor"][name]) == pytest.approx(
        anchor["cells"][col["id"]]["value"] - full["cells"][col["id"]]["value"], abs=0.005
    )


def test_json_export(board):
    data = json.loads(to_json(board))
    assert data["view"] == "scores" and data["baseline"] == "full"
    assert [r["run"] for r in data["rows"]] == [r["run"] for r in board["rows"]]
    cid = next(c["id"] for c in board["columns"] if c["key"] == "len:131072")
    short = next(r for r in data["rows"] if r["run"] == "intra-doc-short")
    assert short["cells"][cid]["value"] is None and "not evaluated at 128K" in short["cells"][cid]["reason"]


def test_markdown_table(board):
    md = to_markdown(board)
    lines = [line for line in md.splitlines() if line.startswith("|")]
    width = lines[0].count(" | ")
    assert all(line.replace("\\|", "").count(" | ") == width for line in lines)  # no stray pipes from names
    assert XSS not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    anchor = next(line for line in lines if line.startswith("| anchor |"))
    ruler_avg = next(r for r in board["rows"] if r["run"] == "anchor")["cells"]
    cid = next(c["id"] for c in board["columns"] if c["key"] == "avg" and c["suite"] == "ruler")
    # the page's ± is a 95% interval's half-width; these schema-1 results have none, so neither has the table
    assert f"| **{ruler_avg[cid]['value']:.2f}** |" in anchor and " ± " not in anchor
    short = next(line for line in lines if line.startswith("| intra-doc-short ⚑ |"))
    assert "| — |" in short and "| 0.00" not in short
    assert "Effective-length threshold: 85.6" in md


def test_page_table_matches_csv_module(board):
    t = csv_table(board)
    assert [r["id"] for r in t["rows"]] == [r["id"] for r in board["rows"]]
    assert len({len(r["values"]) for r in t["rows"]} | {len(t["header"])}) == 1


def test_markdown_never_makes_a_link_of_a_name():
    """A run or model name written as a Markdown link (javascript: or any URL) stays text (issue 40)."""
    from leaderboards.export import _md_escape

    text = _md_escape("[click](javascript:alert(1))")
    assert text == "\\[click\\](javascript\\:alert(1))"  # (issue 49: no "javascript:" left either)
    import re

    assert not re.search(r"(?<!\\)\[[^\]]*(?<!\\)\]\(", text)  # no unescaped [..]( left
