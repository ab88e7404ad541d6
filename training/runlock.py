"""One writer per training run directory: an exclusive `fcntl.flock` on <run>/.harness-train.lock.

    with RunLock(run_dir):            # UserError naming the holder (pid, host) when another process has it
        ...train...

The kernel drops a flock when its holder dies, so a lock left by a killed run is taken over
without any check. The file also records the holder (pid, host, start time) so that a refused
run can say who holds it. A lock that is still held by a process recorded on this host that no
longer exists (the descriptor leaked into a surviving child, e.g. a forked data worker) is
stale: it is reclaimed by unlinking the file and locking a fresh one.

The file is removed on release. A waiter that locked the old, unlinked file notices (its inode
is no longer the path's) and retries on the new one, so two holders can never coexist. A run
directory that the lock created and that is still empty on release is removed too, so a run
refused before writing anything leaves nothing behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import UserError

if TYPE_CHECKING:  # typing.Self is 3.11+; requires-python is >=3.10
    from typing_extensions import Self

LOCK_NAME = ".harness-train.lock"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read_holder(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class RunLock:
    """Exclusive lock on a run directory for one training process (see the module docstring)."""

    def __init__(self, run_dir: str | Path, *, report=print):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._report = report
        self._fd: int | None = None
        self._created_dir = False

    def acquire(self) -> None:
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise UserError(f"--out {self.run_dir} is a file: pass a directory (a new one, or the run to resume)")
        if not self.run_dir.exists():
            try:
                self.run_dir.mkdir(parents=True)
            except FileExistsError:  # created by a concurrent run between the check and mkdir
                pass
            except OSError as exc:
                raise UserError(
                    f"cannot create --out {self.run_dir} ({exc.strerror}): pass a directory you can write to"
                ) from None
            else:
                self._created_dir = True
        for _ in range(3):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                holder = _read_holder(self.path)
                if self._stale(holder):
                    self._report(
                        f"reclaimed the stale lock {self.path} of pid {holder.get('pid')} on {holder.get('host')} "
                        "(that process no longer exists)"
                    )
                    self._unlink()
                    continue
                self._release_dir()
                raise UserError(
                    f"{self.run_dir} is being trained by another process (pid {holder.get('pid', '?')} on host "
                    f"{holder.get('host', '?')}, since {holder.get('started', '?')}): wait for it to finish, "
                    "or pass another --out"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the holder released (and unlinked) it between our open and flock: retry
                os.close(fd)
                continue
            self._fd = fd
            info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            try:
                os.ftruncate(fd, 0)
                os.write(fd, (json.dumps(info) + "\n").encode())
            except OSError as exc:  # a full disk: the lock holds without its note, but say so and stop
                self.release()
                raise UserError(
                    f"cannot write {self.path} ({exc.strerror}): free some space on that disk and re-run"
                ) from None
            return
        raise UserError(f"could not lock {self.path} after 3 tries: another process keeps replacing it; retry")

    @staticmethod
    def _stale(holder: dict) -> bool:
        pid = holder.get("pid")
        return (
            isinstance(pid, int)
            and holder.get("host") == socket.gethostname()
            and pid != os.getpid()
            and not _pid_alive(pid)
        )

    def _unlink(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def _release_dir(self) -> None:
        if self._created_dir:
            try:
                self.run_dir.rmdir()  # only when empty: a refused or failed first run leaves nothing
            except OSError:
                pass

    def release(self) -> None:
        if self._fd is None:
            return
        self._unlink()  # while still holding it: see the module docstring for why this is safe
        os.close(self._fd)
        self._fd = None
        self._release_dir()

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
