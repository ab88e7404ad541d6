"""The end-of-run marker a follower waits for (harness/models/run_end.py): written atomically when a
run has ended, never by a run cut short, removed as soon as the next `harness train` holds the run,
and the tokens per step every checkpoint records."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import UserError
from harness.models.run_end import RUN_END_FILE, complete_checkpoints, read_run_end, unmarked_checkpoints

from .helpers import small_job


def test_marker_written_at_the_end_only(tiny_llama_dir, run_job, tmp_path):
    run = tmp_path / "run"
    job = small_job(tiny_llama_dir, run, steps=4, save_every=1, keep_last=2, save_state_every=1)
    run_job(job, stop_after=2)  # as if killed after step 2: no marker
    assert read_run_end(run) is None and not (run / RUN_END_FILE).exists()
    assert [s for s, _ in complete_checkpoints(run)] == []  # steps 1-2 are outside the last-2 schedule
    run_job(job)
    end = read_run_end(run)
    assert end is not None and end.last_step == 4 and not end.stopped_early and end.checkpoints == (3, 4)
    assert [s for s, _ in complete_checkpoints(run)] == [3, 4]
    meta = json.loads((run / "ckpt-4" / "harness_training.json").read_text())
    assert meta["tokens_per_step"] == 128 * 2 * 1 * 1  # window x batch x accumulation x ranks


def test_a_run_that_trains_removes_the_marker_before_its_steps(tiny_llama_dir, run_job, tmp_path, monkeypatch):
    from training import loop

    run = tmp_path / "run"
    run_job(small_job(tiny_llama_dir, run, steps=2, save_every=1, keep_last=2))
    assert read_run_end(run).last_step == 2
    seen = []
    original = loop._run_steps

    def spy(*args, **kw):  # what a follower sees while the longer run trains
        seen.append(read_run_end(run))
        return original(*args, **kw)

    monkeypatch.setattr(loop, "_run_steps", spy)
    run_job(small_job(tiny_llama_dir, run, steps=3, save_every=1, keep_last=2))
    assert seen == [None]
    assert read_run_end(run).last_step == 3


def test_a_finished_run_rerun_keeps_its_marker(tiny_llama_dir, run_job, tmp_path):
    run = tmp_path / "run"
    job = small_job(tiny_llama_dir, run, steps=2, save_every=1, keep_last=2)
    run_job(job)
    run_job(job)  # nothing to train: it says so and marks the end again
    assert read_run_end(run).last_step == 2


def test_a_refused_run_leaves_the_marker(tiny_llama_dir, run_job, tmp_path):
    run = tmp_path / "run"
    run_job(small_job(tiny_llama_dir, run, steps=2, save_every=1, keep_last=2))
    with pytest.raises(UserError, match="other settings"):
        run_job(small_job(tiny_llama_dir, run, steps=3, save_every=1, keep_last=2, seed=1))
    assert read_run_end(run).last_step == 2


@pytest.mark.parametrize(
    "text, found",
    [
        ("{", "not JSON"),
        ('{"schema_version": 1}', '"last_step" is missing'),
        ('{"schema_version": 1, "last_step": "7"}', '"last_step"'),
        ('{"schema_version": 1, "last_step": -1}', '"last_step"'),
    ],
)
def test_a_damaged_marker_is_one_line(tmp_path, text, found):
    (tmp_path / RUN_END_FILE).write_text(text)
    with pytest.raises(UserError) as err:
        read_run_end(tmp_path)
    assert found in str(err.value) and "\n" not in str(err.value) and "delete it" in str(err.value)


def test_only_marked_checkpoints_count(tmp_path):
    from harness.models.checkpoints import COMPLETE_FILE, IN_PROGRESS_FILE

    (tmp_path / "ckpt-5").mkdir()  # another tool's: no marker
    (tmp_path / "ckpt-6").mkdir()
    (tmp_path / "ckpt-6" / IN_PROGRESS_FILE).write_text("")
    (tmp_path / "ckpt-7").mkdir()
    (tmp_path / "ckpt-7" / "config.json").write_text("{}")
    (tmp_path / "ckpt-7" / COMPLETE_FILE).write_text(
        json.dumps({"schema_version": 1, "step": 7, "files": {"config.json": 2}})
    )
    (tmp_path / "ckpt-8").mkdir()  # lists a file that is gone
    (tmp_path / "ckpt-8" / COMPLETE_FILE).write_text(json.dumps({"schema_version": 1, "step": 8, "files": {"x": 1}}))
    assert [s for s, _ in complete_checkpoints(tmp_path)] == [7]
    assert [p.name for p in unmarked_checkpoints(tmp_path)] == ["ckpt-5"]
