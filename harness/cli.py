"""The `harness` command line.

    harness --help
    harness generate --suite ruler --lengths 4k-16k --samples 10 --out data/
    harness eval --ckpts runs/anchor/ckpt-<1950..2000> --suite ruler --lengths 4k-128k

Subcommands live in harness/commands/<name>.py (see that package's docstring).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
from typing import NoReturn

from harness import __version__
from harness.errors import UserError

# Listed order in --help; modules found but not listed come after, alphabetically.
_ORDER = ["generate", "eval", "report", "train", "leaderboard", "diagnose", "demo"]


def _command_modules():
    import harness.commands as pkg

    found = {m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}
    names = [n for n in _ORDER if n in found] + sorted(found - set(_ORDER))
    return [(n, importlib.import_module(f"harness.commands.{n}")) for n in names]


class _Parser(argparse.ArgumentParser):
    """Argparse's own errors (unknown flag, missing value, bad type) as one line `error: ...`, exit 2,
    like every UserError: no usage block (the fix names `--help`)."""

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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # a bad flag: one line `error: ...`, SystemExit(2) (see _Parser)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished results are kept; re-run the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
