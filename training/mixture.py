"""Data mixtures: per-source token budgets with long documents up-sampled within each source.

This is Fu et al. (2024)'s per-source up-sampling ("UpSampledMix" in the AnchorAttention paper):
every source (CommonCrawl, C4, GitHub, ...) gets a token budget, by default its share of tokens in
the original data (so the domain mixture is kept), and within each source documents of at least
`long_threshold` tokens are drawn `long_weight` times as often as shorter ones. Drawing is weighted
sampling without replacement (Efraimidis-Spirakis keys u^(1/w)), repeated in further passes when a
source's budget exceeds its pool (then documents repeat: true up-sampling). A source stops at the
first document that reaches its budget, so it overshoots by less than one document.

`parse_mixture` reads the `--mixture` option of `harness train` into a MixtureConfig.

The report is the paper's Appendix C table: per source, Mixture Ratio (documents of the source /
all documents) and Token Ratio (tokens of the source / all tokens), for the original pool and for
the mixture.

Run: ``python -m training.mixture DATA --tokenizer DIR --total-tokens 2000000 [--shares C4=0.2,...]``
prints the table.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.core.errors import UserError

DEFAULT_LONG_THRESHOLD = 4096
# Fu et al. give no single weight: it is the knob that sets how much long data the mix holds.
DEFAULT_LONG_WEIGHT = 5.0


@dataclass(frozen=True)
class MixtureConfig:
    total_tokens: int
    """Tokens in the whole mixture."""
    shares: dict[str, float] | None = None
    """Token share per source (sums to 1); None keeps each source's share in the original pool."""
    long_threshold: int = DEFAULT_LONG_THRESHOLD
    """A document of at least this many tokens counts as long."""
    long_weight: float = DEFAULT_LONG_WEIGHT
    """Sampling weight of a long document relative to a short one (1 = no up-sampling)."""
    seed: int = 0


@dataclass
class SourceStats:
    docs: int
    tokens: int


@dataclass
class MixtureReport:
    original: dict[str, SourceStats]
    mixture: dict[str, SourceStats]
    budgets: dict[str, int]

    def table(self) -> str:
        """Mixture Ratio and Token Ratio per source, original vs up-sampled (Appendix C layout)."""
        sources = sorted(self.original, key=lambda s: -self.original[s].tokens)
        width = max(12, *(len(s) for s in sources))
        lines = [" " * 26 + "".join(f"{s:>{width + 2}}" for s in sources)]
        for title, stats in (("Up-sampled mixture", self.mixture), ("Original", self.original)):
            total_docs = sum(v.docs for v in stats.values()) or 1
            total_tokens = sum(v.tokens for v in stats.values()) or 1
            lines.append(f"- {title}")
            lines.append(
                f"{'  Mixture Ratio':<26}"
                + "".join(f"{100 * stats[s].docs / total_docs:>{width + 1}.2f}%" for s in sources)
            )
            lines.append(
                f"{'  Token Ratio':<26}"
                + "".join(f"{100 * stats[s].tokens / total_tokens:>{width + 1}.2f}%" for s in sources)
            )
        return "\n".join(lines)


def parse_shares(text: str) -> dict[str, float]:
    """'C4=0.2,CommonCrawl=0.8' -> {"C4": 0.2, "CommonCrawl": 0.8}; must sum to 1."""
    from harness.core.validate import ascii_float

    shares: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        try:
            shares[name.strip()] = ascii_float(value)
        except ValueError:
            eq = ""
        if not eq or not name.strip() or shares[name.strip()] < 0:
            raise UserError(f"bad mixture share {part!r}: write SOURCE=FRACTION, e.g. C4=0.2,CommonCrawl=0.8")
    if not shares or not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-6):
        raise UserError(f"mixture shares sum to {sum(shares.values()):.4f}, not 1: fix the fractions")
    return shares


