"""`harness eval --suite babilong` / `babilong-0k` end to end with the tiny Llama on fixture data,
then `harness report`, `harness plan` and the leaderboard over those results (BABILong's task x
length grid; LongBench v2's categories as columns)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from tasks.babilong import data

from .helpers import write_babi, write_pg19


@pytest.fixture(scope="module")
def runs(tiny_llama_dir, tmp_path_factory):
    """BABILong runs a (512 and 1K) and b (512), 2 samples per task and length, and a 0K run."""
    root = tmp_path_factory.mktemp("babilong")
    src = root / "data"
    write_babi(src)
    write_pg19(src)
    data.clear_caches()
    outs = {}
    for name, lengths in (("a", "512,1k"), ("b", "512")):
        outs[name] = root / name
        args = ["eval", "--ckpts", str(tiny_llama_dir), "--suite", "babilong", "--lengths", lengths, "--samples", "2"]
        args += ["--out", str(outs[name]), "--name", name, "--no-progress", "--babilong-data", str(src)]
        assert main(args) == 0
    outs["0k"] = root / "zero"
    args = [
        "eval",
        "--ckpts",
        str(tiny_llama_dir),
        "--suite",
        "babilong-0k",
        "--samples",
        "2",
        "--out",
        str(outs["0k"]),
    ]
    assert main([*args, "--no-progress", "--babilong-data", str(src)]) == 0
    data.clear_caches()
    return outs


def test_records_and_results(runs):
    recs = [json.loads(x) for x in (runs["a"] / "samples.jsonl").read_text().splitlines()[1:]]
    assert len(recs) == 10 * 2 * 2
    for r in recs:
        assert r["num_tokens"] + 20 <= r["length"] and r["settings"]["truncation"] == "none"
        assert r["metric"] == "babilong_compare_answers" and r["score"] in (0.0, 1.0)
        assert r["metadata"]["references"] and "fact_depths" in r["metadata"]
    results = json.loads((runs["a"] / "results.json").read_text())
    suite = results["suites"]["babilong"]
    assert suite["lengths"] == [512, 1024] and len(suite["evaluated"]) == 10
    assert suite["summary"]["effective_length"]["threshold"] == 85.6  # length-controlled
    assert "weighting" not in suite
    zero = json.loads((runs["0k"] / "results.json").read_text())["suites"]["babilong-0k"]
    assert zero["lengths"] == [0] and zero["summary"]["effective_length"]["label"] == "n/a"


def test_report_plan_and_leaderboard(runs, tmp_path, capsys):
    assert main(["report", str(runs["a"]), str(runs["0k"])]) == 0
    printed = capsys.readouterr().out
    assert "babilong_qa10" in printed and "babilong_0k_qa1" in printed
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
    assert "babilong_qa7" in html  # the per-task x length grid of the drill-down
