"""The demo base model's pretraining corpus: documents that state facts in filler text and recall them later.

    python -m training.demo_corpus OUT.jsonl --num-docs 20000 --seed 1 --max-lines 40 --short-share 0.6
    python -m training.demo_corpus OUT.jsonl --num-docs 1000 --seed 3 --max-lines 81 --min-lines 20 \\
        --long-share 0.35 --long-lines 82,164          # `harness demo`'s corpus at a 2K window

Deterministic by seed: the same arguments write the same file on any machine (the printed sha256
is what a trained model records as its corpus). One ``{"text": ..., "kind": ...}`` per line.

What a document looks like (the skills RULER measures, in miniature):

- ``facts``: a header, filler lines (mostly RULER's noise sentence, sometimes other short sentences),
  1-6 key/value statements ("One of the special magic numbers for stone-lamp is: 4829301.") at
  random lines, then one to three questions, each followed by its answer prefix and the value.
- ``dense``: the haystack is made only of key/value statements (like niah_multikey_2/3), then questions.
- ``copy``: a list of keys, numbers and names, then the same list again (induction practice).
- ``repeat``: one random string of 30-60 letters and digits written 2-4 times: after its first copy
  every character is predictable only by looking back (the purest signal for growing induction heads).
- ``chain``: variable assignments ``VAR ABCD = 12345``, ``VAR EFGHIJ = VAR ABCD`` spread over
  filler, then the question and every variable of the chain in order (like vt).

How it stays apart from the evaluation samples (RULER generators in tasks/ruler/):

- its own random stream (``random.Random(f"demo-corpus:{seed}")``), never tasks.ruler.fitting's;
- keys are ``word-noun`` pairs that are NOT ``adjective-noun`` pairs: RULER's word keys are exactly
  the adjective-noun pairs (tasks/data/words.py), so no key string can be shared (checked by
  `is_ruler_word_key` on every key);
- chain variables have 4 or 6 capital letters; RULER's vt uses 5 (query) and 3 (in-context example);
- uuids are fresh random 128-bit values (as RULER's, but from this stream).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import statistics
import string
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
OTHER_FILLER = [
    "The river is wide. The hill is steep. The road is long. On we go.",
    "The tea is warm. The room is quiet. The clock is slow. Here we sit.",
    "The wind is cold. The snow is white. The night is dark. Home we go.",
]
LINE_TOKENS = 25  # tokens of one NOISE line with the demo tokenizer (assets/demo-base)
NEEDLE = "One of the special magic {kind} for {key} is: {value}."
KINDS = {"numbers": 0.6, "words": 0.15, "uuids": 0.25}

# Shares of document types (facts in noise / facts as the whole haystack / variable chains).
TYPES = {"facts": 0.5, "dense": 0.3, "chain": 0.2}


@cache
def _lists() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    from tasks.data.words import adjectives, nouns, word_list

    return adjectives(), nouns(), word_list("verblist.txt")


@cache
def _adj_noun_sets() -> tuple[frozenset, frozenset]:
    adj, noun, _ = _lists()
    return frozenset(adj), frozenset(noun)


def is_ruler_word_key(key: str) -> bool:
    """Whether `key` is an adjective-noun pair, i.e. in the space RULER draws niah word keys from."""
    adj, noun = _adj_noun_sets()
    return any(key[:i] in adj and key[i + 1 :] in noun for i, ch in enumerate(key) if ch == "-")


@cache
def _first_words() -> tuple[str, ...]:
    """First halves of corpus keys: nouns and verbs that are not adjectives (simple words only)."""
    adj, noun, verb = _lists()
    return tuple(sorted(w for w in set(noun) | set(verb) if w not in adj and w.isalpha()))


@cache
def _second_words() -> tuple[str, ...]:
    _, noun, _ = _lists()
    return tuple(w for w in noun if w.isalpha())


def word_key(rng: random.Random) -> str:
    while True:
        key = f"{rng.choice(_first_words())}-{rng.choice(_second_words())}"
        if not is_ruler_word_key(key):
            return key


def uuid_value(rng: random.Random) -> str:
    import uuid

    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def value_of(kind: str, rng: random.Random) -> str:
    if kind == "numbers":
        return str(rng.randint(10**6, 10**7 - 1))
    if kind == "words":
        return word_key(rng)
    return uuid_value(rng)


def _pick(rng: random.Random, shares: dict[str, float]) -> str:
    return rng.choices(list(shares), weights=list(shares.values()))[0]


def _filler(rng: random.Random, n: int) -> list[str]:
    # Mostly RULER's noise line (the haystack the eval uses); a few other lines so the model does not
    # key on one sentence.
    return [NOISE if rng.random() < 0.85 else rng.choice(OTHER_FILLER) for _ in range(n)]


def _questions(kind: str, keys: list[str], values: dict[str, str], rng: random.Random) -> str:
    singular = kind[:-1]
    asked = rng.sample(keys, min(len(keys), rng.choice([1, 1, 2, 3])))
    parts = []
    for key in asked:
        parts.append(
            f"What is the special magic {singular} for {key} mentioned in the provided text?"
            f" The special magic {singular} for {key} mentioned in the provided text is {values[key]}."
        )
    return "\n".join(parts)


def _header(kind: str, many: bool) -> str:
    if many:
        return (
            f"Some special magic {kind} are hidden within the following text. Make sure to memorize it. "
            f"I will quiz you about the {kind} afterwards."
        )
    singular = kind[:-1]
    return (
        f"A special magic {singular} is hidden within the following text. Make sure to memorize it. "
        f"I will quiz you about the {singular} afterwards."
    )


def facts_doc(rng: random.Random, max_lines: int, fill: bool = False) -> str:
    kind = _pick(rng, KINDS)
    n_keys = rng.choice([1, 1, 2, 3, 4, 6])
    keys = [uuid_value(rng) if kind == "uuids" and rng.random() < 0.5 else word_key(rng) for _ in range(n_keys)]
    values = {k: value_of(kind, rng) for k in keys}
    lines = _filler(rng, max_lines if fill else rng.randint(1, max_lines))
    for key in keys:
        lines.insert(rng.randint(0, len(lines)), NEEDLE.format(kind=kind, key=key, value=values[key]))
    return (
        _header(kind, n_keys > 1 and rng.random() < 0.5)
        + "\n"
        + "\n".join(lines)
        + "\n"
        + _questions(kind, keys, values, rng)
    )


def dense_doc(rng: random.Random, max_lines: int, fill: bool = False) -> str:
    kind = "uuids" if rng.random() < 0.35 else "numbers"
    # Filled: about as many tokens as `max_lines` filler lines (a number statement ~27 tokens, a uuid one ~54).
    n_keys = max(2, max_lines // (2 if kind == "uuids" else 1)) if fill else rng.randint(2, max(2, max_lines // 2))
    keys = [uuid_value(rng) if kind == "uuids" else word_key(rng) for _ in range(n_keys)]
    values = {k: value_of(kind, rng) for k in keys}
    lines = [NEEDLE.format(kind=kind, key=k, value=values[k]) for k in keys]
    return _header(kind, False) + "\n" + "\n".join(lines) + "\n" + _questions(kind, keys, values, rng)


def copy_doc(rng: random.Random, max_lines: int, fill: bool = False) -> str:
    """A list of keys and values, then the same list again: every token of the repeat is a recall
    (the cheapest way to grow the induction heads that the fact documents need)."""
    items = []
    for _ in range(rng.randint(3, max(3, 2 * max_lines))):
        r = rng.random()
        items.append(word_key(rng) if r < 0.5 else str(rng.randint(10**6, 10**7 - 1)) if r < 0.8 else _var_name(rng))
    sep = rng.choice([" ", ", ", "\n"])
    listing = sep.join(items)
    return f"Here is a list to memorize.\n{listing}\nRepeat the list.\n{listing}"


def repeat_doc(rng: random.Random, max_lines: int, fill: bool = False) -> str:
    # Long strings over 62 symbols, written 2-4 times: guessing "some symbol seen before" is worth
    # little here, so the gradient favours true copying, and a 2-layer model grows its induction
    # heads after a few hundred steps (strings of 4-24 symbols from one small alphabet gave no
    # copying in 2000 steps: the in-context-unigram shortcut was nearly as good).
    item = "".join(rng.choices(string.ascii_letters + string.digits, k=rng.randint(30, 60)))
    return rng.choice([" ", "\n", " | "]).join([item] * rng.randint(2, 4))


def _var_name(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_uppercase, k=rng.choice([4, 6])))


def chain_doc(rng: random.Random, max_lines: int, fill: bool = False) -> str:
    hops = rng.randint(1, 5)
    names: list[str] = []
    while len(names) < hops:
        name = _var_name(rng)
        if name not in names:
            names.append(name)
    value = str(rng.randint(10000, 99998))
    chain = [f"VAR {names[0]} = {value}"] + [f"VAR {names[j + 1]} = VAR {names[j]} " for j in range(hops - 1)]
    lines = _filler(rng, max(len(chain), max_lines) if fill else rng.randint(len(chain), max(len(chain), max_lines)))
    positions = sorted(rng.sample(range(len(lines) + len(chain)), len(chain)))
    for pos, line in zip(positions, chain):
        lines.insert(pos, line)
    return (
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
        + "\n".join(lines)
        + "\n"
        + f"Question: Find all variables that are assigned the value {value} in the text above."
        + f" Answer: According to the chain(s) of variable assignment in the text above, {hops} variables are "
        + f"assigned the value {value}, they are: "
        + " ".join(names)
    )


def documents(
    num_docs: int,
    seed: int = 0,
    max_lines: int = 40,
    min_lines: int | None = None,
    short_share: float = 0.0,
    short_lines: int = 6,
    copy_share: float = 0.0,
    repeat_share: float = 0.0,
    long_share: float = 0.0,
    long_lines: tuple[int, int] | None = None,
) -> Iterator[dict]:
    """`num_docs` documents; filler lines per document up to `max_lines` (about 25 tokens each).

    With `min_lines`, the line budget of each document is drawn from [min_lines, max_lines]
    (longer distances between a fact and its recall). A `short_share` of the documents get at most
    `short_lines` lines instead: short documents carry many recall events per token, the easy end
    of the curriculum. A `copy_share` of the documents are `copy_doc` lists repeated verbatim, a
    `repeat_share` are `repeat_doc` strings.

    Long-document upsampling (the paper's UpSampledMix, in miniature): a `long_share` of the
    documents are filled to a budget drawn from `long_lines` = (lo, hi) lines, all of it used
    (facts, dense and chain documents; a line is about 25 tokens), so they span a training window
    of about 25 * lo tokens. Without `long_share` no random draw changes: the same seed writes the
    same corpus as before the option existed (the shipped base model's corpora keep their sha256).
    """
    if long_share and not long_lines:
        raise ValueError("long_share needs long_lines=(lo, hi)")
    rng = random.Random(f"demo-corpus:{seed}")
    makers = {"facts": facts_doc, "dense": dense_doc, "chain": chain_doc, "copy": copy_doc, "repeat": repeat_doc}
    types = dict(TYPES)
    if copy_share or repeat_share:
        rest = 1 - copy_share - repeat_share
        types = {k: v * rest for k, v in TYPES.items()} | {"copy": copy_share, "repeat": repeat_share}
    for _ in range(num_docs):
        kind = _pick(rng, types)
        if long_share and rng.random() < long_share:
            assert long_lines is not None
            yield {"text": makers[kind](rng, rng.randint(*long_lines), True), "kind": kind}
            continue
        if short_share and rng.random() < short_share:
            budget = short_lines
        else:
            budget = rng.randint(min_lines, max_lines) if min_lines else max_lines
        yield {"text": makers[kind](rng, budget), "kind": kind}


@dataclass(frozen=True)
class LengthStats:
    """Document lengths (tokens, EOS included) of a corpus against a training window."""

    docs: int
    tokens: int
    median: float
    p90: int
    window: int
    spanning_docs: int
    """Documents with at least window - 1 tokens: they fill a whole window next to its anchor."""
    spanning_share: float
    """Share of all tokens that sit in those documents."""


def length_stats(lengths: list[int], window: int) -> LengthStats:
    """Median, 90th percentile (nearest rank) and the share of tokens in documents that span `window`.

    A document spans the window when it has at least `window - 1` tokens: every training window is
    the anchor plus `window - 1` tokens (training/packing.py), so such a document can fill one.
    """
    if not lengths:
        raise ValueError("no documents")
    ordered = sorted(lengths)
    n, total = len(ordered), sum(ordered)
    spanning = [x for x in ordered if x >= window - 1]
    return LengthStats(
        docs=n,
        tokens=total,
        median=statistics.median(ordered),
        p90=ordered[(9 * n + 9) // 10 - 1],  # nearest rank: ceil(0.9 n), in integers
        window=window,
        spanning_docs=len(spanning),
        spanning_share=sum(spanning) / total if total else 0.0,
    )


def long_lines_for(window: int, line_tokens: int = LINE_TOKENS) -> tuple[int, int]:
    """Line budget of a long document at `window`: from one window's worth of filler lines
    (`line_tokens` each, plus the header and questions) to two."""
    lo = math.ceil(window / line_tokens)
    return lo, 2 * lo


def write(
    path: str | Path,
    num_docs: int,
    seed: int = 0,
    max_lines: int = 40,
    min_lines: int | None = None,
    short_share: float = 0.0,
    short_lines: int = 6,
    copy_share: float = 0.0,
    repeat_share: float = 0.0,
    long_share: float = 0.0,
    long_lines: tuple[int, int] | None = None,
) -> str:
    """Write the corpus as JSONL; returns the sha256 of the file (first 16 hex digits)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    docs = documents(
        num_docs, seed, max_lines, min_lines, short_share, short_lines, copy_share, repeat_share, long_share, long_lines
    )
    with path.open("w", encoding="utf-8") as f:
        for doc in docs:
            line = json.dumps(doc, ensure_ascii=False) + "\n"
            h.update(line.encode())
            f.write(line)
    return h.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--num-docs", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-lines", type=int, default=40)
    p.add_argument("--min-lines", type=int)
    p.add_argument("--short-share", type=float, default=0.0, help="share of documents with at most --short-lines lines")
    p.add_argument("--short-lines", type=int, default=6)
    p.add_argument(
        "--copy-share", type=float, default=0.0, help="share of copy documents (a list, then the list again)"
    )
    p.add_argument(
        "--repeat-share", type=float, default=0.0, help="share of repeat documents (one random string several times)"
    )
    p.add_argument(
        "--long-share", type=float, default=0.0, help="share of long documents, filled to --long-lines (upsampling)"
    )
    p.add_argument("--long-lines", default=None, metavar="LO,HI", help="line budget of the long documents, e.g. 82,164")
    a = p.parse_args(argv)
    long_lines = None
    if a.long_lines is not None:
        try:
            lo, hi = (int(x) for x in a.long_lines.split(","))
        except ValueError:
            p.error(f"--long-lines {a.long_lines!r}: write two integers LO,HI, e.g. 82,164")
        if not 1 <= lo <= hi:
            p.error(f"--long-lines {a.long_lines}: need 1 <= LO <= HI")
        long_lines = (lo, hi)
    if not 0 <= a.long_share <= 1 or (a.long_share and long_lines is None):
        p.error("--long-share must lie in [0, 1] and needs --long-lines LO,HI")
    if a.num_docs < 1 or a.max_lines < 1 or (a.min_lines is not None and not 1 <= a.min_lines <= a.max_lines):
        p.error("--num-docs and --max-lines must be >= 1 and 1 <= --min-lines <= --max-lines")
    if (
        not 0 <= a.short_share <= 1
        or a.copy_share < 0
        or a.repeat_share < 0
        or a.copy_share + a.repeat_share >= 1
        or a.short_lines < 1
    ):
        p.error(
            "--short-share must lie in [0, 1], --copy-share and --repeat-share be >= 0 with a sum below 1, "
            "and --short-lines be >= 1"
        )
    digest = write(
        a.out,
        a.num_docs,
        a.seed,
        a.max_lines,
        a.min_lines,
        a.short_share,
        a.short_lines,
        a.copy_share,
        a.repeat_share,
        a.long_share,
        long_lines,
    )
    print(f"wrote {a.num_docs} documents to {a.out} (sha256 {digest})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