def parse_mixture(spec: str, seed: int):
    """--mixture "tokens=N[,source=FIELD][,long_threshold=4096][,long_weight=5][,SOURCE=SHARE,...]".

    Returns (MixtureConfig, source field or None). A document's source is its FIELD value, else its
    --domain-tags value, else its data file's stem (training.data); without SOURCE=SHARE items each
    source keeps its share of tokens in the original data.
    """
    from harness.core.validate import ascii_float

    opts: dict[str, Any] = {
        "tokens": None,
        "long_threshold": DEFAULT_LONG_THRESHOLD,
        "long_weight": DEFAULT_LONG_WEIGHT,
    }
    shares, source_field = [], None
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, _, value = part.partition("=")
        if key.strip() == "source":
            source_field = value.strip() or None
        elif key.strip() in opts:
            try:
                number = ascii_float(value)
                if not math.isfinite(number):
                    raise ValueError(value)
                opts[key.strip()] = number if key.strip() == "long_weight" else int(number)
            except ValueError:
                raise UserError(f"bad --mixture item {part!r}: {key.strip()} takes a finite number") from None
        else:
            shares.append(part)
    if not opts["tokens"] or opts["tokens"] < 1:
        raise UserError(
            f"--mixture {spec!r} needs tokens=N (the mixture's total tokens), e.g. tokens=2000000,C4=0.2,CommonCrawl=0.8"
        )
    if opts["long_threshold"] < 1:
        raise UserError(f"bad --mixture long_threshold={opts['long_threshold']}: give a positive number of tokens")
    config = MixtureConfig(
        total_tokens=opts["tokens"],
        shares=parse_shares(",".join(shares)) if shares else None,
        long_threshold=opts["long_threshold"],
        long_weight=opts["long_weight"],
        seed=seed,
    )
    return config, source_field


def budgets(lengths: dict[str, list[int]], config: MixtureConfig) -> dict[str, int]:
    """Token budget per source."""
    if config.shares is None:
        totals = {s: sum(v) for s, v in lengths.items()}
        grand = sum(totals.values())
        shares = {s: t / grand for s, t in totals.items()}
    else:
        missing = sorted(set(config.shares) - set(lengths))
        if missing:
            raise UserError(
                f"mixture source {missing[0]!r} has no documents (sources: {', '.join(sorted(lengths))}); fix --shares"
            )
        shares = config.shares
    return {s: round(config.total_tokens * f) for s, f in shares.items() if f > 0}


def select(lengths: list[int], budget: int, long_threshold: int, long_weight: float, rng: random.Random) -> list[int]:
    """Indices of the documents drawn for one source (repeats allowed after the pool is used up)."""
    if budget <= 0:
        return []
    if not lengths or sum(lengths) == 0:
        raise UserError("a mixture source with a token budget has no tokens: remove it from --shares")
    weights = [long_weight if n >= long_threshold else 1.0 for n in lengths]
    chosen: list[int] = []
    got = 0
    while True:
        # Efraimidis-Spirakis: sorting by u^(1/w) descending is weighted sampling without replacement.
        order = sorted(range(len(lengths)), key=lambda i: -(rng.random() ** (1.0 / weights[i])))
        for i in order:
            chosen.append(i)
            got += lengths[i]
            if got >= budget:
                return chosen


def build_mixture(docs: Iterable, config: MixtureConfig) -> tuple[list, MixtureReport]:
    """Draw the mixture from `docs` (TokenizedDoc-like, grouped by .source); shuffled across sources."""
    if config.long_weight <= 0:
        raise UserError(f"long-document weight {config.long_weight} must be positive (1 = no up-sampling)")
    by_source: dict[str, list] = {}
    for d in docs:
        by_source.setdefault(d.source, []).append(d)
    if not by_source:
        raise UserError("the mixture has no documents: check the data path")
    lengths = {s: [len(d.ids) for d in v] for s, v in by_source.items()}
    plan = budgets(lengths, config)
    rng = random.Random(config.seed)
    out, mixture = [], {}
    for source in sorted(plan):
        idx = select(lengths[source], plan[source], config.long_threshold, config.long_weight, rng)
        out += [by_source[source][i] for i in idx]
        mixture[source] = SourceStats(len(idx), sum(lengths[source][i] for i in idx))
    for source in lengths:
        mixture.setdefault(source, SourceStats(0, 0))
    rng.shuffle(out)
    original = {s: SourceStats(len(v), sum(v)) for s, v in lengths.items()}
    return out, MixtureReport(original, mixture, plan)


def _main() -> None:
    import argparse

    from harness.models.sources import model_tokenizer
    from training.data import load_documents

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--source-field", default="domain")
    ap.add_argument("--total-tokens", type=int, required=True)
    ap.add_argument("--shares")
    ap.add_argument("--long-threshold", type=int, default=DEFAULT_LONG_THRESHOLD)
    ap.add_argument("--long-weight", type=float, default=DEFAULT_LONG_WEIGHT)
    args = ap.parse_args()
    docs = load_documents(args.source, model_tokenizer(args.tokenizer), source_field=args.source_field)
    config = MixtureConfig(
        args.total_tokens, parse_shares(args.shares) if args.shares else None, args.long_threshold, args.long_weight
    )
    _, report = build_mixture(docs, config)
    print(report.table())


if __name__ == "__main__":
    _main()
