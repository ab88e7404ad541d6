"""OpenAI-MRCR's grader, as the dataset card (huggingface.co/datasets/openai/mrcr) defines it.

An answer that does not start with the row's random_string_to_prepend scores 0. Otherwise that
string is removed from the front of the answer and of the reference, and the score is difflib's
SequenceMatcher(None, answer, reference).ratio(): 2 x matched characters / total characters, with
difflib's defaults (no junk function, its automatic junk heuristic for strings of 200+ characters),
exactly as the card's grade() calls it. NeMo-Skills' evaluator (nemo_skills/evaluation/evaluator/
mrcr.py) and lm-eval's MRCR task (jannalulu/lm-evaluation-harness, utils.py process_results) do the
same; benchmarks/mrcr_parity.py runs theirs.
"""

from __future__ import annotations

from difflib import SequenceMatcher


def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """The card's score of one response in [0, 1]."""
    if not response.startswith(random_string_to_prepend):
        return 0.0
    return SequenceMatcher(
        None, response.removeprefix(random_string_to_prepend), answer.removeprefix(random_string_to_prepend)
    ).ratio()
