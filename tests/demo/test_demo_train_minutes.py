"""`harness demo --train-minutes`: the first mode trains until its time is up, the others the same
number of steps (equal tokens), through the real `harness train` on the shipped demo base."""

from __future__ import annotations

import pytest

from harness import demo


def test_first_mode_sets_the_steps_of_the_others(tmp_path, monkeypatch, capsys):
    from training import demo_corpus, loop

    ticks = iter(range(0, 10_000, 60))  # training's clock: one minute per reading
    monkeypatch.setattr(loop, "_clock", lambda: float(next(ticks)))
    data = tmp_path / "corpus.jsonl"
    demo_corpus.write(data, 30, seed=0)
    cfg = demo.DemoConfig(window=64, steps=50, save_every=10, keep_last=2, train_minutes=2.5, corpus_docs=30)
    seen = []
    runs, steps = demo.train_modes(cfg, str(data), tmp_path, seen.append)
    assert list(runs) == ["full", "anchor"] and steps == 3
    assert "up to 50 steps or 2.5 minutes" in seen[0] and "3 steps at window 64" in seen[1]
    # full: readings 0 (start), 60, 120, 180 s after steps 1-3: the time is up after step 3.
    assert [p.name for p in runs["full"].glob("ckpt-*")] == ["ckpt-3"]
    assert sorted(p.name for p in runs["anchor"].glob("ckpt-*")) == ["ckpt-3"]
    assert "full reached step 3 in its 2.5 minutes; anchor: 3 steps too" in capsys.readouterr().out


@pytest.mark.parametrize("value, message", [("0", "--train-minutes 0.0 must be greater than 0"), ("-2", "-2.0")])
def test_train_minutes_must_be_positive(tmp_path, capsys, value, message):
    from harness.cli import main

    assert main(["demo", "--out", str(tmp_path / "out"), "--train-minutes", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_the_steps_reported_are_the_ones_the_runs_hold(tmp_path):
    """Re-run over a folder whose runs trained further (3 steps, now --steps 1): training has nothing to
    do and the demo evaluates the step-3 checkpoints, so the steps it reports are 3, not the 1 asked."""
    from training import demo_corpus

    data = tmp_path / "corpus.jsonl"
    demo_corpus.write(data, 30, seed=0)
    for steps in (3, 1):
        cfg = demo.DemoConfig(window=64, steps=steps, save_every=1, keep_last=2, corpus_docs=30)
        runs, trained = demo.train_modes(cfg, str(data), tmp_path, lambda line: None)
        assert trained == 3
    assert sorted(p.name for p in runs["full"].glob("ckpt-*")) == ["ckpt-2", "ckpt-3"]
