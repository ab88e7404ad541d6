"""Offline sentence splitting that approximates NLTK punkt (English) on essay text.

RULER splits its essay haystack with `nltk.sent_tokenize` (punkt, downloaded at run time) and
inserts needles between sentences. On whitespace-normalised prose punkt breaks after a word
ending in ".", "?" or "!" (closing quotes/brackets allowed after it) unless the word is a known
abbreviation or an initial, or the period ends an ellipsis/abbreviation followed by a lowercase
word. We split only at spaces, so sentences rejoined with " " give back the text. Only the
needle positions depend on it (a needle lands between two sentences), never the haystack text.
The punkt model itself is not available offline, so the rules are checked on hand-written cases.

    from tasks.data.sentences import sentence_starts
    starts = sentence_starts(words)   # word indices where sentences begin
"""

from __future__ import annotations

import itertools
import re

# Common English abbreviations from punkt's English model (the ones that occur in essays).
ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "jr",
        "sr",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "inc",
        "ltd",
        "co",
        "corp",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "no",
        "gen",
        "col",
        "lt",
        "sgt",
        "capt",
        "rev",
        "mt",
        "ft",
        "u.s",
        "u.k",
        "a.m",
        "p.m",
        "ph.d",
        "approx",
        "dept",
        "est",
        "fig",
        "vol",
    ]
)

_END = re.compile(r"""[.?!]['"’”)\]]*$""")
_CLOSERS = "'\"’”)]"


def _is_break(word: str, nxt: str | None) -> bool:
    if not _END.search(word):
        return False
    core = word.rstrip(_CLOSERS)
    if core.endswith(("?", "!")):
        return True
    body = core[:-1].lstrip("(\"'“‘[").lower()
    if body in ABBREVIATIONS:
        return False
    if len(body) == 1 and body.isalpha():  # an initial: "J. Smith"
        return False
    # an ellipsis inside a sentence is no break
    return not (core.endswith("..") and nxt is not None and nxt[:1].islower())


def sentence_starts(words: list[str]) -> list[int]:
    """Indices of the words that begin a sentence (always includes 0)."""
    starts = [0] if words else []
    for i, w in enumerate(words[:-1]):
        if _is_break(w, words[i + 1]):
            starts.append(i + 1)
    return starts


def split_sentences(text: str) -> list[str]:
    """Sentences of a whitespace-normalised text (for tests and callers that want strings)."""
    words = text.strip().split(" ")
    starts = sentence_starts(words) + [len(words)]
    return [" ".join(words[a:b]) for a, b in itertools.pairwise(starts)]
