"""Evaluating a run folder while `harness train --keep-last` prunes it: a matched checkpoint that
disappears (while the run plans, or before its turn) is skipped with one line and the others are
evaluated; a checkpoint a killed training run left as .old-<name> is named (issue 40)."""

from __future__ import annotations

import json
import shutil

from harness.cli import main


def _run(tmp_path, ckpt_series, steps=(10, 20, 30)):
    root = tmp_path / "run"
    for step in steps:
        shutil.copytree(ckpt_series / f"ckpt-{step}", root / f"ckpt-{step}")
    return root


def _eval(root, out):
    return main(
        ["eval", "--ckpts", f"{root}/ckpt-*", "--tasks", "toy_digits", "--lengths", "1k", "--samples", "1",
         "--out", str(out), "--no-progress"]
    )  # fmt: skip


def _steps(out):
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    return sorted({r["checkpoint"]["step"] for r in recs})


def test_deleted_while_matching_is_skipped(ckpt_series, tmp_path, monkeypatch, capsys):
    import harness.models.sources.checkpoint as source

    root = _run(tmp_path, ckpt_series, (10, 20))
    original = source.incomplete_reason

    def pruning(path):  # the training run deletes ckpt-10 right after the glob matched it
        if path.endswith("ckpt-10"):
            shutil.rmtree(path)
        return original(path)

    monkeypatch.setattr(source, "incomplete_reason", pruning)
    out = tmp_path / "out"
    assert _eval(root, out) == 0
    err = capsys.readouterr().err
    assert "skipping checkpoint" in err and "ckpt-10" in err and "Traceback" not in err
    assert _steps(out) == [20]


def test_deleted_before_its_turn_is_skipped(ckpt_series, tmp_path, monkeypatch, capsys):
    from harness.pipeline import evaluate

    root = _run(tmp_path, ckpt_series, (10, 20))
    original = evaluate.run_job

    def pruned_first(job):  # planned, then deleted before its model loads
        if job.ckpt.path.endswith("ckpt-10"):
            shutil.rmtree(job.ckpt.path)
        return original(job)

    monkeypatch.setattr(evaluate, "run_job", pruned_first)
    out = tmp_path / "out"
    assert _eval(root, out) == 0
    err = capsys.readouterr().err
    assert "skipping checkpoint" in err and "ckpt-10" in err
    assert _steps(out) == [20]
    results = json.loads((out / "results.json").read_text())
    assert [c["step"] for c in results["run"]["checkpoints"]] == [20]


def test_a_checkpoint_set_aside_by_a_killed_run_is_named(ckpt_series, tmp_path, capsys):
    root = tmp_path / "run"
    shutil.copytree(ckpt_series / "ckpt-10", root / ".old-ckpt-10")
    assert _eval(root, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip()
    assert ".old-ckpt-10" in err and "re-run its train command" in err and err.count("\n") == 0
