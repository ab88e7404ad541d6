"""`harness train --follow-eval`: the follower's records equal, bit for bit (timings aside), those of a
plain `harness eval` of the checkpoints training kept; its scores are in the run's log.jsonl and
TensorBoard event files; a failing follower never stops training; bad flags stop before training."""

from __future__ import annotations

import importlib
import json
import shlex

import numpy as np
import pytest

from harness.cli import main

from .helpers import EVAL_FLAGS, by_key, records, train_argv


@pytest.fixture(scope="module")
def followed(tmp_path_factory, corpus):
    """A --max-minutes run (it checkpoints every step and prunes to the newest 2 as it goes) with its
    follower, then a plain eval of what is left."""
    root = tmp_path_factory.mktemp("followed")
    run, out, plain = root / "run", root / "follow-out", root / "plain-out"
    flags = shlex.join([*EVAL_FLAGS, "--out", str(out), "--follow-poll", "0.2", "--no-gain-after", "2"])
    argv = train_argv(run, corpus, "--keep-last", "2", "--max-minutes", "60", "--log-to", "tensorboard")
    assert main([*argv, "--follow-eval", flags]) == 0
    assert main(["eval", "--ckpts", f"{run}/ckpt-*", *EVAL_FLAGS, "--out", str(plain)]) == 0
    return run, out, plain


def test_follower_records_equal_a_plain_eval(followed, capfd):
    run, out, plain = followed
    kept = sorted(p.name for p in run.glob("ckpt-*"))
    assert kept == ["ckpt-3", "ckpt-4"]
    mine = by_key(records(out))  # no sample stored twice
    theirs = by_key(records(plain))
    kept_fps = {r["checkpoint"]["fingerprint"] for r in records(plain)}
    assert {k: v for k, v in mine.items() if k[0] in kept_fps} == theirs
    a, b = (json.loads((d / "results.json").read_text()) for d in (out, plain))
    assert a["suites"] == b["suites"]
    assert [c["fingerprint"] for c in a["run"]["checkpoints"]] == [c["fingerprint"] for c in b["run"]["checkpoints"]]
    history = json.loads((out / "follow.json").read_text())
    steps = [c["step"] for c in history["checkpoints"]]
    assert steps[-2:] == [3, 4] and all(c["train_tokens"] == 256 * c["step"] for c in history["checkpoints"])


def test_scores_are_in_the_run_log_and_tensorboard(followed):
    from training.logging import read_log

    run, out, _ = followed
    rows = [r for r in read_log(run / "log.jsonl") if "eval_fingerprint" in r]
    history = json.loads((out / "follow.json").read_text())
    assert [r["step"] for r in rows] == [c["step"] for c in history["checkpoints"]]
    for row, point in zip(rows, history["checkpoints"]):
        assert row["eval/custom/512"] == point["suites"]["custom"]["per_length"]["512"]
        assert row["eval_fingerprint"] == point["fingerprint"]
    assert [r["step"] for r in read_log(run / "log.jsonl") if "loss" in r] == [1, 2, 3, 4]
    reader = importlib.import_module("tensorboard.backend.event_processing.event_accumulator")
    acc = reader.EventAccumulator(str(run / "tensorboard" / "eval"), size_guidance={"scalars": 0})
    acc.Reload()
    for tag in ("eval/custom/512", "eval/custom/effective_length", "eval/degenerate/at_max", "eval/train_tokens"):
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert got == [(r["step"], float(np.float32(r[tag]))) for r in rows], tag
    loss = importlib.import_module("tensorboard.backend.event_processing.event_accumulator").EventAccumulator(
        str(run / "tensorboard"), size_guidance={"scalars": 0}
    )
    loss.Reload()
    assert [e.step for e in loss.Scalars("loss")] == [1, 2, 3, 4]  # the training's own run, beside it


def test_a_failing_follower_never_stops_training(tmp_path, corpus, capfd):
    from training.logging import read_log

    run = tmp_path / "run"
    bad = "--tasks niah_single_1 --lengths 64k --samples 1 --follow-poll 0.2"  # beyond the model's context
    assert main([*train_argv(run, corpus, steps=2), "--follow-eval", bad]) == 0
    err = capfd.readouterr().err
    assert "warning: the follower exited with code 2" in err and "restart it by hand: harness eval --follow" in err
    assert (run / "ckpt-2").is_dir()
    events = [r for r in read_log(run / "log.jsonl") if r.get("event") == "follower_exited"]
    assert len(events) == 1 and events[0]["code"] == 2


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--follow-eval", "--bogus-flag 1"],
            "--follow-eval: unrecognized arguments: --bogus-flag 1 (see `harness eval --help`)",
        ),
        (
            ["--follow-eval", "--ckpts x --tasks niah_single_1"],
            "--follow picks the run's checkpoints itself: drop --ckpts",
        ),
        (["--follow-eval", "--tasks 'niah_single_1"], "cannot be split into flags"),
        (["--follow-eval", "--tasks niah_single_1", "--eval-device", "gpu1"], "pass cpu or cuda:N"),
        (["--eval-device", "cpu"], "--eval-device is for --follow-eval"),
    ],
)
def test_bad_follow_flags_stop_before_training(tmp_path, corpus, capfd, extra, message):
    run = tmp_path / "run"
    assert main([*train_argv(run, corpus, steps=1), *extra]) == 2
    err = capfd.readouterr().err.strip()
    assert message in err and err.count("\n") == 0 and "Traceback" not in err
    assert not run.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--leaderboard", "site"], "--leaderboard is for --follow RUN_DIR"),
        (["--follow", "run", "--ckpts", "x"], "drop --ckpts"),
        (["--follow", "run", "--last", "2"], "drop --last"),
        (["--follow", "run", "--follow-poll", "0"], "--follow-poll 0.0 must be greater than 0"),
        (["--follow", "run", "--no-gain-after", "-1"], "--no-gain-after -1 must be at least 0"),
        (["--follow", "nowhere"], "--follow nowhere does not exist: pass the --out folder of a harness train run"),
        (["--follow", "afile"], "--follow afile is not a folder"),
    ],
)
def test_bad_follow_flags_of_eval(tmp_path, capfd, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "afile").write_text("")
    assert main(["eval", *argv, "--tasks", "niah_single_1"]) == 2
    err = capfd.readouterr().err.strip()
    assert message in err and err.count("\n") == 0
