"""Word lists RULER draws from: the `wonderwords` 2.2.0 noun / adjective / verb lists.

niah word keys are "{adjective}-{noun}" pairs. The reference materialises the sorted set of all
6.17M pairs per process (11 s, 1 GB); we draw a pair index uniformly from the product of the
sorted, de-duplicated adjective and noun lists and build the one string we need.
"""

from __future__ import annotations

import hashlib
import random
from functools import cache


@cache
def word_list(name: str) -> tuple[str, ...]:
    """Sorted distinct entries of wonderwords' assets/{name} (nounlist.txt, adjectivelist.txt, verblist.txt)."""
    from wonderwords import random_word

    return tuple(sorted(set(random_word._get_words_from_text_file(name))))


def nouns() -> tuple[str, ...]:
    return word_list("nounlist.txt")


def adjectives() -> tuple[str, ...]:
    return word_list("adjectivelist.txt")


@cache
def cwe_words() -> tuple[str, ...]:
    """common_words_extraction's pool: sorted set of nouns + adjectives + verbs."""
    return tuple(sorted(set(nouns()) | set(adjectives()) | set(word_list("verblist.txt"))))


def random_pair(rng: random.Random) -> str:
    """One adjective-noun key, uniform over the pairs."""
    a, n = adjectives(), nouns()
    i = rng.randrange(len(a) * len(n))
    return f"{a[i // len(n)]}-{n[i % len(n)]}"


@cache
def words_hash() -> str:
    h = hashlib.sha256()
    for name in ("nounlist.txt", "adjectivelist.txt", "verblist.txt"):
        h.update("\n".join(word_list(name)).encode())
    return h.hexdigest()[:16]
