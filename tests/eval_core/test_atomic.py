"""harness.core.atomic: temp file + rename; on any failure the old file stays and no temp file is left."""

from __future__ import annotations

import errno
import os

import pytest

from harness.core import atomic
from harness.core.atomic import atomic_write, atomic_write_many
from harness.core.errors import UserError


def _names(d):
    return sorted(p.name for p in d.iterdir())


def test_atomic_write_replaces_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "sub" / "a.json"
    atomic_write(path, "one")
    atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert _names(path.parent) == ["a.json"]


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EDQUOT])
def test_disk_full_while_writing_keeps_the_old_file(tmp_path, monkeypatch, err):
    path = tmp_path / "index.html"
    path.write_text("old page")

    def full(fd):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(UserError) as exc:
        atomic_write(path, "x" * 5000)
    msg = str(exc.value)
    assert msg.startswith(f"disk full writing {path} (needs 4.9 KB, ") and " free)" in msg
    assert path.read_text() == "old page"
    assert _names(tmp_path) == ["index.html"]


def test_many_files_all_or_none(tmp_path, monkeypatch):
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(f"old {name}")
    real_open, calls = open, []

    def failing_open(path, mode="r", *args, **kwargs):
        calls.append(str(path))
        if len(calls) == 3:  # the third temp file: the first two are written already
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", failing_open)
    with pytest.raises(UserError, match="disk full writing"):
        atomic_write_many({tmp_path / n: f"new {n}" for n in ("a", "b", "c")})
    monkeypatch.undo()
    assert [(tmp_path / n).read_text() for n in ("a", "b", "c")] == ["old a", "old b", "old c"]
    assert _names(tmp_path) == ["a", "b", "c"]


def test_other_os_errors_name_the_path(tmp_path):
    target = tmp_path / "dir-in-the-way"
    target.mkdir()
    with pytest.raises(UserError, match=f"cannot write {target}"):
        atomic_write(target, "x")
    assert _names(tmp_path) == ["dir-in-the-way"]


def test_a_keyboard_interrupt_cleans_the_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, "x")
    assert _names(tmp_path) == []
