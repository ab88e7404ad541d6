"""Atomic file replacement: a reader (or a killed writer, or a full disk) never leaves half a file.

    from harness.core.atomic import atomic_write, atomic_write_many, publish_files
    atomic_write("results/anchor/results.json", text)            # temp file in the same dir, fsync, rename
    atomic_write_many({out / "a.json": a, out / "b.json": b})    # every temp written before any rename
    publish_files(out, {"index.html": html, "leaderboard.csv": csv})   # a set that changes all or none

The temp file lives beside the target (a rename is atomic only within one filesystem) and is
removed on any error. A full disk (ENOSPC/EDQUOT) becomes a UserError naming the path, the bytes
needed and the bytes free; any other OSError a UserError naming the path and the reason. The old
file stays as it was in every failure case.

Temp files are named `.<name>.tmp<pid>-<random>` and held under an exclusive flock while they
exist. A writer killed with -9 leaves its temp file behind (nothing can remove it at that point);
the next successful write of the same file removes every temp file of that name that no live
writer holds (its lock is free: the kernel drops a dead process's flock).

`atomic_write_many` writes every temp file before renaming any, so a failure while writing (full
disk) changes nothing; but its renames are one per file, and a kill between two of them leaves some
files new. `publish_files` is for a set that must change together (the leaderboard's page and
exports): the set is written into a new generation directory `<out>/.generations/<id>/`, one
symlink `<out>/.generations/current` is swapped to it (a single rename: all or none), and each
`<out>/<name>` is a fixed relative symlink through `current`.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.core.errors import UserError

_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"  # unreachable; keeps type checkers quiet


def free_bytes(path: str | Path) -> int | None:
    """Free bytes on the filesystem holding path (its nearest existing parent); None if unknown."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def disk_full_error(path: str | Path, needed: int | None) -> UserError:
    free = free_bytes(Path(path).parent)
    need = f"needs {_size(needed)}" if needed is not None else "needs more space"
    have = f", {_size(free)} free" if free is not None else ""
    return UserError(
        f"disk full writing {path} ({need}{have}): free space on that disk or pass an --out elsewhere, then re-run "
        "(everything finished is kept)"
    )


def os_error(path: str | Path, exc: OSError, needed: int | None = None) -> UserError:
    """The UserError for an OSError raised while writing path."""
    if exc.errno in _DISK_FULL:
        return disk_full_error(path, needed)
    if exc.errno == errno.ENOTDIR:  # a file stands where a folder of the path should be
        from harness.core.paths import file_in_the_way

        blocker = file_in_the_way(path)
        if blocker is not None:
            return UserError(
                f"cannot write {path}: {blocker} is a file, not a directory; pass a path under a directory"
            )
    return UserError(f"cannot write {path} ({exc.strerror or exc}): check that directory's permissions and space")


_TEMP_INFIX = ".tmp"


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}{_TEMP_INFIX}{os.getpid()}-{secrets.token_hex(4)}")


def _temp_pattern(name: str) -> re.Pattern:
    """Temp names of `name` this module makes, and those of earlier versions (`.<name>.tmp<pid>`)."""
    return re.compile(rf"\.{re.escape(name)}{re.escape(_TEMP_INFIX)}[0-9]+(-[0-9a-f]+)?")


