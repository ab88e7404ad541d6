"""`harness demo` end to end, reduced (few steps, 1K only), from the shipped base model, and its input errors.

These tests check the pipeline (stages, bf16 checkpoints kept, results averaged over them, the RoPE
diagnostic of the base and each run's last checkpoint in bf16 and fp32, leaderboard with the
anchor-minus-full view and the RoPE section, the summary of what the run can show, resume) and
that the default base model gives non-zero scores (tests/demo/test_shipped_base.py checks that
model itself against a random one).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.cli import main
from harness.demo.config import DEFAULT_MODEL

REDUCED = [
    "--window",
    "512",
    "--steps",
    "4",
    "--save-every",
    "2",
    "--keep-last",
    "2",
    "--lengths",
    "1k",
    "--tasks",
    "niah_single_1,vt",
    "--samples",
    "8",
    "--corpus-docs",
    "40",
    "--rope-samples",
    "1",
    "--rope-len",
    "128",
]


@pytest.fixture(scope="module")
def reduced():
    return list(REDUCED)  # the default --model: the shipped assets/demo-base


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, reduced):
    out = tmp_path_factory.mktemp("demo") / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "demo", "--out", str(out), *reduced],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


@pytest.mark.slow
def test_demo_writes_checkpoints_results_and_leaderboard(demo_run):
    out, stdout = demo_run
    for mode in ("full", "anchor"):
        ckpts = sorted(p.name for p in (out / "runs" / mode).glob("ckpt-*"))
        assert ckpts == ["ckpt-2", "ckpt-4"]
        meta = json.loads((out / "runs" / mode / "ckpt-4" / "harness_training.json").read_text())
        assert meta["mode"] == mode and meta["window"] == 512
        assert meta["job"]["model"]["dtype"] == "bf16"  # the default, as the paper
    for name, n_ckpts in (("base", 1), ("full", 2), ("anchor", 2)):
        res = json.loads((out / "results" / name / "results.json").read_text())
        assert res["run"]["name"] == name and len(res["run"]["checkpoints"]) == n_ckpts
        suite = next(iter(res["suites"].values()))
        assert sorted(suite["evaluated"]) == ["niah_single_1", "vt"]
        assert suite["per_task"]["niah_single_1"]["1024"]["n"] == n_ckpts
    html = (out / "leaderboard" / "index.html").read_text()
    for name in ("base", "full", "anchor"):
        assert name in html
    assert (out / "leaderboard" / "leaderboard-delta.csv").exists()  # the anchor-minus-full view
    # progress lines, the summary table and the leaderboard path are printed
    assert "[demo 1/8]" in stdout and "[demo 8/8]" in stdout
    assert "anchor - full" in stdout
    assert f"leaderboard: {out / 'leaderboard' / 'index.html'}" in stdout
    assert f"in bf16 from {DEFAULT_MODEL}" in stdout


@pytest.mark.slow
def test_demo_prints_each_runs_curve_as_it_grows(demo_run):
    """Each run's checkpoints are evaluated by its follower as training writes them (harness/demo/follow.py)."""
    out, stdout = demo_run
    for mode in ("full", "anchor"):
        first, last = (
            stdout.index(f"[follow] {mode}/ckpt-2 (step 2 · "),
            stdout.index(f"[follow] {mode}/ckpt-4 (step 4 · "),
        )
        assert first < last
        assert "  vs step 2 (previous): 1K " in stdout[last:]
        history = json.loads((out / "results" / mode / "follow.json").read_text())
        assert [(c["step"], c["train_tokens"]) for c in history["checkpoints"]] == [(2, 1024), (4, 2048)]
    assert stdout.index("[follow] full/ckpt-4") < stdout.index("[demo 7/8]")  # before the RoPE stage


@pytest.mark.slow
def test_demo_measures_rope_on_base_and_last_checkpoints(demo_run):
    out, stdout = demo_run
    diag = json.loads((out / "diagnose" / "rope_diagnostic.json").read_text())
    got = {(r["name"], r["dtype"]): r for r in diag["runs"]}
    assert set(got) == {(n, d) for n in ("base", "full", "anchor") for d in ("bf16", "fp32")}
    assert got["full", "bf16"]["checkpoint"] == str(out / "runs" / "full" / "ckpt-4")
    assert got["base", "bf16"]["checkpoint"] == str(DEFAULT_MODEL)
    for name in ("base", "full", "anchor"):
        bf16, fp32 = got[name, "bf16"]["D"]["mean"][0], got[name, "fp32"]["D"]["mean"][0]
        assert bf16 > 100 * fp32 > 0, (name, bf16, fp32)  # the paper's finding: bf16 breaks RoPE's shift invariance
    table = stdout[stdout.index("RoPE under bf16") :]
    assert "runs/full/ckpt-4" in table and "demo-base" in table and "first token bf16" in table
    html = (out / "leaderboard" / "index.html").read_text()
    assert 'id="lb-rope"' in html and "runs/anchor/ckpt-4" in html


