"""A small training corpus the project generates deterministically, for tests and the demo.

Documents are English-like word salad from the wonderwords lists, with lengths drawn per domain from
a lognormal (as web-scale data is: many short documents, a few long ones) and domains drawn with
SlimPajama-like weights. Each document states a few facts early ("The code for amber-lantern is
48213.") and recalls them near its end, so long documents carry long-range dependencies a model can
learn. Nothing here comes from an evaluation set.

Run: ``python -m training.corpus OUT.jsonl --num-docs 2000 --seed 0`` writes one
``{"text": ..., "domain": ...}`` per line.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class DomainSpec:
    weight: float
    """Share of documents."""
    median_words: float
    """Median document length in words (lognormal median = exp(mu))."""
    sigma: float
    """Lognormal shape: larger = heavier long tail."""


# Shares loosely follow SlimPajama's document counts; books and arxiv are rare but long.
DOMAINS: dict[str, DomainSpec] = {
    "CommonCrawl": DomainSpec(0.31, 350, 1.0),
    "C4": DomainSpec(0.50, 160, 0.7),
    "GitHub": DomainSpec(0.04, 300, 1.1),
    "ArXiv": DomainSpec(0.02, 2500, 0.6),
    "Books": DomainSpec(0.01, 6000, 0.6),
    "Wikipedia": DomainSpec(0.07, 300, 0.9),
    "StackExchange": DomainSpec(0.05, 180, 0.8),
}
MIN_WORDS = 12


@lru_cache(maxsize=1)
def _words() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    from importlib.resources import files

    def load(name):
        text = files("wonderwords.assets").joinpath(name).read_text(encoding="utf-8")
        return tuple(sorted({w.strip().lower() for w in text.splitlines() if w.strip().isalpha()}))

    return load("nounlist.txt"), load("adjectivelist.txt"), load("verblist.txt")


def _sentence(rng: random.Random) -> str:
    nouns, adjs, verbs = _words()
    n = rng.randint(5, 14)
    words = []
    for i in range(n):
        pool = (adjs, nouns, verbs)[i % 3] if rng.random() < 0.8 else nouns
        words.append(rng.choice(pool))
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def _code_line(rng: random.Random) -> str:
    nouns, _, verbs = _words()
    return f"def {rng.choice(verbs)}_{rng.choice(nouns)}(x):\n    return x + {rng.randrange(1000)}\n"


def _document(rng: random.Random, domain: str, num_words: int) -> str:
    nouns, adjs, _ = _words()
    facts = [
        (f"{rng.choice(adjs)}-{rng.choice(nouns)}", rng.randrange(10_000, 100_000)) for _ in range(rng.randint(1, 3))
    ]
    head = " ".join(f"The code for {k} is {v}." for k, v in facts)
    tail = " ".join(f"Recall: the code for {k} is {v}." for k, v in facts)
    body: list[str] = []
    count = len(head.split()) + len(tail.split())
    while count < num_words:
        piece = _code_line(rng) if domain == "GitHub" and rng.random() < 0.5 else _sentence(rng)
        body.append(piece)
        count += len(piece.split())
    return "\n".join([head, " ".join(body), tail])


def sample_num_words(rng: random.Random, spec: DomainSpec, max_words: int) -> int:
    return int(min(max_words, max(MIN_WORDS, rng.lognormvariate(math.log(spec.median_words), spec.sigma))))


def generate_documents(
    num_docs: int, seed: int = 0, *, max_words: int = 30_000, domains: dict[str, DomainSpec] | None = None
) -> Iterator[dict]:
    """Yield `num_docs` dicts {"text", "domain"}; the same arguments give the same documents."""
    domains = domains or DOMAINS
    names = list(domains)
    weights = [domains[n].weight for n in names]
    for i in range(num_docs):
        rng = random.Random(f"corpus-{seed}-{i}")  # per-document stream: doc i does not depend on num_docs
        domain = rng.choices(names, weights)[0]
        yield {"text": _document(rng, domain, sample_num_words(rng, domains[domain], max_words)), "domain": domain}


def write_corpus(
    path: str | Path,
    num_docs: int,
    seed: int = 0,
    *,
    max_words: int = 30_000,
    domains: dict[str, DomainSpec] | None = None,
) -> Path:
    """Write the generated corpus as JSONL (fields text, domain) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for doc in generate_documents(num_docs, seed, max_words=max_words, domains=domains):
            f.write(json.dumps(doc) + "\n")
    return path


def _main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--num-docs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-words", type=int, default=30_000)
    args = ap.parse_args()
    print(write_corpus(args.out, args.num_docs, args.seed, max_words=args.max_words))


if __name__ == "__main__":
    _main()
