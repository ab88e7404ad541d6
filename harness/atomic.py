"""Atomic file replacement: a reader (or a killed writer, or a full disk) never leaves half a file.

    from harness.atomic import atomic_write, atomic_write_many
    atomic_write("results/anchor/results.json", text)            # temp file in the same dir, fsync, rename
    atomic_write_many({out / "index.html": html, out / "leaderboard.csv": csv})   # all or none replaced

The temp file lives beside the target (a rename is atomic only within one filesystem) and is
removed on any error. A full disk (ENOSPC/EDQUOT) becomes a UserError naming the path, the bytes
needed and the bytes free; any other OSError a UserError naming the path and the reason. The old
file stays as it was in every failure case.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from harness.errors import UserError

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
    return UserError(f"cannot write {path} ({exc.strerror or exc}): check that directory's permissions and space")


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def _encode(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _write_temp(path: Path, data: bytes) -> Path:
    tmp = _temp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as exc:
        _unlink(tmp)
        if isinstance(exc, OSError):
            raise os_error(path, exc, len(data)) from None
        raise
    return tmp


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Replace path with data (str is written as UTF-8) atomically; see the module docstring."""
    atomic_write_many({path: data})


def atomic_write_many(files: Mapping[str | Path, str | bytes]) -> None:
    """Write every file to its temp file first, then rename them all in: a failure while writing
    (full disk, killed) leaves every old file untouched and no temp file behind."""
    temps: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise os_error(path.parent, exc) from None
            temps.append((_write_temp(path, _encode(data)), path))
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
