"""RULER's metrics and prediction clean-up (NVIDIA/RULER scripts/eval/synthetic/constants.py and
scripts/eval/evaluate.py `postprocess_pred`).

Per sample, case-insensitive substring tests on the cleaned prediction:
  string_match_all  = share of references found (niah, vt, cwe, fwe)
  string_match_part = 1.0 if any reference is found, else 0.0 (qa)
A task's score is the mean over samples x 100 (the reference rounds that mean to 2 decimals).
Substring matching is the reference's behaviour, false positives included ("12" matches "123").
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f]")


def postprocess(prediction: str) -> str:
    """strip, replace control characters with "\\n", strip (as the reference does)."""
    return _CONTROL.sub("\n", prediction.strip()).strip()


def string_match_all(prediction: str, references) -> float:
    pred = postprocess(prediction).lower()
    refs = list(references)
    return sum(1.0 for r in refs if r.lower() in pred) / len(refs)


def string_match_part(prediction: str, references) -> float:
    pred = postprocess(prediction).lower()
    return max(1.0 if r.lower() in pred else 0.0 for r in references)


METRICS = {"string_match_all": string_match_all, "string_match_part": string_match_part}


def score(metric: str, prediction: str, references) -> float:
    return METRICS[metric](prediction, references)


def task_score(metric: str, predictions, references) -> float:
    """The reference's task score: mean over samples x 100, rounded to 2 decimals."""
    values = [score(metric, p, r) for p, r in zip(predictions, references)]
    return round(sum(values) / len(values) * 100, 2)
