"""`harness eval --suite babilong` end to end with the tiny Llama on fixture data: the reference
protocol (the default) on a released set, the exact-length protocol on bAbI + PG19 files, a 0K run;
bad input as one line, exit 2, nothing written; then `harness report`, `harness plan` and the
leaderboard over those results (BABILong's task x length grid)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from tasks.babilong import data, released

from .helpers import RELEASED, write_babi, write_fixtures, write_pg19


def _eval(ckpt, out, *extra: str) -> int:
    args = ["eval", "--ckpts", str(ckpt), "--out", str(out), "--no-progress", *extra]
    rc = main(args)
    data.clear_caches()
    released.clear_caches()
    return rc


@pytest.fixture(scope="module")
def runs(tiny_llama_dir, tmp_path_factory):
    """reference: babilong on the 100-row set's fixture, every label and row; a and b: exact-length
    (512 and 1K; 512), 2 samples per task and length; 0k: the exact-length 0K tasks."""
    root = tmp_path_factory.mktemp("babilong")
    src = root / "data"
    write_babi(src)
    write_pg19(src)
    outs = {"reference": root / "ref"}
    assert (
        _eval(tiny_llama_dir, outs["reference"], "--suite", "babilong", "--babilong-data", str(RELEASED / "babilong"))
        == 0
    )
    for name, lengths in (("a", "512,1k"), ("b", "512")):
        outs[name] = root / name
        extra = ["--suite", "babilong", "--lengths", lengths, "--samples", "2", "--name", name]
        assert _eval(tiny_llama_dir, outs[name], *extra, "--protocol", "exact-length", "--babilong-data", str(src)) == 0
    outs["0k"] = root / "zero"
    extra = ["--suite", "babilong-0k", "--samples", "2", "--protocol", "exact-length", "--babilong-data", str(src)]
    assert _eval(tiny_llama_dir, outs["0k"], *extra) == 0
    return outs


def _records(out) -> list[dict]:
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]


def test_reference_run_reads_the_released_set(runs):
    recs = _records(runs["reference"])
    # qa1-qa5 at 0k, 1k and 2k (every label the set holds within the 8K context), 3 rows each
    assert len(recs) == 5 * 3 * 3
    assert {r["length"] for r in recs} == {0, 1024, 2048}
    for r in recs:
        assert r["settings"]["protocol"] == "reference" and r["metadata"]["protocol"] == "reference"
        assert r["metric"] == "babilong_compare_answers" and r["score"] in (0.0, 1.0)
    results = json.loads((runs["reference"] / "results.json").read_text())
    suite = results["suites"]["babilong"]
    assert suite["lengths"] == [0, 1024, 2048] and suite["protocol"] == "reference"
    assert suite["length_controlled"] is False  # released labels, not lengths fitted in the model's tokens
    head = suite["headline"]
    assert head["label"].startswith("mean of qa1-qa5") and set(head["groups"]) == {"qa1-qa5"}


def test_exact_length_records_and_results(runs):
    recs = _records(runs["a"])
    assert len(recs) == 5 * 2 * 2
    for r in recs:
        assert r["num_tokens"] + 20 <= r["length"] and r["settings"]["truncation"] == "none"
        assert r["settings"]["protocol"] == "exact-length" and "fact_depths" in r["metadata"]
        assert r["metric"] == "babilong_compare_answers" and r["score"] in (0.0, 1.0)
    suite = json.loads((runs["a"] / "results.json").read_text())["suites"]["babilong"]
    assert suite["lengths"] == [512, 1024] and len(suite["evaluated"]) == 5
    assert suite["summary"]["effective_length"]["threshold"] == 85.6  # length-controlled
    zero = json.loads((runs["0k"] / "results.json").read_text())["suites"]["babilong-0k"]
    assert zero["lengths"] == [0] and zero["summary"]["effective_length"]["label"] == "n/a"


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        (["--lengths", "3000"], "BABILong's released sets have lengths 1k, 2k, 4k"),
        (["--lengths", "1k,4k"], "drop 4k from --lengths"),
        (["--wrong-layout"], "string fields input, question, target"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(tiny_llama_dir, tmp_path, capsys, extra, expect):
    src = RELEASED / "babilong"
    if extra == ["--wrong-layout"]:
        src = write_fixtures(tmp_path / "sets")["babilong"]
        (src / "data" / "qa3" / "1k.json").write_text(json.dumps([{"input": "x", "question": "q"}]), encoding="utf-8")
        extra = []
    out = tmp_path / "out"
    assert _eval(tiny_llama_dir, out, "--suite", "babilong", "--babilong-data", str(src), *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0], err
    assert not out.exists() or not any(out.iterdir())


def test_report_plan_and_leaderboard(runs, tmp_path, capsys):
    assert main(["report", str(runs["a"]), str(runs["0k"]), str(runs["reference"])]) == 0
    printed = capsys.readouterr().out
    assert "babilong_qa5" in printed and "babilong_0k_qa1" in printed
    assert main(["plan", "--baseline", str(runs["a"]), "--against", str(runs["b"]), "--delta", "10"]) == 0
    assert "babilong_qa1" in capsys.readouterr().out
    out = tmp_path / "board"
    assert (
        main(["leaderboard", str(runs["a"]), str(runs["b"]), str(runs["0k"]), "--out", str(out), "--baseline", "a"])
        == 0
    )
    board = json.loads((out / "leaderboard.json").read_text())
    text = json.dumps(board)
    assert "BABILong" in text and "BABILong 0K" in text
    html = (out / "index.html").read_text()
    assert "babilong_qa4" in html  # the per-task x length grid of the drill-down
