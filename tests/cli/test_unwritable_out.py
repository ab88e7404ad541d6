"""An --out that cannot be written (a read-only file system) is one line, exit 2, before any work,
for every command that writes one (issue 40: demo and diagnose tracebacks, convert after the work).
Root ignores permission bits, so the file system's refusal is simulated at the probe."""

from __future__ import annotations

import errno
import tempfile

import pytest

from harness.cli import main


@pytest.fixture
def read_only(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and str(dir).startswith(str(ro)):
            raise OSError(errno.EROFS, "Read-only file system")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    return ro


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--out", "{ro}/demo"],
        ["diagnose", "rope", "--ckpt", "{model}", "--out", "{ro}/diag"],
        ["convert", "smollm2-135m-instruct", "--out", "{ro}/conv"],
        ["eval", "--ckpts", "{model}", "--tasks", "vt", "--lengths", "1k", "--out", "{ro}/eval"],
        ["leaderboard", "{ro}", "--out", "{ro}/board"],
    ],
    ids=["demo", "diagnose", "convert", "eval", "leaderboard"],
)
def test_read_only_out_is_one_line_before_any_work(argv, read_only, tiny_llama_dir, capsys):
    args = [a.format(ro=read_only, model=tiny_llama_dir) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot be written" in err and "Read-only file system" in err and err.count("\n") == 0
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("command", ["train", "diagnose", "eval"])
def test_a_symlink_loop_out_is_one_line(command, tmp_path, tiny_llama_dir, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    argv = {
        "train": [
            "train",
            "--model",
            str(tiny_llama_dir),
            "--mode",
            "anchor",
            "--window",
            "256",
            "--steps",
            "1",
            "--data",
            str(tmp_path),
            "--out",
            str(loop / "run"),
        ],
        "diagnose": ["diagnose", "rope", "--ckpt", str(tiny_llama_dir), "--out", str(loop)],
        "eval": ["eval", "--ckpts", str(tiny_llama_dir), "--tasks", "vt", "--lengths", "1k", "--out", str(loop)],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "symbolic link that leads nowhere" in err and err.count("\n") == 0
