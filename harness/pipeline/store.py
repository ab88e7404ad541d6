"""The per-sample results store: `<out>/samples.jsonl`, append-only, resumable, multi-process safe.

    from harness.pipeline.store import ResultStore
    store = ResultStore("results/anchor/samples.jsonl")   # creates it with a header, or validates it
    todo = [s for s in work if key_of(s) not in store.done_keys()]
    store.append(records)                                  # one locked write+fsync per batch
    store.records()                                        # every finished record, in file order

Format (docs/contracts.md): line 1 is the header {"type": "header", "schema_version": 1, "created",
"package_version", "git_hash"}; every later line is one {"type": "sample", ...} record. A record's
key is (checkpoint fingerprint, task, task_version, length, index, seed, settings_id), the last
computed from the record's settings (harness/core/identity.py); a key is stored once.

Crash safety: a batch goes out in one write under an exclusive flock and is fsynced before the
lock is released, so a killed writer can leave at most one torn (newline-less) last line. Readers
ignore it; the next writer truncates it before appending. Any other unparseable line, or a first
line that is not our header, is an error naming the file; the store is never overwritten.
Several processes (data-parallel workers, even on several nodes of a shared filesystem with
working flock) may append to one store: under the lock each one first reads what the others
appended since its last look and skips keys already present.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.core.errors import UserError
from harness.core.identity import record_key as _identity_key
from harness.core.paths import NotARegularFile, open_regular

SCHEMA_VERSION = 1
_HEADER_PREFIX = b'{"type": "header"'


class StoreError(UserError):
    """The store file is foreign, corrupt or from a newer harness."""


def record_key(record: dict) -> tuple:
    """A record's identity (harness.core.identity.record_key: the sample, and every setting that can
    change its prediction)."""
    return _identity_key(record)


# What to do about a file that is no store: eval writes into --out, a report only reads.
_NOT_A_STORE_FIX = {
    "write": "pass another --out or move the file away",
    "read": "pass a samples.jsonl written by harness eval",
}


def _check_header(path: Path, line: bytes, use: str = "write") -> dict:
    from harness.core.store_schema import check_header

    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        header = None
    if not (isinstance(header, dict) and header.get("type") == "header" and check_header(header) is None):
        raise StoreError(
            f"{path} is not a harness results store (its first line is not a store header): {_NOT_A_STORE_FIX[use]}"
        )
    if header["schema_version"] > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has store schema_version {header['schema_version']}, this harness reads {SCHEMA_VERSION}: "
            "upgrade the harness or pass another --out"
        )
    return header


def _parse_record(path: Path, line_no: int, line: bytes) -> dict | None:
    """A record line -> dict (None for a line of another type). StoreError when corrupt: not JSON,
    not an object, or a "sample" line that does not follow the record schema (harness.core.store_schema:
    an edited line with "length": "4k" or "score": 1.5 is corrupt, not a crash or a wrong average)."""
    from harness.core.store_schema import check_record

    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        problem: str | None = "not JSON"
    else:
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            problem = 'not an object with a "type"'
        elif rec["type"] == "sample":
            problem = check_record(rec)
            if problem is None:
                try:
                    record_key(rec)  # whatever the key holds, its fields are there
                except (KeyError, TypeError) as exc:
                    problem = f"no key field {exc}"
        else:
            return None  # a line of another type: for other readers
    if problem is not None:
        raise StoreError(
            f"{path} line {line_no} is corrupt (not a store record: {problem}): the file was edited or damaged; "
            "fix or delete that line, or move the file away and re-run"
        )
    return rec


def _split_complete(data: bytes) -> tuple[bytes, bytes]:
    """(complete lines, torn tail without a newline)."""
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]


def _read_from(fd: int, pos: int) -> bytes:
    os.lseek(fd, pos, os.SEEK_SET)
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 24)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _lines(data: bytes, first_line_no: int):
    for i, line in enumerate(data.split(b"\n")[:-1]):
        if line.strip():
            yield first_line_no + i, line


def read_store(path: str | Path) -> tuple[dict, list[dict]]:
    """(header, records) of an existing store, read-only (for reports). A torn last line is ignored."""
    path = Path(path)
    try:
        fd = open_regular(path)  # a FIFO or device named as a store: an error, never a hang
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            complete, tail = _split_complete(_read_from(fd, 0))
        finally:
            os.close(fd)
    except NotARegularFile as exc:
        raise StoreError(
            f"{path} is {exc.kind}, not a results store: pass a samples.jsonl written by harness eval"
        ) from None
    except OSError as exc:
        raise StoreError(f"cannot read results store {path}: {exc.strerror}") from None
    if not complete:
        if tail.startswith(_HEADER_PREFIX) or _HEADER_PREFIX.startswith(tail):
            raise StoreError(f"results store {path} is empty: nothing was evaluated yet")
        raise StoreError(
            f"{path} is not a harness results store (its first line is not a store header): {_NOT_A_STORE_FIX['read']}"
        )
    header_line, rest = complete.split(b"\n", 1)
    header = _check_header(path, header_line, "read")
    records = [r for n, line in _lines(rest, 2) if (r := _parse_record(path, n, line)) is not None]
    return header, records


class ResultStore:
    def __init__(self, path: str | Path):
        """Open (creating with a header if absent) and validate the store; truncate a torn last line."""
        from harness.core.provenance import provenance

        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise StoreError(
                f"--out {self.path.parent} is a file, not a directory: pass a directory (it is created if missing)"
            ) from None
        except OSError as exc:
            from harness.core.atomic import os_error

            raise os_error(self.path.parent, exc) from None
        self._keys: set[tuple] = set()
        self._pos = 0  # bytes indexed so far; always the end of a complete line
        self._line_no = 0
        with self._locked(fcntl.LOCK_EX) as fd:
            size = os.fstat(fd).st_size
            if size:
                head = _read_from(fd, 0)
                if b"\n" not in head:
                    if not (head.startswith(_HEADER_PREFIX) or _HEADER_PREFIX.startswith(head)):
                        raise StoreError(
                            f"{self.path} is not a harness results store (its first line is not a store header): pass another --out or move the file away"
                        )
                    os.ftruncate(fd, 0)  # a writer died while writing the header itself
                    size = 0
            if not size:
                header = {"type": "header", "schema_version": SCHEMA_VERSION, **provenance()}
                line = json.dumps(header).encode() + b"\n"
                assert line.startswith(_HEADER_PREFIX)
                self._write(fd, line)
            self._refresh(fd, truncate_torn=True)

    @contextmanager
    def _locked(self, op: int):
        try:
            fd = open_regular(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        except NotARegularFile as exc:
            raise StoreError(f"{self.path} is {exc.kind}, not a results store: pass another --out") from None
        except OSError as exc:
            raise StoreError(f"cannot open results store {self.path}: {exc.strerror}; pass another --out") from None
        try:
            fcntl.flock(fd, op)
            yield fd
        finally:
            os.close(fd)  # closing releases the lock

    def _write(self, fd: int, data: bytes) -> None:
        """Append data under the held lock. On a full disk (or any write error) the partial bytes
        are cut off again, so the file ends with the last complete record, and a one-line
        UserError names the file and the space needed."""
        start = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            from harness.core.atomic import os_error

            try:
                os.ftruncate(fd, start)
            except OSError:
                pass  # a torn tail is still cut by the next writer (see the module docstring)
            raise os_error(self.path, exc, len(data)) from None

    def _refresh(self, fd: int, truncate_torn: bool) -> list[dict]:
        """Index lines appended since the last look (by any process); returns their records."""
        complete, tail = _split_complete(_read_from(fd, self._pos))
        if tail and truncate_torn:
            os.ftruncate(fd, self._pos + len(complete))
        lines = list(_lines(complete, self._line_no + 1))
        if self._pos == 0:
            assert lines, "a store always starts with its header"
            self.header = _check_header(self.path, lines[0][1])
            lines = lines[1:]
        new = [r for n, line in lines if (r := _parse_record(self.path, n, line)) is not None]
        self._keys.update(record_key(r) for r in new)
        self._pos += len(complete)
        self._line_no += complete.count(b"\n")
        return new

    @staticmethod
    def key(record: dict) -> tuple:
        """(checkpoint fingerprint, task, task_version, length, index, seed, settings_id)."""
        return record_key(record)

    def done_keys(self) -> set[tuple]:
        """Keys of every finished record, including those other processes appended."""
        with self._locked(fcntl.LOCK_SH) as fd:
            self._refresh(fd, truncate_torn=False)
        return set(self._keys)

    def append(self, records: list[dict]) -> int:
        """Append the records whose keys are not stored yet (one write + fsync); returns how many.
        A record that does not follow the schema is a bug upstream: ValueError, nothing written."""
        from harness.core.store_schema import check_record

        lines = []
        batch: set[tuple] = set()
        for rec in records:
            k = record_key(rec)
            if k in batch:
                continue
            batch.add(k)
            body = {"type": "sample", **{f: v for f, v in rec.items() if f != "type"}}
            problem = check_record(body)
            if problem is not None:  # what a reader would refuse is never written
                raise ValueError(f"record {k} does not follow the store schema: {problem}")
            lines.append((k, json.dumps(body, allow_nan=False) + "\n"))
        if not lines:
            return 0
        with self._locked(fcntl.LOCK_EX) as fd:
            self._refresh(fd, truncate_torn=True)
            fresh = [(k, line) for k, line in lines if k not in self._keys]
            if fresh:
                data = "".join(line for _, line in fresh).encode()
                self._write(fd, data)
                self._keys.update(k for k, _ in fresh)
                self._pos += len(data)
                self._line_no += len(fresh)
        return len(fresh)

    def records(self) -> list[dict]:
        """Every stored sample record, in file order (a torn last line is left out)."""
        return read_store(self.path)[1]


LOCK_NAME = ".eval.lock"


def _holder(fd: int) -> str:
    """'pid P on host H' from a lock file's content (written by the holder); best effort."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on host {info['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def discard_empty_store(out: str | Path, created_out: bool, keep_dir: bool = False) -> None:
    """Undo a store a rejected run created: <out>/samples.jsonl while it holds its header alone, and
    <out> itself if the run created it and it is empty then (not when `keep_dir`: the run lock lives
    there, and another eval may be waiting on it). A store with a record in it is never touched."""
    out = Path(out)
    store = out / "samples.jsonl"
    try:
        if store.stat().st_size > 1 << 16:
            return
        data = store.read_bytes()
    except OSError:
        return
    if data.count(b"\n") != 1 or not data.endswith(b"\n") or not data.startswith(_HEADER_PREFIX):
        return
    store.unlink(missing_ok=True)
    if created_out and not keep_dir:
        try:
            out.rmdir()
        except OSError:  # something else is in it now
            pass


@contextmanager
def run_lock(out: str | Path) -> Iterator[bool]:
    """One `harness eval` driver per store: an exclusive flock on <out>/.eval.lock, held for the
    whole run. A second eval on the same --out says whom it waits for, blocks until the first one
    ends, and yields True ("waited": re-plan, the other run finished part of the work). The
    kernel drops a flock when its holder dies, so a killed run never leaves a stale lock.

    Only the driver process takes it: the run's own data-parallel workers (local or Ray) append
    through the store's per-write flock and are never blocked by it.
    """
    import socket

    path = Path(out) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot create the run lock {path}: {exc.strerror}; pass another --out") from None
    try:
        waited = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"waiting for {_holder(fd)}, which is evaluating into {out}; this run goes on when it ends "
                "and computes only what is still missing",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
            waited = True
        try:  # who holds it, for the message of the next one to wait
            data = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except OSError:
            pass  # a full disk: the lock itself still holds; the waiter then names "another process"
        yield waited
    finally:
        os.close(fd)  # releases the lock
