"""`harness demo --eval-arg/--train-arg` mistakes are met before anything is trained (issue 49,
open since earlier rounds): the demo checked each command's flags alone, so a flag that only
planning checks (an unknown --exclude task, --lengths 3, --system-prompt without --chat, a bad
--max-new-tokens, an unknown --log-to sink, ...) was met by the eval after training, or by the
second mode's training, with the first mode's checkpoints written."""

from __future__ import annotations

import pytest

from harness.cli import main

SLIPPED = [
    ("--eval-arg=--exclude=no_such_task", "unknown task 'no_such_task'"),
    ("--eval-arg=--suite=no_such_suite", "unknown suite 'no_such_suite'"),
    ("--eval-arg=--lengths=3", "outside 250..1048576"),
    ("--eval-arg=--max-new-tokens=abc", "--max-new-tokens 'abc'"),
    ("--eval-arg=--system-prompt=hi", "--system-prompt needs --chat"),
    ("--eval-arg=--tasks=no_such_task", "unknown task 'no_such_task'"),
    ("--eval-arg=--alpha=0.5", "--alpha belongs to a sequential evaluation"),
    ("--eval-arg=--until-width=-1", "--until-width -1.0"),
    ("--train-arg=--log-to=bogus", "--log-to 'bogus' is not a log sink"),
]


@pytest.mark.parametrize(("arg", "phrase"), SLIPPED, ids=[a for a, _ in SLIPPED])
def test_a_stage_argument_planning_refuses_is_refused_before_training(arg, phrase, tiny_llama_dir, tmp_path, capsys):
    out = tmp_path / "demo"
    argv = ["demo", "--out", str(out), "--model", str(tiny_llama_dir), "--modes", "full,anchor", "--steps", "4",
            "--save-every", "2", "--keep-last", "2", "--no-base", arg]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and phrase in err and err.count("\n") == 0, err
    assert ("--eval-arg" in err) if arg.startswith("--eval-arg") else ("--train-arg" in err)
    assert not out.exists()  # nothing trained, nothing written
