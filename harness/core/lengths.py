"""Length syntax shared by every command.

    "4k-128k"     -> 4096, 8192, ..., 131072   (a range doubles from its start to its end)
    "1k,4k,16k"   -> 1024, 4096, 16384         (comma lists; items may be ranges)
    "4000"        -> 4000                      (a bare integer is an exact token count)
    "1m"          -> 1048576

k = 1024 and m = 1024 * 1024, as RULER names its lengths. A length is the whole budget of a
sample: prompt tokens (BOS included when the tokenizer adds one) plus tokens to generate.
"""

from __future__ import annotations

import re

from harness.core.errors import UserError

MIN_LENGTH = 250  # NoLiMa's shortest haystack, in its own units (its reference grid starts at 250)
MAX_LENGTH = 1024 * 1024

_ITEM = re.compile(r"^\s*(\d+)\s*([kKmM]?)\s*$", re.ASCII)  # ASCII digits: int() also reads "４"
_FIX = "write lengths like 4k-128k, 1k,4k,16k or 4000"


def parse_length(text: str) -> int:
    """One length: '4k' -> 4096, '4000' -> 4000."""
    m = _ITEM.match(text)
    if not m:
        raise UserError(f"bad length {text!r}: {_FIX}")
    value = int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    if not MIN_LENGTH <= value <= MAX_LENGTH:
        raise UserError(f"length {text!r} = {value} is outside {MIN_LENGTH}..{MAX_LENGTH} (250 to 1m)")
    return value


def parse_lengths(text: str) -> list[int]:
    """A length spec -> sorted, de-duplicated lengths. Raises UserError on bad input."""
    if not text or not text.strip():
        raise UserError(f"empty length list: {_FIX}")
    out: set[int] = set()
    for item in text.split(","):
        if not item.strip():
            raise UserError(f"empty item in length list {text!r}: {_FIX}")
        if item.strip().startswith("-"):
            raise UserError(f"bad length {item.strip()!r}: a length is a positive token count, not negative; {_FIX}")
        if "-" in item:
            parts = item.split("-")
            if len(parts) != 2:
                raise UserError(f"bad length range {item!r}: {_FIX}")
            if not parts[1].strip():
                raise UserError(f"bad length range {item!r}: its end is missing; {_FIX}")
            lo, hi = parse_length(parts[0]), parse_length(parts[1])
            if lo > hi:
                raise UserError(
                    f"reversed length range {item!r}: write the smaller length first, e.g. {parts[1].strip()}-{parts[0].strip()}"
                )
            value = lo
            while value < hi:
                out.add(value)
                value *= 2
            if value != hi:
                raise UserError(
                    f"length range {item!r} does not reach {hi} by doubling from {lo}: "
                    "use powers-of-two ends (e.g. 4k-128k) or a comma list"
                )
            out.add(hi)
        else:
            out.add(parse_length(item))
    return sorted(out)


NOT_A_LENGTH = "n/a"


def format_length(value: int) -> str:
    """4096 -> '4K', 131072 -> '128K', 4000 -> '4000' (the names RULER's tables use).

    0 (and below) is the length of samples that are not length-controlled (MMLU, HellaSwag): 'n/a'.
    """
    if value <= 0:
        return NOT_A_LENGTH
    if value % (1024 * 1024) == 0:
        return f"{value // (1024 * 1024)}M"
    if value % 1024 == 0:
        return f"{value // 1024}K"
    return str(value)


def length_problem(length: int, length_controlled: bool) -> str | None:
    """The one rule of a length read from outside (a record, an imported file, a results.json key):
    why `length` cannot be a task's, or None. A length-controlled task's length is one --lengths
    takes (MIN_LENGTH..MAX_LENGTH, what `harness eval` would run); another task's is 0 (prompts with
    no context to fit) or the token budget its prompts were cut to, at most MAX_TOKENS (the bound
    of --max-length and --max-model-len). Shared by eval's records (harness.pipeline.record_checks),
    `harness import` and the readers of results.json (report, leaderboard: tasks.length_rule)."""
    from harness.core.validate import MAX_TOKENS

    if isinstance(length, bool) or not isinstance(length, int):
        return f"length {length!r} is not a whole number of tokens"
    if length_controlled and not MIN_LENGTH <= length <= MAX_LENGTH:
        return f"length {length} is outside {MIN_LENGTH}..{MAX_LENGTH}, the lengths a length-controlled task runs at"
    if not 0 <= length <= MAX_TOKENS:
        return f"length {length} is outside 0..{MAX_TOKENS} tokens"
    return None
