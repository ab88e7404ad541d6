"""NoLiMa's base score and effective length, as the paper computes them for its Table 3.

The repository does not compute them (evaluation/gather_results.ipynb only writes each result
file's mean over its 26 depths to a CSV); the paper (Modarressi et al., ICML 2025, section 4.3)
does: "For each question-needle example, we compute the average scores over 5 haystacks, then take
its maximum score across the 250, 500, and 1K tests. The final base score is obtained by averaging
these maximum scores across all question-needle examples ... we define the threshold as 85% of the
base score. Thus, the effective length of a model is the largest tested length that exceeds this
threshold." The README's Table 3 reports it over its columns 1K..32K, "<1K" when 1K misses.

This differs from harness.pipeline.aggregate.base_relative_effective_length (the mean of the per-length
averages at lengths <= 1K): a per-test maximum is at least the per-length mean, so the paper's
base is higher whenever tests peak at different short lengths. docs/nolima-parity.md has the
comparison; the aggregator calls `effective_length` with per-test means (see per_test_means).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from harness.core.lengths import format_length

FRACTION = 0.85
# The base lengths: NoLiMa's 250, 500 and 1K. A length <= 1024 counts, so an exact-length run's
# 512 and 1K (1024) play the same part.
BASE_MAX_LENGTH = 1024
# Table 3's effective length ranges over its columns from 1K on ("<1K" below them).
FIRST_EFFECTIVE = 1000


def per_test_means(rows: Iterable[tuple[int, str, str, float]]) -> dict[tuple[int, str], float]:
    """(length, test, checkpoint, score) rows -> {(length, test): mean}: within each checkpoint the
    mean over the test's samples (its books and depths), then the mean over checkpoints."""
    sums: dict[tuple[int, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for length, test, ckpt, score in rows:
        acc = sums[(length, test, ckpt)]
        acc[0] += score
        acc[1] += 1
    by_cell: dict[tuple[int, str], list[float]] = defaultdict(list)
    for (length, test, _), (total, n) in sums.items():
        by_cell[(length, test)].append(total / n)
    return {k: sum(v) / len(v) for k, v in by_cell.items()}


def _label(value: int | None, candidates: list[int]) -> str:
    if value is not None:
        return format_length(value) if value % 1000 else f"{value // 1000}K"
    return f"<{format_length(candidates[0]) if candidates[0] % 1000 else f'{candidates[0] // 1000}K'}"


def effective_length(means: Mapping[tuple[int, str], float], fraction: float = FRACTION) -> dict:
    """The paper's rule over {(length, test): mean score}. Lengths are the record lengths (the
    haystack in the reference protocol); a length's score is the mean over its tests (each test
    has the same number of books x depths in a full grid, so this is the grid mean)."""
    lengths = sorted({L for L, _ in means})
    out: dict = {"rule": "nolima-paper", "fraction": fraction, "base_lengths": [], "base_score": None}
    if not lengths:
        return {**out, "threshold": None, "value": None, "label": "no length evaluated"}
    base_lengths = [L for L in lengths if L <= BASE_MAX_LENGTH] or lengths[:1]
    tests = sorted({t for L, t in means if L in base_lengths})
    # per test: its best short length; then the mean over tests
    best = [max(means[(L, t)] for L in base_lengths if (L, t) in means) for t in tests]
    base = sum(best) / len(best)
    out.update(base_lengths=base_lengths, base_score=base)
    if not base > 0:
        return {**out, "threshold": 0.0, "value": None, "label": "n/a (base score 0)"}
    threshold = fraction * base
    score = {L: _mean([m for (L2, _), m in means.items() if L2 == L]) for L in lengths}
    candidates = [L for L in lengths if L >= FIRST_EFFECTIVE] or lengths[-1:]
    # "the largest tested length that exceeds this threshold", read as the README's "the longest
    # context where a model maintains at least 85%": the last of the passing run from 1K on (a
    # length after a failing one does not count; a score equal to the threshold passes).
    value = None
    for L in candidates:
        if not score[L] >= threshold:
            break
        value = L
    return {**out, "threshold": threshold, "value": value, "label": _label(value, candidates), "scores": score}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
