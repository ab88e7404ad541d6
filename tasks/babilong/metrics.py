"""BABILong's scoring: babilong/metrics.py's compare_answers, which the reference's leaderboard uses.

The output is lowercased and cut to its first sentence (before the first "."), and before any
"<context>", "<example>" or "Question" the model starts to write (the last cut comes after the
lowercasing, so it only catches a capitalised "Question" that survived: never, as there). The task's
label set (TASK_LABELS) is searched in what is left; labels that occur in the question never count.
Correct when the target is the only label found, or, for a list target ("apple,milk", qa8), when
its parts are exactly the labels found. Labels are matched as substrings, as there.
"""

from __future__ import annotations

from tasks.babilong.prompts import TASK_LABELS


def preprocess_output(output: str) -> str:
    output = output.lower()
    output = output.split(".")[0]
    output = output.split("<context>")[0]
    output = output.split("<example>")[0]
    return output.split("Question")[0]


def compare_answers(target: str, output: str, question: str, task_labels) -> bool:
    output = preprocess_output(output)
    target = target.lower()
    labels = {label.lower() for label in task_labels}
    in_question = {label for label in labels if label in question.lower()}
    in_output = {label for label in labels if label in output} - in_question
    if "," in target and len(target) > 3:  # several targets (qa8's "apple,milk")
        parts = target.split(",")
        return all(p in in_output for p in parts) and len(in_output) == len(parts)
    return target in in_output and len(in_output) == 1


def score(task: str, target: str, output: str, question: str) -> float:
    return 1.0 if compare_answers(target, output, question, TASK_LABELS[task]) else 0.0
