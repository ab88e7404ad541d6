"""`harness demo` end to end, reduced (few steps, 1K only), from the shipped base model, and its input errors.

These tests check the pipeline (stages, checkpoints kept, results averaged over them, leaderboard
with the anchor-minus-full view, resume) and that the default base model gives non-zero scores
(tests/demo/test_shipped_base.py checks that model itself against a random one).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.cli import main
from harness.demo import DEFAULT_MODEL

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
    assert "[demo 1/7]" in stdout and "[demo 7/7]" in stdout
    assert "anchor - full" in stdout
    assert f"leaderboard: {out / 'leaderboard' / 'index.html'}" in stdout
    assert f"from {DEFAULT_MODEL}" in stdout


@pytest.mark.slow
def test_demo_from_the_shipped_base_scores_above_zero(demo_run):
    out, _ = demo_run
    for name in ("base", "full", "anchor"):
        suite = next(iter(json.loads((out / "results" / name / "results.json").read_text())["suites"].values()))
        assert suite["per_task"]["niah_single_1"]["1024"]["mean"] > 0, name


def test_missing_shipped_base_names_the_fix(tmp_path, capsys, monkeypatch):
    from harness import demo

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
        (["--model", "/nonexistent/model"], "is not a save_pretrained directory"),
        (["--lengths", "4k-1k"], "reversed length range"),
        (["--tasks", "no_such_task"], "unknown task"),
        (["--modes", "full,sideways"], "unknown --modes sideways"),
        (["--samples", "0"], "--samples 0 must be at least 1"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    assert main(["demo", "--out", str(tmp_path / "out"), *argv]) == 2
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