def _encode(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _open_locked_temp(path: Path):
    """A new temp file for path, open for writing and held under an exclusive flock. A cleaner
    (another writer's clean_stale_temps) may lock and remove a temp between its creation and our
    lock; then the name is gone and we start over with a new one."""
    while True:
        tmp = _temp_name(path)
        f = open(tmp, "wb")  # noqa: SIM115 -- closed by the caller after the rename
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            if os.fstat(f.fileno()).st_ino == os.lstat(tmp).st_ino:
                return tmp, f
        except FileNotFoundError:
            pass
        except BaseException:
            f.close()
            _unlink(tmp)
            raise
        f.close()


def _write_temp(path: Path, data: bytes):
    """(temp path, its open locked file) holding data, flushed to disk."""
    tmp, f = None, None
    try:
        tmp, f = _open_locked_temp(path)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    except BaseException as exc:
        if f is not None:
            f.close()
        if tmp is not None:
            _unlink(tmp)
        if isinstance(exc, OSError):
            raise os_error(path, exc, len(data)) from None
        raise
    return tmp, f


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def clean_stale_temps(path: str | Path) -> int:
    """Remove the temp files of `path` that killed writers left (named by this module, regular
    files, whose flock is free: no live writer holds them). Returns how many were removed."""
    path = Path(path)
    pattern = _temp_pattern(path.name)
    removed = 0
    try:
        entries = [e.name for e in os.scandir(path.parent) if pattern.fullmatch(e.name)]
    except OSError:
        return 0
    for name in entries:
        stale = path.parent / name
        try:
            fd = os.open(stale, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # gone already, a symlink, or unreadable: not ours to remove
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live writer holds it
            if os.lstat(stale).st_ino == st.st_ino:  # still the file we locked
                os.unlink(stale)
                removed += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Replace path with data (str is written as UTF-8) atomically; see the module docstring."""
    atomic_write_many({path: data})


def atomic_write_many(files: Mapping[str | Path, str | bytes]) -> None:
    """Write every file to its temp file first, then rename them all in: a failure while writing
    (full disk, killed) leaves every old file untouched and no temp file behind. Each rename is its
    own step (see publish_files for a set that must change as one)."""
    temps: list[tuple[Path, Path]] = []
    handles = []
    try:
        for path, data in files.items():
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise os_error(path.parent, exc) from None
            tmp, f = _write_temp(path, _encode(data))
            handles.append(f)
            temps.append((tmp, path))
        for i, (tmp, path) in enumerate(temps):
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise os_error(path, exc) from None
            temps[i] = (path, path)  # renamed: nothing to clean up
    except BaseException:
        for tmp, path in temps:
            if tmp != path:
                _unlink(tmp)
        raise
    finally:
        for f in handles:
            f.close()
    for _, path in temps:
        clean_stale_temps(path)


# ---------------------------------------------------------------------------------------------
# A set of files that changes all or none


GENERATIONS = ".generations"
_CURRENT = "current"
_LOCK = ".lock"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the renames are still atomic
    finally:
        os.close(fd)


def _replace_symlink(target: str, link: Path) -> None:
    """Point link at target with one rename (a temp symlink beside it renamed over it)."""
    while True:
        tmp = _temp_name(link)
        try:
            os.symlink(target, tmp)
            break
        except FileExistsError:
            continue
    try:
        os.replace(tmp, link)
    except BaseException:
        _unlink(tmp)
        raise


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        _unlink(path)


def _write_generation(gens: Path, gen_id: str, files: Mapping[str, bytes]) -> Path:
    """<gens>/<gen_id>/ holding files, each fsynced, built under a temp name and renamed in whole."""
    final = gens / gen_id
    if final.is_dir():
        return final  # the same content was published before (the id is its hash)
    tmp = gens / f".tmp-{gen_id}-{os.getpid()}"
    _remove(tmp)
    try:
        tmp.mkdir()
        for name, data in files.items():
            target = tmp / name
            try:
                with open(target, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:
                raise os_error(target, exc, len(data)) from None
        _fsync_dir(tmp)
        os.rename(tmp, final)
    except BaseException:
        _remove(tmp)
        raise
    return final


def publish_files(out: str | Path, files: Mapping[str, str | bytes], managed: Iterable[str] = ()) -> None:
    """Replace the set of files <out>/<name> all or none (see the module docstring).

    `managed` names files of the set that this publish does not hold (a leaderboard without a
    baseline has no delta exports): a link of ours by that name is removed, so no export of an
    older set stays beside the new one. Publishers of one <out> take turns (a flock). A full
    disk or a kill while writing leaves the previous set whole and in place."""
    out = Path(out)
    data = {name: _encode(d) for name, d in files.items()}
    assert data and all("/" not in n and not n.startswith(".") for n in data), list(data)
    gens = out / GENERATIONS
    try:
        gens.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(gens / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise os_error(gens, exc) from None
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        current = gens / _CURRENT
        previous = os.readlink(current) if current.is_symlink() else None
        # Anything but the current generation is left by a killed publisher (we hold the lock).
        for entry in os.listdir(gens):
            if entry not in (_CURRENT, _LOCK, previous):
                _remove(gens / entry)
        digest = hashlib.sha256()
        for name in sorted(data):
            digest.update(name.encode() + b"\0" + hashlib.sha256(data[name]).digest())
        gen_id = digest.hexdigest()[:16]
        try:
            _write_generation(gens, gen_id, data)
            _fsync_dir(gens)
            if previous != gen_id:
                _replace_symlink(gen_id, current)  # the one step that switches the whole set
                _fsync_dir(gens)
            for name in data:
                link, target = out / name, f"{GENERATIONS}/{_CURRENT}/{name}"
                if not (link.is_symlink() and os.readlink(link) == target):
                    _replace_symlink(target, link)
                clean_stale_temps(link)
            for name in managed:
                link = out / name
                if name not in data and link.is_symlink() and os.readlink(link).startswith(f"{GENERATIONS}/"):
                    _unlink(link)
        except OSError as exc:
            raise os_error(out, exc) from None
        if previous and previous != gen_id:
            _remove(gens / previous)
    finally:
        os.close(lock_fd)
