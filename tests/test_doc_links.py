"""README.md is a front page (at most 160 lines), and every relative Markdown link in it and in
docs/ resolves: its file exists and, when it names an anchor, the target has that heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_README_LINES = 160

DOCS = sorted([README, *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+).*?\1", re.DOTALL)
# [text](target) or [text](target "title"); images ![alt](target) match too
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def links(path: Path) -> list[str]:
    """The link targets of a Markdown file, outside fenced code blocks and code spans."""
    text = path.read_text(encoding="utf-8")
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    return LINK.findall(text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(text):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative(target: str) -> bool:
    return not EXTERNAL.match(target) and not target.startswith("#")


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_links_every_guide():
    """Every guide in docs/ is one link away from the README, or from a guide the README links."""
    reachable = set()
    for target in links(README):
        if relative(target):
            reachable.add((README.parent / target.split("#")[0]).resolve())
    for page in list(reachable):
        if page.suffix == ".md" and page.is_file():
            for target in links(page):
                if relative(target):
                    reachable.add((page.parent / target.split("#")[0]).resolve())
    guides = {p.resolve() for p in (ROOT / "docs").glob("*.md")}
    assert not guides - reachable, sorted(str(p.relative_to(ROOT)) for p in guides - reachable)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path):
    broken = []
    for target in links(doc):
        if not relative(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve()
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor.lower() not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_link_checker_sees_a_broken_link(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\nSee [a](missing.md), [b](page.md#title), [c](https://x.org/y.md), "
        "`[d](in-code.md)`.\n\n```\n[e](in-fence.md)\n```\n",
        encoding="utf-8",
    )
    assert links(page) == ["missing.md", "page.md#title", "https://x.org/y.md"]
    assert [t for t in links(page) if relative(t) and not (tmp_path / t.split("#")[0]).exists()] == ["missing.md"]
    assert "title" in anchors(page)
    assert slug("LongBench ICL, HellaSwag and MMLU against the paper's Table 7") == (
        "longbench-icl-hellaswag-and-mmlu-against-the-papers-table-7"
    )
    assert slug("What `harness eval` does with them") == "what-harness-eval-does-with-them"
