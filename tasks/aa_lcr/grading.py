"""How an AA-LCR answer is graded: before the judge, then by its reply.

Before the judge is asked, an empty answer (nothing but whitespace: NeMo-Skills' is_valid_generation,
which grades it INCORRECT whatever its judge said) and an answer cut by the generation budget (it ran
to max_new_tokens: the model never finished, and a judge shown half an answer may call it consistent)
are INCORRECT, and the judge is not called. An AA-LCR port graded empty answers CORRECT because its
judge was shown nothing and agreed (scitix/sieval issue 44); a judge is never given the chance here.

The judge's reply is read as NeMo-Skills' AALCRMetrics.is_aalcr_correct reads it
(nemo_skills/evaluation/metrics/aalcr_metrics.py at 8b18f39): stripped and upper-cased, CORRECT when
it is "CORRECT" or starts with it; everything else, "INCORRECT" included, is INCORRECT.
"""

from __future__ import annotations

EMPTY = "empty"
CUT = "cut"


def before_judge(prediction: str, cut: bool) -> str | None:
    """Why the answer is INCORRECT without asking the judge ("empty", "cut"), or None: ask it."""
    if not prediction.strip():
        return EMPTY
    if cut:
        return CUT
    return None


def is_correct(reply: str | None) -> bool:
    """The reference's reading of a judge reply."""
    if reply is None:
        return False
    text = reply.strip().upper()
    return text == "CORRECT" or text.startswith("CORRECT")


def readable(reply: str) -> bool:
    """A reply that says one of the two words first (what the judge prompt asks for)."""
    text = reply.strip().upper()
    return text.startswith(("CORRECT", "INCORRECT"))
