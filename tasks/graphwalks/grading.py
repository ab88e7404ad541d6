"""GraphWalks answer parsing and set F1, as lm-eval's graphwalks task defines them
(lm_eval/tasks/graphwalks/utils.py: extract_answer_list, extract_answer_list_flexible,
process_results), which fixes the dataset card's extraction (openai/graphwalks README).

- strict (the card's rule, lm-eval's `f1`): only the last line of the response counts (trailing
  newlines dropped first); it must hold "Final Answer:" followed by a bracketed list. Anything
  else is a parse failure: the empty prediction, F1 0.
- flexible (lm-eval's `flexible_f1`, added because models other than OpenAI's seldom end on the
  answer, lm-eval pull request 3377): the last line, searching upwards, that holds
  "Final Answer: [...]".
Items are split on commas and stripped of spaces and of quote marks; empty items are dropped.

F1 is over sets (duplicates count once): recall = |P & G| / |G|, precision = |P & G| / |P|, each 0
when its denominator is 0, F1 their harmonic mean (0 when both are 0). A gold set that is empty
scores 0 whatever is answered, as the reference computes it.

The card's own get_list takes the whole match "Final Answer: [a, b]" and strips brackets from its
ends, so its first item keeps "Final Answer: [": lm-eval's capturing group is what every later
harness uses, and what is pinned against here (benchmarks/graphwalks_parity.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_FINAL = re.compile(r"Final Answer:\s*\[(.*)\]")
MARKER = "Final Answer:"


def _items(bracketed: str) -> list[str]:
    if not bracketed.strip():
        return []
    return [item.strip().strip("'\"") for item in bracketed.split(",") if item.strip()]


def parse_last_line(response: str) -> tuple[list[str], bool]:
    """(nodes, failed): the list on the response's last line; ([], True) when it has none."""
    line = response.rstrip("\n").split("\n")[-1]
    if MARKER not in line:
        return [], True
    found = _FINAL.search(line)
    return (_items(found.group(1)), False) if found else ([], True)


def parse_flexible(response: str) -> tuple[list[str], bool]:
    """(nodes, failed): the list of the last line holding "Final Answer: [...]"; ([], True) if none."""
    for line in reversed(response.rstrip("\n").split("\n")):
        found = _FINAL.search(line)
        if found:
            return _items(found.group(1)), False
    return [], True


def set_f1(predicted: Iterable[str], gold: Iterable[str]) -> float:
    """Set F1 of the predicted nodes against the gold nodes (duplicates count once)."""
    pred, truth = set(predicted), set(gold)
    overlap = len(pred & truth)
    recall = overlap / len(truth) if truth else 0.0
    precision = overlap / len(pred) if pred else 0.0
    return 2 * recall * precision / (recall + precision) if recall + precision > 0 else 0.0


def f1(response: str, gold: Iterable[str], flexible: bool = False) -> float:
    """The reference's `f1` (last line) or `flexible_f1` of one response."""
    nodes, _ = (parse_flexible if flexible else parse_last_line)(response)
    return set_f1(nodes, gold)
