"""`--figures DIR` (harness report and harness leaderboard) is checked like --out, before any work
(issue 49): a DIR that cannot be written is one line, exit 2, never a traceback; `--figures ''` is a
mistake to name, not a run that writes nothing and exits 0. Figures are drawn in memory and renamed
into place, so a failed write leaves no half-written file."""

from __future__ import annotations

import errno
import os
import tempfile

import pytest
from attack5_data import results, write_run

from harness.cli import main


@pytest.fixture
def run_dir(tmp_path):
    return write_run(tmp_path / "run", results())


def _argv(command: str, run_dir, figures: str, tmp_path) -> list[str]:
    if command == "report":
        return ["report", str(run_dir), "--figures", figures, "--figure-formats", "svg"]
    return ["leaderboard", str(run_dir), "--out", str(tmp_path / "site"), "--figures", figures,
            "--figure-formats", "svg"]  # fmt: skip


def _unusable(kind: str, tmp_path) -> tuple[str, str]:
    """(the --figures value, a phrase its error must hold)"""
    if kind == "file":
        (tmp_path / "afile").write_text("x")
        return str(tmp_path / "afile"), "is a file"
    if kind == "under-a-file":
        (tmp_path / "afile").write_text("x")
        return str(tmp_path / "afile" / "figs"), "which is a file"
    if kind == "symlink-loop":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
        return str(tmp_path / "loop"), "leads nowhere"
    if kind == "dangling-link":
        (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
        return str(tmp_path / "dangling"), "leads nowhere"
    if kind == "dev-null":
        return os.devnull, "character device"
    if kind == "proc":
        return "/proc", "cannot be written"
    assert kind == "empty"
    return "", "--figures is empty"


KINDS = ["file", "under-a-file", "symlink-loop", "dangling-link", "dev-null", "proc", "empty"]


@pytest.mark.parametrize("command", ["report", "leaderboard"])
@pytest.mark.parametrize("kind", KINDS)
def test_an_unusable_figures_dir_is_one_line_before_any_work(command, kind, run_dir, tmp_path, capsys):
    figures, phrase = _unusable(kind, tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(_argv(command, run_dir, figures, tmp_path)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and phrase in err and err.count("\n") == 0, err
    assert "--figures" in err and "Traceback" not in captured.out
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no leaderboard written either


@pytest.mark.parametrize("command", ["report", "leaderboard"])
def test_a_read_only_figures_dir_is_one_line(command, run_dir, tmp_path, monkeypatch, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):  # root ignores permission bits: the refusal is simulated
        if dir is not None and str(dir).startswith(str(ro)):
            raise OSError(errno.EROFS, "Read-only file system")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    assert main(_argv(command, run_dir, str(ro / "figs"), tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot be written" in err and "Read-only file system" in err and err.count("\n") == 0
    assert list(ro.iterdir()) == []


def test_a_write_that_fails_midway_is_one_line_and_leaves_no_figure(run_dir, tmp_path, monkeypatch, capsys):
    from harness.core import atomic

    def full(path, data):  # the disk fills while the figure is written
        raise atomic.os_error(path, OSError(errno.ENOSPC, "No space left on device"), len(data))

    monkeypatch.setattr(atomic, "_write_temp", full)
    figs = tmp_path / "figs"
    assert main(["report", str(run_dir), "--figures", str(figs), "--figure-formats", "svg"]) == 2
    err = capsys.readouterr().err.strip()
    assert "disk full" in err and err.count("\n") == 0
    assert not figs.exists() or list(figs.iterdir()) == []


@pytest.mark.parametrize("command", ["report", "leaderboard"])
def test_a_good_figures_dir_gets_the_charts(command, run_dir, tmp_path, capsys):
    figs = tmp_path / "new" / "figs"
    assert main(_argv(command, run_dir, str(figs), tmp_path)) == 0
    written = sorted(p.name for p in figs.iterdir())
    assert written == ["ruler-score-vs-length.svg"]
    assert (figs / written[0]).read_text().startswith("<svg") or "<svg" in (figs / written[0]).read_text()
    assert not [p for p in figs.iterdir() if p.name.startswith(".")]  # no temp file left
