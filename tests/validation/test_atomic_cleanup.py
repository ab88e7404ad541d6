"""harness.core.atomic owns its temp files: a killed writer's leftovers go at the next successful write
of that file (never a live writer's), and publish_files changes a set of files all or none, whatever
step a kill lands on."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from harness.core import atomic
from harness.core.atomic import GENERATIONS, atomic_write, clean_stale_temps, publish_files


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_a_killed_writers_temp_files_go_with_the_next_write(tmp_path):
    path = tmp_path / "results.json"
    # what kill -9 leaves: this module's names (old and new style) and no lock on them
    for name in (".results.json.tmp4242", ".results.json.tmp4243-0a1b2c3d"):
        (tmp_path / name).write_text("half a file")
    (tmp_path / ".other.json.tmp4242").write_text("another file's temp")
    (tmp_path / ".results.json.tmp-notours").write_text("not our naming")
    atomic_write(path, "{}")
    assert _names(tmp_path) == [".other.json.tmp4242", ".results.json.tmp-notours", "results.json"]


def test_a_live_writers_temp_file_is_left_alone(tmp_path):
    path = tmp_path / "index.html"
    live = tmp_path / ".index.html.tmp777-deadbeef"
    with open(live, "wb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # another writer, still writing
        atomic_write(path, "<html>")
        assert live.exists()
    assert clean_stale_temps(path) == 1 and not live.exists()  # its lock gone: stale now


def test_symlinks_and_folders_with_temp_names_are_not_touched(tmp_path):
    path = tmp_path / "a.json"
    (tmp_path / ".a.json.tmp1").mkdir()
    (tmp_path / ".a.json.tmp2").symlink_to(tmp_path / "elsewhere")
    atomic_write(path, "x")
    assert _names(tmp_path) == [".a.json.tmp1", ".a.json.tmp2", "a.json"]


def test_the_sample_cache_cleans_its_temp_files(tmp_path, bpe_tokenizer):
    from tasks.generate import _cache_path, cache_key, generate_samples
    from tasks.registry import get_task

    task = get_task("niah_single_1")
    key = cache_key(task, 1024, 42, bpe_tokenizer)
    final = _cache_path(tmp_path, task, 1024, key)
    final.parent.mkdir(parents=True)
    (final.parent / f".{final.name}.tmp99999").write_text("killed mid-write")
    generate_samples(task, 1024, [0], bpe_tokenizer, seed=42, cache_dir=tmp_path)
    assert _names(final.parent) == [final.name]


# ---------------------------------------------------------------- a set of files, all or none


OLD = {"index.html": "old page", "leaderboard.csv": "old csv", "leaderboard.md": "old md"}
NEW = {"index.html": "new page", "leaderboard.csv": "new csv", "leaderboard.md": "new md"}


def _visible(out: Path) -> dict[str, str]:
    return {n: (out / n).read_text() for n in OLD if (out / n).exists()}


def _steps(monkeypatch) -> list[str]:
    """Count the filesystem steps publish_files takes (renames, symlinks, writes, removals)."""
    calls: list[str] = []
    for name in ("replace", "rename", "symlink", "unlink", "mkdir", "fsync"):
        real = getattr(os, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(atomic.os, name, spy)
    return calls


class Killed(BaseException):
    """What kill -9 looks like to the code: it stops between two steps (BaseException: no cleanup by except Exception)."""


def test_publish_is_all_or_none_at_every_step(tmp_path, monkeypatch):
    probe = tmp_path / "probe"
    publish_files(probe, OLD)
    with monkeypatch.context() as m:
        calls = _steps(m)
        publish_files(probe, NEW)
    total = len(calls)
    assert total > 5
    for k in range(total):
        out = tmp_path / f"kill-at-{k}"
        publish_files(out, OLD)
        with monkeypatch.context() as m:
            seen = [0]
            for name in ("replace", "rename", "symlink", "unlink", "mkdir", "fsync"):
                real = getattr(os, name)

                def stop(*args, _real=real, _seen=seen, _k=k, **kwargs):
                    _seen[0] += 1
                    if _seen[0] > _k:
                        raise Killed
                    return _real(*args, **kwargs)

                m.setattr(atomic.os, name, stop)
            with pytest.raises(Killed):
                publish_files(out, NEW)
        assert _visible(out) in (OLD, NEW), f"killed at step {k}: a mix of old and new files"
        publish_files(out, NEW)  # the next run finishes the job and cleans what the kill left
        assert _visible(out) == NEW
        gens = set(os.listdir(out / GENERATIONS))
        assert len(gens - {"current", ".lock"}) == 1, gens


def test_publish_replaces_old_real_files_and_drops_stale_exports(tmp_path):
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("from an older harness")
    (out / ".index.html.tmp123").write_text("left by a kill")
    publish_files(out, {**NEW, "leaderboard-delta.csv": "delta"}, managed=[*NEW, "leaderboard-delta.csv"])
    assert (out / "leaderboard-delta.csv").read_text() == "delta"
    publish_files(out, NEW, managed=[*NEW, "leaderboard-delta.csv"])  # no baseline this time
    assert _visible(out) == NEW and not (out / "leaderboard-delta.csv").exists()
    assert sorted(n for n in os.listdir(out) if not n.startswith(".")) == sorted(NEW)
    assert ".index.html.tmp123" not in os.listdir(out)
    assert all((out / n).is_symlink() and not os.path.isabs(os.readlink(out / n)) for n in NEW)  # movable folder


def test_a_copied_site_still_reads(tmp_path):
    import shutil

    publish_files(tmp_path / "site", NEW)
    shutil.copytree(tmp_path / "site", tmp_path / "copy", symlinks=True)
    assert _visible(tmp_path / "copy") == NEW
