"""The one argument validator: how every subcommand's flags are parsed and range-checked.

    from harness.core.validate import require_at_least, require_at_most, unique_list
    require_at_least((("--window", args.window, 16),))            # post-parse lower bounds (None passes)
    require_at_most((("--window", args.window, MAX_WINDOW),))     # ... and upper bounds
    p.add_argument("--dtypes", type=unique_list("--dtypes"))      # a comma list, each item once

Two layers, both here:
  * parse time: harness.cli's parser routes every flag declared `type=int` or `type=float` through
    `integer` and `number` (argparse's type registry), so no subcommand can forget it: a number is
    ASCII (int() and float() also take full-width and other Unicode digits, str.isdigit too), a float
    is finite, an int lies within +-INT_LIMIT (a bound no flag needs to exceed: bigger values only
    ever meant a typo, and some made MemoryError or OverflowError far from the flag);
  * post-parse: `require_at_least`, `require_above`, `require_at_most` check each flag against its
    own range before any work, one `error:` line naming the flag, the value and the bound.
Comma lists go through `unique_list` (a repeated item is refused, not silently collapsed).
"""

from __future__ import annotations

import argparse
import math
import re

from harness.core.errors import UserError

# Every int flag of every subcommand stays within this (seeds go up to 2**32 - 1).
INT_LIMIT = 2**32 - 1
# Tokens in one window, sequence or context: 16M, beyond any model's context today.
MAX_TOKENS = 2**24
# Samples, documents or checkpoints per run: a cap far above any real run, below a MemoryError.
MAX_COUNT = 10**7
# Workers, engines, GPUs, connections per run.
MAX_WORKERS = 4096

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(nan|inf|infinity)", re.IGNORECASE)


def ascii_int(text: str) -> int:
    """int(text) for ASCII digits only (int() also reads '４２' as 42); ValueError otherwise."""
    s = text.strip()
    if not _INT.fullmatch(s):
        raise ValueError(f"invalid integer {text!r}")
    return int(s)


def ascii_float(text: str) -> float:
    """float(text) for an ASCII decimal number, nan and inf included; ValueError otherwise."""
    s = text.strip()
    if not _FLOAT.fullmatch(s):
        raise ValueError(f"invalid number {text!r}")
    return float(s)


def integer(text: str) -> int:
    """argparse type for every int flag: ASCII digits only, within +-INT_LIMIT."""
    value = ascii_int(text)  # ValueError: argparse says "invalid int value: 'x'"
    if abs(value) > INT_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{text.strip()} is out of range: pass a value between {-INT_LIMIT} and {INT_LIMIT}"
        )
    return value


def number(text: str) -> float:
    """argparse type for every float flag: an ASCII decimal number, finite."""
    value = ascii_float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text.strip()} is not a finite number: pass a finite value")
    return value


def install(parser: argparse.ArgumentParser) -> None:
    """Make `type=int` and `type=float` of this parser (and its argument groups) mean integer and number."""
    parser.register("type", int, integer)
    parser.register("type", float, number)


def unique_list(flag: str):
    """argparse type for a comma list whose items must be distinct: returns the text unchanged
    (the command splits it as before), or refuses 'fp32,fp32' naming the repeated item."""

    def check(text: str) -> str:
        items = [v.strip() for v in text.split(",") if v.strip()]
        seen: set[str] = set()
        for item in items:
            if item in seen:
                raise argparse.ArgumentTypeError(f"{item!r} is listed twice in {text!r}: list each item once")
            seen.add(item)
        return text

    check.__name__ = "list"
    return check


def require_distinct_paths(flag: str, items: list[str], fix: str = "list each once") -> None:
    """A list of files (or hub names) that names one of them twice, under any spelling ('a,a',
    'a,./a', a link to a): UserError naming both. A file read twice in silence weighs double."""
    import os

    seen: dict[str, str] = {}
    for item in items:
        key = os.path.realpath(item) if os.path.exists(item) else item
        if key in seen:
            same = f"{item!r} twice" if seen[key] == item else f"{seen[key]!r} and {item!r} (the same file)"
            raise UserError(f"{flag} names {same}: {fix}")
        seen[key] = item


def require_given(args: argparse.Namespace, may_be_empty: tuple[str, ...] = ()) -> None:
    """Every text flag given with an empty value (--tokenizer '') is a UserError naming it: an empty
    value is never read as "the default" in silence."""
    for dest, value in sorted(vars(args).items()):
        if isinstance(value, str) and not value.strip() and dest not in may_be_empty:
            raise UserError(f"--{dest.replace('_', '-')} is empty: give it a value or leave the flag out")


def _require_finite(flag: str, value) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{flag} {value} is not a finite number: give a finite value")


def require_at_least(checks) -> None:
    """Raise a UserError for the first (flag, value, lowest) whose value is NaN, infinite or below
    lowest. A value of None (a flag left at its "not given" default) passes."""
    for flag, value, low in checks:
        if value is None:
            continue
        _require_finite(flag, value)
        if value < low:
            raise UserError(f"{flag} {value} must be at least {low}")


def require_above(checks) -> None:
    """Like require_at_least, for (flag, value, bound) whose value must be strictly above bound."""
    for flag, value, bound in checks:
        if value is None:
            continue
        _require_finite(flag, value)
        if not value > bound:
            raise UserError(f"{flag} {value} must be greater than {bound}")


def require_at_most(checks) -> None:
    """Like require_at_least, for (flag, value, highest)."""
    for flag, value, high in checks:
        if value is None:
            continue
        _require_finite(flag, value)
        if value > high:
            raise UserError(f"{flag} {value} must be at most {high}")


def ascii_digits(text: str) -> bool:
    """Whether text is one or more ASCII digits (str.isdigit also accepts '４' and '²')."""
    return bool(re.fullmatch(r"[0-9]+", text))