@pytest.mark.slow
def test_demo_summary_says_what_the_run_can_show(demo_run):
    _, stdout = demo_run
    summary = stdout[stdout.index("what this run can and cannot show:") :]
    assert "- training precision: bf16" in summary
    assert "% of the training tokens sit in the" in summary and "span the 512-token window" in summary
    assert "weak evidence about the paper's 7B/64K result" in summary
    assert "- RoPE: under a shift of every position id, bf16 changes attention" in summary
    assert any(w in summary for w in ("anchor beats full", "anchor LOSES to full", "anchor and full TIE"))
    assert "% of the tokens are in documents that span the 512-token window" in stdout  # stage 1's line


@pytest.mark.slow
def test_demo_page_says_what_each_row_is(demo_run):
    out, _ = demo_run
    board = json.loads((out / "leaderboard" / "leaderboard.json").read_text())
    rows = {r["run"]: r for r in board["rows"]}
    assert (rows["base"]["model"], rows["base"]["mode"]) == ("demo-base", "—")
    assert (rows["full"]["model"], rows["full"]["mode"]) == ("runs/full", "full")
    assert (rows["anchor"]["model"], rows["anchor"]["mode"]) == ("runs/anchor", "anchor")
    html = (out / "leaderboard" / "index.html").read_text()
    assert "RULER: niah_single_1, vt" in html and ">custom<" not in html


@pytest.mark.slow
def test_demo_from_the_shipped_base_scores_above_zero(demo_run):
    out, _ = demo_run
    for name in ("base", "full", "anchor"):
        suite = next(iter(json.loads((out / "results" / name / "results.json").read_text())["suites"].values()))
        assert suite["per_task"]["niah_single_1"]["1024"]["mean"] > 0, name


def test_missing_shipped_base_names_the_fix(tmp_path, capsys, monkeypatch):
    from harness.demo import model as demo  # where the base model is checked

    monkeypatch.setattr(demo, "DEFAULT_MODEL", tmp_path / "assets" / "demo-base")
    assert main(["demo", "--out", str(tmp_path / "out"), "--model", str(tmp_path / "assets" / "demo-base")]) == 2
    err = capsys.readouterr().err
    assert "git checkout -- assets/demo-base" in err and "scripts/pretrain_demo_base.sh" in err


@pytest.mark.slow
def test_demo_rerun_resumes_without_new_work(demo_run, reduced):
    out, _ = demo_run
    before = {p: p.stat().st_mtime_ns for p in out.rglob("model.safetensors")}
    lines = {p: len(p.read_text().splitlines()) for p in (out / "results").glob("*/samples.jsonl")}
    assert main(["demo", "--out", str(out), *reduced]) == 0
    assert before == {p: p.stat().st_mtime_ns for p in out.rglob("model.safetensors")}
    assert lines == {p: len(p.read_text().splitlines()) for p in (out / "results").glob("*/samples.jsonl")}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "3", "--save-every", "2"], "fewer than --keep-last 5"),
        (["--model", "/nonexistent/model"], "/nonexistent/model is not a directory"),
        (["--long-share", "1.5"], "--long-share 1.5 is outside [0, 1]"),
        (["--long-share", "nan"], "--long-share: nan is not a finite number"),
        (["--rope-samples", "-1"], "--rope-samples -1 must be at least 0"),
        (["--rope-len", "1"], "--rope-len 1 must be at least 2"),
        (["--lengths", "4k-1k"], "reversed length range"),
        (["--tasks", "no_such_task"], "unknown task"),
        (["--modes", "full,sideways"], "unknown --modes sideways"),
        (["--samples", "0"], "--samples 0 must be at least 1"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    try:
        rc = main(["demo", "--out", str(tmp_path / "out"), *argv])
    except SystemExit as exc:  # refused by the parser (harness.core.validate: a float flag is finite)
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "out").exists()  # nothing is written before the input is checked


def test_demo_help_lists_scale_up_flags():
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "demo", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0
    for flag in ("--model", "--window", "--steps", "--lengths", "--tasks", "--save-every", "--keep-last", "--data"):
        assert flag in proc.stdout
