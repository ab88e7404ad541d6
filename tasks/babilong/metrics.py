"""BABILong's scoring: babilong/metrics.py's compare_answers, which the reference's leaderboard uses.

The output is lowercased and cut to its first sentence (before the first "."), and before any
"<context>", "<example>" or "Question" the model starts to write (the last cut comes after the
lowercasing, so it only catches a capitalised "Question" that survived: never, as there). The task's
label set (TASK_LABELS) is searched in what is left; labels that occur in the question never count.
Correct when the target is the only label found, or, for a list target ("apple,milk", qa8), when
its parts are exactly the labels found. Labels are matched as substrings, as there. Under the "reference" protocol the output is first
read as the leaderboard reads it back from the reference's CSV (csv_output).
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


# pandas.read_csv's default NA strings. The reference stores each output stripped in a CSV
# (run_model_on_babilong.py) and its leaderboard scores the CSV read back with read_csv and
# fillna('') (collect_results.py), so an output that is exactly one of these is scored as "".
# It moves scores only where a bare "None" would match a label as a substring: "no" in the yes/no
# tasks (qa6, qa9, qa10, qa17, qa18), where the leaderboard counts it wrong. qa1-qa5 never move.
CSV_NA = frozenset(
    ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA"]
    + ["NULL", "NaN", "None", "n/a", "nan", "null"]
)


def csv_output(output: str) -> str:
    """The output as the reference's leaderboard reads it back from its CSV."""
    output = output.strip()
    return "" if output in CSV_NA else output


def score(task: str, target: str, output: str, question: str, via_csv: bool = False) -> float:
    """1.0 when compare_answers accepts the output; via_csv: as the leaderboard reads it (csv_output)."""
    if via_csv:
        output = csv_output(output)
    return 1.0 if compare_answers(target, output, question, TASK_LABELS[task]) else 0.0
