"""`harness train --max-minutes`: stop at the step where the time runs out, checkpoint there, resume
with only what is left of the budget.

A fake clock drives the loop (each reading 60 s after the last), so where the run stops is exact.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from .helpers import small_job


@pytest.fixture
def minute_clock(monkeypatch):
    """--max-minutes' clock: every reading is one minute after the previous one."""
    from training import loop

    ticks = itertools.count(0.0, 60.0)
    monkeypatch.setattr(loop, "_clock", lambda: next(ticks))


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_stops_where_time_runs_out_and_equals_a_shorter_run(tiny_llama_dir, run_job, tmp_path, minute_clock):
    # Readings: start 0, after step 1 at 60 s, step 2 at 120 s, step 3 at 180 s >= 2.5 min: stop after step 3.
    job = small_job(tiny_llama_dir, tmp_path / "timed", steps=10, save_every=4, keep_last=2, max_minutes=2.5)
    summary = run_job(job)
    assert summary["stopped_early"] and summary["steps"] == 3 and len(summary["losses"]) == 3
    run = tmp_path / "timed"
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("ckpt-")) == ["ckpt-3"]
    assert (run / "state" / "step-3" / "state.pt").is_file()
    # The lr schedule is warmup-then-constant: stopping at 3 trains exactly what --steps 3 does.
    plain = run_job(small_job(tiny_llama_dir, tmp_path / "plain", steps=3, save_every=4, keep_last=2))
    assert plain["losses"] == summary["losses"]
    a, b = _weights(run / "ckpt-3"), _weights(tmp_path / "plain" / "ckpt-3")
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)


def test_a_timed_run_keeps_the_newest_checkpoints_before_where_it_stopped(
    tiny_llama_dir, run_job, tmp_path, minute_clock
):
    # Stops after step 5 (300 s >= 4.5 min); every step is a multiple of 1, the newest 3 stay.
    run = tmp_path / "run"
    summary = run_job(small_job(tiny_llama_dir, run, steps=50, save_every=1, keep_last=3, max_minutes=4.5))
    assert summary["steps"] == 5
    assert [Path(p).name for p in summary["checkpoints"]] == ["ckpt-3", "ckpt-4", "ckpt-5"]  # the pruned not named
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("ckpt-")) == ["ckpt-3", "ckpt-4", "ckpt-5"]
    # save_every 2: multiples 2 and 4 were written as it went, 5 where it stopped; the newest 2 stay.
    other = tmp_path / "other"
    run_job(small_job(tiny_llama_dir, other, steps=50, save_every=2, keep_last=2, max_minutes=4.5))
    assert sorted(p.name for p in other.iterdir() if p.name.startswith("ckpt-")) == ["ckpt-4", "ckpt-5"]


def test_rerun_after_the_budget_is_spent_does_nothing_and_a_larger_budget_goes_on(
    tiny_llama_dir, run_job, tmp_path, minute_clock
):
    from training.checkpointing import load_latest_state

    run = tmp_path / "run"
    first = run_job(small_job(tiny_llama_dir, run, steps=10, save_every=4, keep_last=2, max_minutes=1.5))
    assert first["steps"] == 2 and first["stopped_early"]
    assert load_latest_state(run)["train_seconds"] == 120.0
    again = run_job(small_job(tiny_llama_dir, run, steps=10, save_every=4, keep_last=2, max_minutes=1.5))
    assert again["losses"] == [] and again["steps"] == 2 and again["stopped_early"]
    # 3.5 minutes in all: 120 s spent, then steps 3 and 4 at 60 s each reach 240 s >= 210 s.
    more = run_job(small_job(tiny_llama_dir, run, steps=10, save_every=4, keep_last=2, max_minutes=3.5))
    assert more["resumed_from"] == 2 and more["steps"] == 4 and len(more["losses"]) == 2
    assert load_latest_state(run)["train_seconds"] == 240.0
    # Without a limit it runs to --steps; the schedule's last two checkpoints stay.
    rest = run_job(small_job(tiny_llama_dir, run, steps=10, save_every=4, keep_last=2))
    assert rest["steps"] == 10 and not rest["stopped_early"]
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("ckpt-")) == ["ckpt-10", "ckpt-8"]


