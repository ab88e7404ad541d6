"""Template unit tests (parsed HTML, no browser) and the `harness leaderboard` command."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from harness.cli import main
from leaderboards.render import environment, render_html

from .conftest import XSS


class _Doc(HTMLParser):
    """Flat list of elements: tag, attrs, text inside (all descendants)."""

    VOID = frozenset({"meta", "link", "input", "br", "img", "hr"})

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.elements, self._open = [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        el = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(el)
        if tag not in self.VOID:
            self._open.append(el)

    def handle_endtag(self, tag):
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i]["tag"] == tag:
                del self._open[i:]
                break

    def handle_data(self, data):
        for el in self._open:
            el["text"] += data

    def find(self, tag, **attrs):
        return [
            e
            for e in self.elements
            if e["tag"] == tag and all(e["attrs"].get(k.rstrip("_")) == v for k, v in attrs.items())
        ]


@pytest.fixture(scope="module")
def html(board):
    return render_html(board, generated="2026-01-01T00:00:00Z")


@pytest.fixture(scope="module")
def doc(html):
    return _Doc(html)


def test_autoescape_is_on_for_every_template():
    env = environment()
    for name in env.list_templates():
        assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"
        assert name.endswith(".j2")
    assert env.autoescape is True


def test_self_contained_no_network(doc, html):
    for el in doc.elements:
        for attr in ("src", "href"):
            value = el["attrs"].get(attr) or ""
            assert not re.match(r"^(https?:)?//", value), (el["tag"], value)
    assert not doc.find("link", rel="stylesheet")
    assert all("src" not in s["attrs"] for s in doc.find("script"))
    assert "@import" not in html and "url(http" not in html


def test_script_names_are_text(doc, html):
    assert XSS not in html and "<img src=x" not in html
    scripts = doc.find("script")
    assert len(scripts) == 2  # the data block and the app; nothing from a run name
    names = [e["text"] for e in doc.elements if e["attrs"].get("class") == "run-name"]
    assert XSS in names  # shown, as text
    data = json.loads(doc.find("script", id="lb-data")[0]["text"])
    assert data["scores"]["csv"]["rows"][-1]["values"][0] == XSS


def test_grouped_headers_and_columns(doc, board):
    table = "lb-scores"
    assert doc.find("table", id=table)
    groups = [e for e in doc.elements if e["tag"] == "th" and e["attrs"].get("class") == "g"]
    groups = groups[: len(groups) // 2]  # the scores table; the delta table repeats them
    assert [g["text"] for g in groups][:3] == ["RULER", "LongBench", "Short context"]
    assert sum(int(g["attrs"]["colspan"]) for g in groups) == len(board["columns"])
    heads = [e for e in doc.elements if e["tag"] == "th" and "data-col" in e["attrs"]]
    # two tables (scores, delta), each with 4 fixed columns plus one per model column
    assert len(heads) == 2 * (4 + len(board["columns"]))
    assert {"MMLU", "HellaSwag", "ICL", "Code Completion", "wAvg (inc)", "Eff. length", "128K"} <= {
        h["text"] for h in heads
    }


def test_cells_missing_reasons_and_hover(doc, board):
    cells = [e for e in doc.elements if e["tag"] == "td" and "n" in e["attrs"].get("class", "").split()]
    missing = [c for c in cells if c["text"].strip() == "—"]
    assert missing and all(c["attrs"].get("title") for c in missing)
    # In the leaderboard tables a missing value sorts as missing (empty), never as 0.
    assert all(c["attrs"]["data-v"] == "" for c in missing if "data-v" in c["attrs"] and "miss" in c["attrs"]["class"])
    hover = [c["attrs"]["title"] for c in cells if "± " in (c["attrs"].get("title") or "")]
    assert hover and all("steps 1960, 1970, 1980, 1990, 2000" in t for t in hover)
    assert any("samples" in t for t in hover)
    above = [c for c in cells if "above" in c["attrs"]["class"].split()]
    assert above and all(float(c["attrs"]["data-v"]) > 85.6 for c in above)
    flagged = [e for e in doc.elements if e["attrs"].get("class") == "flag" and e["tag"] == "span"]
    assert flagged and any("lacks qa_1, qa_2" in f["attrs"]["title"] for f in flagged)


def test_drilldown_provenance_and_markdown(doc, html, board):
    details = doc.find("details", class_="run-detail")
    assert [d["attrs"]["data-run"] for d in details] == [r["run"] for r in board["rows"]]
    partial = next(d for d in details if d["attrs"]["data-run"] == "anchor-11of13")
    assert "qa_1" in partial["text"] and "niah_multikey_3" in partial["text"]
    qa_cells = [
        e
        for e in doc.elements
        if e["tag"] == "td" and (e["attrs"].get("title") or "").startswith("qa_1 unavailable: SQuAD v2 dev not found")
    ]
    assert qa_cells and all(c["text"] == "—" for c in qa_cells)
    prov = doc.find("details", id="lb-provenance")[0]["text"]
    for field in ("backend", "dtype", "template", "truncation", "tokenizer", "package_version", "bfloat16"):
        assert field in prov
    assert "h-niah_single_1" in html  # dataset hashes
    md = doc.find("pre", class_="md-text")
    assert len(md) == 2 and md[0]["text"].startswith("| Run | Mode |")
    assert "tabular-nums" in html


def test_no_baseline_no_delta(results_dir):
    from leaderboards.build import build, load_runs

    html = render_html(build(load_runs([results_dir["full"], results_dir["anchor"]])))
    assert 'id="lb-delta"' not in html and 'data-view="delta"' not in html
    assert 'id="lb-scores"' in html


def test_cli_writes_files_and_prints_paths(site, capsys):
    names = {p.name for p in site.iterdir()}
    assert {
        "index.html",
        "leaderboard.csv",
        "leaderboard.json",
        "leaderboard.md",
        "leaderboard-delta.csv",
        "leaderboard-delta.md",
    } <= names
    assert "Fixture leaderboard" in (site / "index.html").read_text()


def test_cli_prints_paths(results_dir, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["leaderboard", str(results_dir["full"]), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    names = ("index.html", "leaderboard.csv", "leaderboard.json", "leaderboard.md", "leaderboard.tex")
    assert printed == [str(out / n) for n in names]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["missing-dir"], "no results file at missing-dir"),
        (["--baseline", "nobody"], "--baseline 'nobody' is not one of the runs"),
        (["--threshold", "120"], "outside 0..100"),
    ],
)
def test_cli_user_errors_exit_2_with_one_line(results_dir, tmp_path, capsys, extra, message):
    args = ["leaderboard", str(results_dir["full"]), "--out", str(tmp_path / "o")]
    args = args + extra if extra[0].startswith("--") else ["leaderboard", *extra, "--out", str(tmp_path / "o")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_edge_cases_render(tmp_path):
    """One checkpoint, one length, and a suite with nothing scored: a page, no crash, no zeros."""
    from leaderboards.build import build
    from leaderboards.export import to_csv

    from .conftest import make_run

    one, _ = make_run("one-ckpt", 7, 90.0, steps=[2000], lengths=[4096], longbench=False, short=False)
    empty, _ = make_run("nothing-scored", 8, 90.0, lengths=[4096], longbench=False, short=False)
    ruler = empty["suites"]["ruler"]
    ruler.update(evaluated=[], per_task={}, per_length={}, unavailable={t: "data missing" for t in ruler["tasks"]})
    ruler["summary"] = {
        "effective_length": {"threshold": 85.6, "value": None, "label": "no length evaluated"},
        "tasks_covered": 0,
        "tasks_total": 13,
    }
    runs = [{**one, "sources": ["a"]}, {**empty, "sources": ["b"]}]
    board = build(runs, title="<i>T</i>")
    html = render_html(board)
    assert "<i>T</i>" not in html and "&lt;i&gt;T&lt;/i&gt;" in html
    doc = _Doc(html)
    # No chart: one length is a point, not a curve (leaderboards.series.chartable), and one
    # checkpoint gives no Figure 4.
    assert len(doc.find("svg")) == 0
    row = next(r for r in board["rows"] if r["run"] == "nothing-scored")
    assert all(c["value"] is None for k, c in row["cells"].items() if not k.endswith(("/tasks", "/eff")))
    assert row["cells"]["ruler/tasks"]["text"] == "0/13"
    line = to_csv(board).splitlines()[2]
    assert line.startswith("nothing-scored,") and ",0.00," not in line
