"""The effective length: the longest context a model still handles, by RULER's rule (a fixed
threshold that every length up to it clears) and by NoLiMa's (a fraction of the model's own
short-context score). One definition, read by aggregation and by the leaderboards."""

from __future__ import annotations

from harness.core.lengths import format_length

BELOW_FIRST = "below the first length"


def effective_length_value(means: dict[int, float], threshold: float) -> int | None:
    """The one definition: largest evaluated L with the mean > threshold at every evaluated L' <= L."""
    value = None
    for L in sorted(means):
        if not means[L] > threshold:
            break
        value = L
    return value


def effective_length(per_length: dict[str, dict], lengths: list[int], threshold: float) -> dict:
    """Largest evaluated L with the checkpoint-mean average > threshold at every evaluated L' <= L."""
    evaluated = [L for L in sorted(lengths) if str(L) in per_length]
    value = effective_length_value({L: per_length[str(L)]["mean"] for L in evaluated}, threshold)
    if not evaluated:
        label = "no length evaluated"
    else:
        label = format_length(value) if value is not None else BELOW_FIRST
    return {"threshold": threshold, "value": value, "label": label}


# NoLiMa's rule (adobe-research/NoLiMa README): the effective length is the longest length whose
# score stays at or above 85% of the model's base score, its score at short contexts (NoLiMa's
# 250, 500 and 1K; here the mean of the suite's per-length averages at lengths <= 1K, or at its
# shortest length when none is that short).
NOLIMA_FRACTION = 0.85
NOLIMA_BASE_MAX_LENGTH = 1024


def base_relative_effective_length(
    per_length: dict[str, dict],
    lengths: list[int],
    fraction: float = NOLIMA_FRACTION,
    base_max_length: int = NOLIMA_BASE_MAX_LENGTH,
) -> dict:
    """NoLiMa's effective length beside RULER's: largest evaluated L with the checkpoint-mean
    average >= fraction x base score at every evaluated L' <= L (the base lengths included)."""
    evaluated = [L for L in sorted(lengths) if str(L) in per_length]
    out: dict = {"rule": "nolima", "fraction": fraction, "base_lengths": [], "base_score": None}
    if not evaluated:
        return {**out, "threshold": None, "value": None, "label": "no length evaluated"}
    base_lengths = [L for L in evaluated if L <= base_max_length] or evaluated[:1]
    base = sum(per_length[str(L)]["mean"] for L in base_lengths) / len(base_lengths)
    out.update(base_lengths=base_lengths, base_score=base)
    if not base > 0:  # every length would pass a threshold of 0
        return {**out, "threshold": 0.0, "value": None, "label": "n/a (base score 0)"}
    threshold = fraction * base
    value = None
    for L in evaluated:
        if not per_length[str(L)]["mean"] >= threshold:
            break
        value = L
    return {**out, "threshold": threshold, "value": value, "label": format_length(value) if value else BELOW_FIRST}
