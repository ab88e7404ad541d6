"""OpenAI-MRCR's length bins, as its dataset card defines them, and the token counts that place items.

The card: "Bins are determined by number of tokens used by prompt + answer in the sample", with the
boundaries [4096, 8192], (8192, 16384], (16384, 32768], (32768, 65536], (65536, 131072],
(131072, 262144], (262144, 524288], (524288, 1048576], and its code counts tokens with tiktoken's
o200k_base over each message's content (n_tokens(messages)); openbench and evalscope add the answer's
tokens the same way. A bin is named by its upper edge, which is the record `length` of its items. The
released items all lie in [4096, 1048576]; an item under 4096 tokens is put in the first bin (as
openbench and evalscope do), one over 1048576 in none (it is never run).

Counting 2400 conversations of up to 5M characters takes minutes, so it is announced on stderr with
the number of items and shown as a progress bar on a terminal (openbench issue 24: a silent count
looked like a stall), and done once per file and process.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from harness.core.errors import UserError

BINS: tuple[int, ...] = (8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
FIRST_LOWER = 4096
ENCODING = "o200k_base"

Counter = Callable[[str], int]


def bin_of(tokens: int) -> int | None:
    """The upper edge of the card's bin holding an item of `tokens` (prompt + answer)."""
    return next((hi for hi in BINS if tokens <= hi), None)


def bin_range(hi: int) -> str:
    """The card's notation of a bin: [4096, 8192] for the first, (lo, hi] for the others."""
    return f"[{FIRST_LOWER}, {hi}]" if hi == BINS[0] else f"({hi // 2}, {hi}]"


def reference_counter() -> Counter:
    """tiktoken's o200k_base, the card's counter (offline: its file in TIKTOKEN_CACHE_DIR)."""
    try:
        enc = importlib.import_module("tiktoken").get_encoding(ENCODING)  # an optional dependency
    except Exception as exc:  # noqa: BLE001  (not installed, or its file cannot be fetched: one line)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        raise UserError(
            f"MRCR's bins are counted in {ENCODING} tokens, as its dataset card counts them, and tiktoken "
            f"cannot give them ({first}): pip install tiktoken, and offline put {ENCODING}.tiktoken's cache "
            "file in TIKTOKEN_CACHE_DIR"
        ) from None
    return lambda text: len(enc.encode(text, disallowed_special=()))


def item_tokens(messages: Sequence[dict], answer: str, count: Counter) -> int:
    """The card's count: every message's content, plus the answer."""
    return sum(count(m["content"]) for m in messages) + count(answer)


def count_all(
    texts: Sequence[tuple[Sequence[dict], str]], count: Counter, what: str, progress: bool = True
) -> list[int]:
    """item_tokens of each (messages, answer), announced on stderr and shown as a bar."""
    from harness.core.progress import progress_bar

    print(f"MRCR: counting {ENCODING} tokens of {len(texts)} {what} (the card's bins)", file=sys.stderr)
    bar = progress_bar(total=len(texts), desc=f"MRCR bins ({what})", unit="item", enabled=progress)
    out = []
    for messages, answer in texts:
        out.append(item_tokens(messages, answer, count))
        bar.update(1)
    bar.close()
    return out
