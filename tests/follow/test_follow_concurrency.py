"""Followers beside each other and beside a plain eval: no sample computed twice (the store's run
lock, the plan made again inside it); a checkpoint pruned before its turn is skipped with one line,
one pruned while it is evaluated keeps its records; SIGTERM stops a follower cleanly and the same
command resumes without computing anything again."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter

import pytest

from harness.cli import main
from harness.models.run_end import RUN_END_FILE

from .helpers import EVAL_FLAGS, by_key, harness_cmd, records, train_argv


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpus):
    """A finished run with ckpt-1..3 and its end-of-run marker."""
    run = tmp_path_factory.mktemp("trained") / "run"
    assert main(train_argv(run, corpus, steps=3, keep_last=3)) == 0
    assert sorted(p.name for p in run.glob("ckpt-*")) == ["ckpt-1", "ckpt-2", "ckpt-3"]
    return run


def _copy(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    return run


def _cfg(ckpts, out, samples=2):
    from harness.pipeline.eval_config import EvalConfig

    return EvalConfig(
        ckpts=str(ckpts), tasks=["niah_single_1"], lengths="512", samples=samples, out=str(out), progress=False
    )


@pytest.fixture
def counted(monkeypatch):
    """Every sample handed to a runner, by (checkpoint, task, length, index)."""
    from harness.pipeline import evaluate

    counts: Counter = Counter()
    lock = threading.Lock()
    original = evaluate.run_job

    def counting(job):
        with lock:
            for item in job.items:
                counts[(job.ckpt.fingerprint, item.task.name, item.sample.length, item.sample.index)] += 1
        return original(job)

    monkeypatch.setattr(evaluate, "run_job", counting)
    return counts


def test_two_followers_and_a_plain_eval_compute_each_sample_once(trained, tmp_path, counted):
    from harness.pipeline.evaluate import run_eval
    from harness.pipeline.follow import FollowOptions, follow
    from tasks.registry import get_task

    get_task("niah_single_1")  # the registry fills itself on first use, once per process, not per thread
    run, out = _copy(trained, tmp_path), tmp_path / "out"
    errors: list[BaseException] = []

    def guarded(fn, *args):
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread below
            errors.append(exc)

    opts = FollowOptions(str(run), poll_seconds=0.1)
    threads = [
        threading.Thread(target=guarded, args=(follow, _cfg(run, out, 4), opts)),
        threading.Thread(target=guarded, args=(follow, _cfg(run, out, 4), opts)),
        threading.Thread(target=guarded, args=(run_eval, _cfg(f"{run}/ckpt-*", out, 4))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert len(counted) == 3 * 4 and set(counted.values()) == {1}, counted
    assert len(by_key(records(out))) == 12  # each stored once


def test_pruned_before_its_turn_or_while_evaluated(trained, tmp_path, monkeypatch, capsys):
    from harness.pipeline import planning
    from harness.pipeline.follow import FollowOptions, follow
    from harness.pipeline.store import ResultStore

    run, out = _copy(trained, tmp_path), tmp_path / "out"
    plan_eval, append = planning.plan_eval, ResultStore.append

    def pruning_plan(cfg):  # training prunes ckpt-2 once the follower has listed it
        if cfg.ckpts.endswith("ckpt-2") and (run / "ckpt-2").exists():
            shutil.rmtree(run / "ckpt-2")
        return plan_eval(cfg)

    def pruning_store(self, recs):  # ... and ckpt-3 after the first of its records is stored
        n = append(self, recs)
        if any(r["checkpoint"]["path"].endswith("ckpt-3") for r in recs) and (run / "ckpt-3").exists():
            shutil.rmtree(run / "ckpt-3")
        return n

    monkeypatch.setattr(planning, "plan_eval", pruning_plan)
    monkeypatch.setattr(ResultStore, "append", pruning_store)
    cfg = _cfg(run, out, samples=3)
    summary = follow(cfg.__class__(**{**cfg.__dict__, "batch_size": 1}), FollowOptions(str(run), poll_seconds=0.1))
    said = capsys.readouterr()
    assert summary["evaluated"] == [1, 3] and summary["skipped"] == [2], said.out
    assert "[follow] skipped ckpt-2: training removed it" in said.out and "Traceback" not in said.err
    steps = Counter(r["checkpoint"]["step"] for r in records(out))
    assert steps[1] == 3 and 1 <= steps[3] <= 3 and 2 not in steps  # ckpt-3 keeps what was stored
    history = json.loads((out / "follow.json").read_text())
    assert [(c["step"], c["present"]) for c in history["checkpoints"]] == [(1, True), (3, False)]


def test_sigterm_stops_cleanly_and_the_same_command_resumes(trained, tmp_path):
    run, out = _copy(trained, tmp_path), tmp_path / "out"
    (run / RUN_END_FILE).unlink()  # training goes on, as far as the follower knows
    cmd = harness_cmd("eval", "--follow", run, *EVAL_FLAGS, "--out", out, "--follow-poll", "0.2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        done = (out / "follow.json").exists() and len(json.loads((out / "follow.json").read_text())["checkpoints"]) == 3
        if done:
            break
        time.sleep(0.3)
    time.sleep(0.5)  # waiting for the next checkpoint now
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert (
        stderr.strip().splitlines()[-1]
        == "follow stopped (SIGTERM): finished results are kept; the same command resumes"
    )
    assert "[follow] waiting for the next checkpoint" in stdout
    (run / RUN_END_FILE).write_text(json.dumps({"schema_version": 1, "last_step": 3, "checkpoints": [1, 2, 3]}))
    again = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "ended at step 3: evaluated 3 checkpoints (0 samples computed by this follower)" in again.stdout
    assert len(by_key(records(out))) == 6
