"""The `harness` command line.

    harness --help
    harness generate --suite ruler --lengths 4k-16k --samples 10 --out data/
    harness eval --ckpts runs/anchor/ckpt-<1950..2000> --suite ruler --lengths 4k-128k

Subcommands live in harness/commands/<name>.py (see that package's docstring).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import sys
from typing import NoReturn

from harness import __version__
from harness.core.errors import UserError
from harness.core.validate import install as install_validators

# Listed order in --help; modules found but not listed come after, alphabetically.
_ORDER = ["generate", "eval", "report", "train", "leaderboard", "diagnose", "demo"]


def _command_modules():
    import harness.commands as pkg

    found = {m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}
    names = [n for n in _ORDER if n in found] + sorted(found - set(_ORDER))
    return [(n, importlib.import_module(f"harness.commands.{n}")) for n in names]


class _Parser(argparse.ArgumentParser):
    """Argparse's own errors (unknown flag, missing value, bad type) as one line `error: ...`, exit 2,
    like every UserError: no usage block (the fix names `--help`). Every int and float flag goes
    through harness.core.validate's checks (ASCII digits, finite, bounded)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        install_validators(self)

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split())  # argparse may wrap; the contract is one line
        if message.endswith("expected one argument"):
            # `--lengths -1k`: argparse reads a value starting with "-" as another flag.
            flag = re.match(r"argument (\S+?):", message)
            message += f" (a value starting with '-' must be attached: {flag.group(1) if flag else '--flag'}=VALUE)"
        self.exit(2, f"error: {self.prog}: {message}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harness",
        description="Long-context evaluation harness and AnchorAttention training toolkit.",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module in _command_modules():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _end_progress_line() -> None:
    """On a terminal, erase a progress bar left on the current line, so the error is the one line."""
    try:
        if sys.stderr.isatty():
            sys.stderr.write("\r\x1b[K")
    except (OSError, ValueError):
        pass


def _out_of_memory(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text


def _stdout_closed() -> int:
    """`harness report ... | head`: the reader went away. Nothing more can be shown; end quietly
    (no BrokenPipeError traceback now or when Python flushes stdout at exit), as `SIGPIPE` would."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a file descriptor (captured): nothing will be flushed to a pipe
    return 141  # 128 + SIGPIPE, what the shell reports for a command the pipe ended


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # also `harness --help | head -1`
        return _stdout_closed()


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # a bad flag: one line `error: ...`, SystemExit(2) (see _Parser)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        _end_progress_line()
        print(f"error: {' '.join(str(exc).splitlines()) or type(exc).__name__}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as exc:
        # Sizes are bounded per flag (harness.core.validate), but a large-and-valid one can still not fit
        # this machine (Python's MemoryError, torch's "can't allocate memory" / "out of memory"):
        # one line, like any other input problem (finished records stay stored). Other
        # RuntimeErrors are bugs: their traceback is kept.
        if not _out_of_memory(exc):
            raise
        _end_progress_line()
        print(
            f"error: {args.command} ran out of memory: lower the sizes (--window, --seq-len, --batch-size, "
            "--samples, lengths) or use a machine with more memory; finished results are kept",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        _end_progress_line()
        print("interrupted: finished results are kept; re-run the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