def test_a_budget_longer_than_the_run_changes_nothing(tiny_llama_dir, run_job, tmp_path, minute_clock):
    summary = run_job(small_job(tiny_llama_dir, tmp_path / "run", steps=3, save_every=2, keep_last=2, max_minutes=60))
    assert summary["steps"] == 3 and not summary["stopped_early"]
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if p.name.startswith("ckpt-")) == ["ckpt-2", "ckpt-3"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_max_minutes_must_be_positive(value, capsys):
    from harness.cli import main

    argv = ["train", "--model", "m", "--data", "d.jsonl", "--out", "o", "--mode", "anchor", "--window", "64"]
    try:  # a value that is no finite number stops argparse (exit 2); one out of range is a UserError
        code = main(argv + ["--steps", "2", "--max-minutes", value])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "--max-minutes" in err and value in err, err


def test_state_with_a_bad_train_seconds_is_unreadable(tmp_path):
    import torch

    from training.checkpointing import STATE_FORMAT, _load_state_file

    base = dict.fromkeys(("step", "signature", "model", "optimizer", "scheduler", "rng", "data"), 0)
    for bad in (-1.0, float("nan"), "12", True):
        path = tmp_path / "state.pt"
        torch.save({**base, "format": STATE_FORMAT, "train_seconds": bad}, path)
        with pytest.raises(ValueError, match="train_seconds"):
            _load_state_file(path)
    torch.save({**base, "format": STATE_FORMAT}, path)  # states from before the limit still load
    assert "train_seconds" not in _load_state_file(path)


def _ckpts(run) -> list[str]:
    return sorted((p.name for p in run.glob("ckpt-*")), key=lambda n: int(n[5:]))


def test_a_restart_after_a_kill_keeps_its_own_newest_checkpoints(tiny_llama_dir, run_job, tmp_path, minute_clock):
    """A timed run killed with no state restarts from step 0 beside the ckpt-4/ckpt-5 it wrote before:
    those must not count towards --keep-last (they deleted the new checkpoints as they were written),
    and where the new run stops short of them they go, as finish() prunes any other off-schedule one."""
    run = tmp_path / "run"
    job = lambda minutes: small_job(tiny_llama_dir, run, steps=50, save_every=1, keep_last=2, max_minutes=minutes)
    run_job(job(100), stop_after=5)  # "killed" after step 5: no state (no --save-state-every)
    assert _ckpts(run) == ["ckpt-4", "ckpt-5"] and not (run / "state").exists()
    summary = run_job(job(2.5))  # readings 60 s apart from 0: the time is up after step 3
    assert summary["steps"] == 3 and summary["stopped_early"]
    assert _ckpts(run) == ["ckpt-2", "ckpt-3"]
    assert [Path(p).name for p in summary["checkpoints"]] == ["ckpt-2", "ckpt-3"]


def test_a_budget_already_spent_still_leaves_a_checkpoint_where_it_stops(
    tiny_llama_dir, run_job, tmp_path, minute_clock
):
    """The state of an earlier, longer run (saved every 2 steps, checkpoints every 10) already holds more
    time than the new --max-minutes: nothing is trained, and the step it stops at gets its checkpoint."""
    from training.checkpointing import load_latest_state

    run = tmp_path / "run"
    job = lambda **kw: small_job(tiny_llama_dir, run, steps=50, save_every=10, keep_last=2, save_state_every=2, **kw)
    run_job(job(), stop_after=5)
    assert load_latest_state(run)["step"] == 4 and _ckpts(run) == []
    summary = run_job(job(max_minutes=3))  # the state holds 240 s
    assert summary["losses"] == [] and summary["steps"] == 4 and summary["stopped_early"]
    assert _ckpts(run) == ["ckpt-4"] and [Path(p).name for p in summary["checkpoints"]] == ["ckpt-4"]
    again = run_job(job(max_minutes=3))  # and it is written once
    assert again["checkpoints"] == [] and _ckpts(run) == ["ckpt-4"]


def test_stopped_by_another_ranks_clock_the_state_says_the_budget_is_spent(
    tiny_llama_dir, run_job, tmp_path, minute_clock, monkeypatch
):
    """Ranks stop together when any rank's time is up; rank 0's own clock may be short of the budget
    then. The state must still say it is spent, or the same command trains another step."""
    from training import loop
    from training.checkpointing import load_latest_state

    calls = itertools.count(1)
    monkeypatch.setattr(loop, "_time_is_up", lambda ctx, mine: mine or next(calls) >= 2)  # another rank, at step 2
    run = tmp_path / "run"
    job = small_job(tiny_llama_dir, run, steps=10, save_every=4, keep_last=2, max_minutes=2.5)
    first = run_job(job)
    assert first["steps"] == 2 and first["stopped_early"]  # rank 0's clock: 120 s of 150
    assert load_latest_state(run)["train_seconds"] == 150.0
    again = run_job(job)
    assert again["losses"] == [] and again["steps"] == 2
