"""A follower's rows in the training run's logs (training/score_log.py): each checkpoint once, again
after a resumed trainer dropped it, never appended blind to a log it cannot read; TensorBoard only when
the run logs there."""

from __future__ import annotations

import json

from training.logging import read_log
from training.score_log import ScoreLog


def _row(step, fp="f", score=50.0):
    return {"step": step, "eval_checkpoint": f"ckpt-{step}", "eval_fingerprint": fp, "eval/custom/1024": score}


def test_each_row_once_and_again_after_a_resume_dropped_it(tmp_path):
    (tmp_path / "log.jsonl").write_text(json.dumps({"step": 1, "loss": 2.0}) + "\n")
    log = ScoreLog(tmp_path)
    assert log.sync([_row(1), _row(2)]) == 2
    assert log.sync([_row(1), _row(2)]) == 0
    assert log.sync([_row(1), _row(2, fp="g")]) == 1  # ckpt-2 rewritten with other weights: a new row
    # a trainer resumed from step 1 keeps the rows up to it (training.logging.JsonlSink)
    kept = [r for r in read_log(tmp_path / "log.jsonl") if r["step"] <= 1]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    assert log.sync([_row(1), _row(2, fp="g")]) == 1
    rows = read_log(tmp_path / "log.jsonl")
    assert [(r["step"], r.get("eval_fingerprint")) for r in rows] == [(1, None), (1, "f"), (2, "g")]
    assert not (tmp_path / "tensorboard").exists()  # the run does not log there: nothing made
    log.close()


def test_an_unreadable_log_gets_nothing(tmp_path, capsys):
    (tmp_path / "log.jsonl").write_text('{"step": 1\n{"step": 2, "loss": 1.0}\n')  # a damaged middle line
    log = ScoreLog(tmp_path)
    assert log.sync([_row(1)]) == 0 and log.sync([_row(1)]) == 0
    assert capsys.readouterr().err.count("warning: cannot log checkpoint scores") == 1
    assert (tmp_path / "log.jsonl").read_text().count("\n") == 2


def test_no_run_folder_yet(tmp_path):
    assert ScoreLog(tmp_path / "later").sync([_row(1)]) == 0
