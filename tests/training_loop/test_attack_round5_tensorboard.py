"""`harness train --log-to tensorboard` where RUN/tensorboard/ cannot be made (a file, a symbolic
link loop, a link to nothing, a read-only run folder) is one line, exit 2, before the model or data
is read (issue 49); before, SummaryWriter's makedirs raised FileExistsError after the model loaded."""

from __future__ import annotations

import errno
import tempfile

import pytest

from harness.cli import main

pytest.importorskip("tensorboard")


def _argv(model, data, out):
    return ["train", "--model", str(model), "--data", str(data), "--out", str(out), "--mode", "anchor",
            "--window", "64", "--steps", "1", "--no-progress", "--max-docs", "5", "--log-to", "tensorboard"]  # fmt: skip


def _block(kind, run):
    tb = run / "tensorboard"
    if kind == "file":
        tb.write_text("not a folder")
    elif kind == "symlink-loop":
        tb.symlink_to(tb)
    else:
        tb.symlink_to(run / "nowhere" / "tb")
    return {"file": "is a file", "symlink-loop": "leads nowhere", "dangling-link": "leads nowhere"}[kind]


@pytest.mark.parametrize("kind", ["file", "symlink-loop", "dangling-link"])
def test_an_unmakeable_tensorboard_folder_is_one_line_before_work(kind, tiny_llama_dir, corpus_path, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    phrase = _block(kind, run)
    assert main(_argv(tiny_llama_dir, corpus_path, run)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0, err
    assert "tensorboard" in err and phrase in err
    assert sorted(p.name for p in run.iterdir()) == ["tensorboard"]  # no log, no checkpoint, no lock


def test_a_read_only_run_folder_is_one_line(tiny_llama_dir, corpus_path, tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    run.mkdir()
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):  # root ignores permission bits: the refusal is simulated
        if dir is not None and str(dir).startswith(str(run)):
            raise OSError(errno.EROFS, "Read-only file system")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    assert main(_argv(tiny_llama_dir, corpus_path, run)) == 2
    err = capsys.readouterr().err.strip()
    assert "Read-only file system" in err and err.count("\n") == 0


def test_the_library_path_checks_before_the_model_loads(tiny_llama_dir, tmp_path, monkeypatch):
    """training.loop.train(job, log_to=["tensorboard"]) refuses before _train loads anything."""
    from harness.core.errors import UserError
    from training import loop

    from .helpers import small_job

    job = small_job(tiny_llama_dir, tmp_path / "run", steps=1)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "tensorboard").write_text("x")

    def never(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(loop, "_train", never)
    with pytest.raises(UserError, match="tensorboard"):
        loop.train(job, progress=False, log_to=["tensorboard"])
