"""leaderboard.md holds no script link in any form (issue 49): its brackets were escaped (issue 40)
but `javascript:` stayed in the file, for any renderer or linkifier that does not honour CommonMark's
backslash escapes (`\\[x\\](javascript:...)` is a live link there). A script scheme's colon is now
escaped too; a CommonMark renderer still shows every name exactly as written."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pytest

from harness.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from attack5_data import results, write_run

NAMES = [
    "[click](javascript:alert(1))",
    "[x](JavaScript :alert(2))",
    "![img](data:text/html;base64,PHNjcmlwdD4=)",
    "javascript:alert(3)",
    "<vbscript:msgbox(4)>",
    "a (plain) name: with colons",
]


@pytest.fixture
def site(tmp_path, capsys):
    runs = [
        write_run(tmp_path / f"r{i}", results(name, lambda d, i=i: d["run"].update(mode=NAMES[-1 - i])))
        for i, name in enumerate(NAMES)
    ]
    out = tmp_path / "site"
    assert main(["leaderboard", *map(str, runs), "--out", str(out), "--baseline", NAMES[0]]) == 0
    capsys.readouterr()
    return out


@pytest.mark.parametrize("page", ["leaderboard.md", "leaderboard-delta.md"])
def test_no_script_link_survives_in_the_markdown(site, page):
    text = (site / page).read_text()
    assert not re.search(r"(?i)(javascript|vbscript|data)\s*:", text)  # every such colon is escaped
    assert not re.search(r"(?<!\\)\[[^\]]*(?<!\\)\]\(", text)  # no unescaped [..]( either


@pytest.mark.parametrize("page", ["leaderboard.md", "leaderboard-delta.md"])
def test_a_commonmark_renderer_shows_the_names_as_written_and_no_link(site, page):
    markdown_it = pytest.importorskip("markdown_it")
    rendered = markdown_it.MarkdownIt("commonmark").enable("table").render((site / page).read_text())
    assert "<a " not in rendered and "<img" not in rendered and "href" not in rendered
    cells = [html.unescape(c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", rendered, re.DOTALL)]
    for name in NAMES:
        assert any(c.removesuffix(" ⚑").removesuffix(" ⚑") == name for c in cells), name
