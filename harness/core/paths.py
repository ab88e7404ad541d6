"""The one check of where a command writes: outputs stay where the user put them.

    from harness.core.paths import check_out, check_run_name, results_dir, check_apart
    out = check_out(args.out)                       # "" / control characters / a file -> UserError
    name = check_run_name(args.name)                # "../../x", "/abs", "a\\rb" -> UserError
    out = results_dir(name)                         # results/<name>, never outside results/
    check_apart(out, model, "--out", "--model")     # train must not write into (or around) its base model

Every subcommand that writes calls these before any work, so a refused command changes no file.
A run name becomes a folder under results/, a CSV/Markdown cell and an HTML label: it is one path
component of printable characters. Control characters (a carriage return turns a leaderboard.csv
cell into a live formula and breaks the Markdown table) are refused in names and output paths.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path

from harness.core.errors import UserError

RESULTS_ROOT = Path("results")
_MAX_NAME_BYTES = 255  # one path component on every common filesystem


def _control_char(text: str) -> str | None:
    """The first control or line-breaking character in text (C0/C1 controls, DEL, U+2028/2029), or None."""
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return ch
    return None


def file_in_the_way(path: str | os.PathLike) -> Path | None:
    """The nearest folder of `path` that is a file (nothing can be created under it), or None."""
    return next((p for p in Path(os.fspath(path)).parents if p.is_file()), None)


def check_out(value: str | os.PathLike | None, flag: str = "--out", *, must_be_dir: bool = True) -> Path:
    """An output directory the user named: not empty, no control characters, not an existing file."""
    text = os.fspath(value) if value is not None else ""
    if not text.strip():
        raise UserError(f"{flag} is empty: pass a directory to write into (it is created if missing)")
    bad = _control_char(text)
    if bad is not None:
        raise UserError(f"{flag} {text!r} holds the control character {bad!r}: pass a path of printable characters")
    path = Path(text).expanduser()
    if must_be_dir and path.exists() and not path.is_dir():
        what = file_kind(path.stat().st_mode) or "a file"  # /dev/null: a character device
        raise UserError(f"{flag} {path} is {what}: pass a directory (it is created if missing)")
    blocker = file_in_the_way(path)
    if blocker is not None:
        raise UserError(f"{flag} {path} is under {blocker}, which is a file: pass a path under a directory")
    for part in (path, *path.parents):  # a symlink loop (or a link to nothing) on the way
        if part.is_symlink() and not part.exists():
            raise UserError(
                f"{flag} {path}: {part} is a symbolic link that leads nowhere (a loop or a missing target): "
                "pass a real directory"
            )
    if must_be_dir:
        _check_writable(path, flag)
    return path


def _check_writable(path: Path, flag: str) -> None:
    """The output folder (or, while it does not exist, its nearest existing parent) takes a file:
    a read-only file system or folder is refused before any work, not after an hour of training.
    A real probe (a temp file made and removed), since permission bits say nothing to root."""
    import tempfile

    where = path
    try:
        while not where.exists() and where.parent != where:
            where = where.parent
        if not where.is_dir():
            return  # not a folder: file_in_the_way and the command's own checks name it
        fd, probe = tempfile.mkstemp(prefix=".harness-write-probe-", dir=where)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(
            f"{flag} {path} cannot be written ({where}: {exc.strerror or exc}): pass another {flag} or make it writable"
        ) from None


def check_run_name(name: str, flag: str = "--name") -> str:
    """A run name: one path component of printable characters (it names results/<name>)."""
    if not name or not name.strip():
        raise UserError(f"{flag} is empty: pass a run name such as anchor-64k")
    bad = _control_char(name)
    if bad is not None:
        raise UserError(f"{flag} {name!r} holds the control character {bad!r}: pass a name of printable characters")
    if "/" in name or "\\" in name or name in (".", "..") or os.path.isabs(name):
        raise UserError(
            f"{flag} {name!r} is not a plain name (it would write outside {RESULTS_ROOT}/): pass a name "
            "without / or .., or choose the directory with --out"
        )
    if len(name.encode("utf-8", "surrogatepass")) > _MAX_NAME_BYTES:
        raise UserError(f"{flag} is longer than {_MAX_NAME_BYTES} bytes: pass a shorter run name")
    return name


def results_dir(name: str, flag: str = "--name") -> Path:
    """results/<name> for a checked run name: always a direct child of results/."""
    path = RESULTS_ROOT / check_run_name(name, flag)
    assert path.parent == RESULTS_ROOT, path
    return path


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))


def check_apart(out: str | os.PathLike, other: str | os.PathLike, out_flag: str, other_flag: str) -> None:
    """Refuse an output directory that is `other`, lies inside it or contains it (symlinks resolved):
    `train --out` inside `--model` would write checkpoints into the base model. A hub name that is no
    local path is apart from everything."""
    theirs = Path(os.fspath(other)).expanduser()
    if not theirs.exists():
        return
    a, b = _resolved(Path(os.fspath(out))), _resolved(theirs)
    if a == b:
        raise UserError(f"{out_flag} {out} is the {other_flag} directory: pass a new directory for the run")
    if b in a.parents:
        raise UserError(f"{out_flag} {out} lies inside {other_flag} {other}: pass a directory outside it (runs/<name>)")
    if a in b.parents:
        raise UserError(f"{out_flag} {out} contains {other_flag} {other}: pass a directory that does not hold it")


def check_output_file(path: str | os.PathLike) -> Path:
    """A file a command will replace at its end (results.json, index.html): refused now, before any
    work, when something other than a regular file (a directory, a FIFO) is in its place."""
    p = Path(os.fspath(path))
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as exc:
        raise UserError(f"cannot check {p} ({exc.strerror}): check that directory's permissions") from None
    if stat.S_ISDIR(st.st_mode):
        kind = "a directory"
    elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
        return p
    else:
        kind = "not a regular file"
    raise UserError(f"{p} is {kind}, where this command writes a file: move it away or pass another --out")


# ---------------------------------------------------------------------------------------------
# Reading: only regular files (a FIFO blocks a read forever, /dev/zero never ends)

_KINDS = [
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
]


class NotARegularFile(OSError):
    """Raised by open_regular; `kind` says what the path is instead ("a FIFO (named pipe)")."""

    def __init__(self, path: str | os.PathLike, kind: str):
        super().__init__(f"{os.fspath(path)} is {kind}, not a regular file")
        self.kind = kind


def file_kind(mode: int) -> str | None:
    """None for a regular file's st_mode, else what it is."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of path, which must be a regular file (or absent, when flags create it): checked
    with stat before opening, opened non-blocking (opening a FIFO for reading would wait for a
    writer), and checked again on the descriptor. NotARegularFile or OSError otherwise."""
    try:
        kind = file_kind(os.stat(path).st_mode)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        kind = None
    if kind:
        raise NotARegularFile(path, kind)
    fd = os.open(path, flags | os.O_NONBLOCK, mode)
    try:
        kind = file_kind(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if kind:
        os.close(fd)
        raise NotARegularFile(path, kind)
    return fd


def read_regular(path: str | os.PathLike) -> bytes:
    """The bytes of a regular file (open_regular's checks); NotARegularFile or OSError otherwise."""
    with os.fdopen(open_regular(path), "rb") as f:
        return f.read()
