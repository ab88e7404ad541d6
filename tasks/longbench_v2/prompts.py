"""LongBench v2 prompts, answer extraction and budgets, from THUDM/LongBench (v2: pred.py, prompts/).

The templates are prompts/0shot.txt, 0shot_cot.txt, 0shot_cot_ans.txt and 0shot_no_context.txt byte
for byte (no trailing newline; "Let’s" with U+2019). `fill` substitutes the placeholders as pred.py
does: one str.replace after another, in the order $DOC$, $Q$, $C_A$, $C_B$, $C_C$, $C_D$ (then $COT$),
each value stripped, so a placeholder that appears inside an earlier value is replaced too, as there.
"""

from __future__ import annotations

import re

_CHOICES = "Choices:\n(A) $C_A$\n(B) $C_B$\n(C) $C_C$\n(D) $C_D$\n\n"
_FORMAT = 'Format your response as follows: "The correct answer is (insert answer here)".'

TEMPLATE_0SHOT = (
    "Please read the following text and answer the question below.\n\n<text>\n$DOC$\n</text>\n\n"
    "What is the correct answer to this question: $Q$\n" + _CHOICES + _FORMAT
)
TEMPLATE_COT = (
    "Please read the following text and answer the questions below.\n\n<text>\n$DOC$\n</text>\n\n"
    "What is the correct answer to this question: $Q$\n" + _CHOICES + "Let\u2019s think step by step:"
)
TEMPLATE_COT_ANSWER = (
    "Please read the following text and answer the questions below.\n\nThe text is too long and omitted here.\n\n"
    "What is the correct answer to this question: $Q$\n" + _CHOICES + "Let\u2019s think step by step: $COT$\n\n"
    "Based on the above, what is the single, most likely answer choice? " + _FORMAT
)
TEMPLATE_NO_CONTEXT = (
    "What is the correct answer to this question: $Q$\n"
    + _CHOICES
    + "What is the single, most likely answer choice? "
    + _FORMAT
)

# pred.py's max_new_tokens: 128 for an answer, 1024 for the chain of thought.
ANSWER_TOKENS = 128
COT_TOKENS = 1024

DIFFICULTIES = ("easy", "hard")
LENGTHS = ("short", "medium", "long")


def fill(template: str, item: dict, context: str = "", cot: str | None = None) -> str:
    prompt = (
        template.replace("$DOC$", context.strip())
        .replace("$Q$", item["question"].strip())
        .replace("$C_A$", item["choice_A"].strip())
        .replace("$C_B$", item["choice_B"].strip())
        .replace("$C_C$", item["choice_C"].strip())
        .replace("$C_D$", item["choice_D"].strip())
    )
    return prompt.replace("$COT$", cot) if cot is not None else prompt


def extract_answer(response: str) -> str | None:
    """pred.py's extract_answer: the letter of "The correct answer is (X)" or "... is X", '*' removed."""
    response = response.replace("*", "")
    match = re.search(r"The correct answer is \(([A-D])\)", response)
    if match:
        return match.group(1)
    match = re.search(r"The correct answer is ([A-D])", response)
    return match.group(1) if match else None
