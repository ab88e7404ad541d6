"""docs/failure-modes.md and tests/failure_modes/ agree: every test of the corpus is listed with a
public source, every test the page names exists, and the corpus holds at least 20 failure modes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGE = HERE.parents[1] / "docs" / "failure-modes.md"
ROW = re.compile(r"^\| (\d+) \|.*$", re.MULTILINE)
NAMED = re.compile(r"`(test_\w+\.py)::(test_\w+)`")
SOURCE = re.compile(r"\]\((https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+)\)")


def _corpus() -> set[tuple[str, str]]:
    """(file, test) of every test function in the corpus modules, this one left out."""
    out = set()
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out |= {(path.name, f.name) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")}
    return out


def test_every_mode_has_a_source_and_a_test_and_every_test_a_row():
    rows = ROW.findall(PAGE.read_text(encoding="utf-8"))
    lines = [m.group(0) for m in ROW.finditer(PAGE.read_text(encoding="utf-8"))]
    assert [int(n) for n in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 20
    named = set()
    for line in lines:
        assert SOURCE.search(line), f"no public source in: {line[:80]}"
        tests = set(NAMED.findall(line))
        assert tests, f"no test named in: {line[:80]}"
        named |= tests
    corpus = _corpus()
    assert named - corpus == set(), f"named on the page but not in the corpus: {sorted(named - corpus)}"
    assert corpus - named == set(), f"in the corpus but not on the page: {sorted(corpus - named)}"


def test_the_listing_check_can_fail(tmp_path):
    """The row and name patterns read what the page writes (a pattern that matched nothing would pass)."""
    line = "| 1 | x | [a/b#1](https://github.com/a/b/issues/1) | y | `test_x.py::test_y` |"
    assert ROW.findall(line) == ["1"] and NAMED.findall(line) == [("test_x.py", "test_y")]
    assert SOURCE.findall(line) == ["https://github.com/a/b/issues/1"]
