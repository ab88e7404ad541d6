"""NVIDIA RULER's prediction files: each sample's answer, references and length, scored here by
RULER's own metric so a summary.csv import gets per-sample scores.

scripts/pred/call_api.py writes `<pred>/<task>.jsonl` beside the summary.csv that
scripts/eval/evaluate.py makes from it, one line per sample in the data's order:

    {"index": ..., "pred": ANSWER, "input": PROMPT, "outputs": [REFERENCE, ...], "others": {...},
     "truncation": -1, "length": TOKENS}

evaluate.py scores a line after postprocess_pred (strip, control characters to newlines, strip) with
scripts/eval/synthetic/constants.py: string_match_all (the share of the references found in the
answer, case-insensitive) for niah, variable_tracking, common_words_extraction and
freq_words_extraction; string_match_part (1 when any reference is found) for qa. "length" is the
tokens of the input with its answer prefix, in the model's tokenizer, plus the task's
tokens_to_generate (scripts/data/synthetic/*.py), so the prompt is `length - tokens_to_generate`
tokens (the model template's tokens, counted apart by prepare.py, are not in it). The sample's
index is its line: niah.py overwrites the "index" field with the needle's character position.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

from harness.core.errors import UserError
from harness.imports.cells import Cell, Sample, read_jsonl, sample_key

_WHAT = "RULER's <pred>/<task>.jsonl (written by scripts/pred/call_api.py)"

# scripts/data/synthetic/constants.py tokens_to_generate, by our task (scripts/synthetic.yaml's task)
TOKENS_TO_GENERATE = {
    **{t: 128 for t in ("niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2")},
    **{t: 128 for t in ("niah_multikey_3", "niah_multivalue", "niah_multiquery")},
    "vt": 30,
    "cwe": 120,
    "fwe": 50,
    "qa_1": 32,
    "qa_2": 32,
}
_PART = {"qa_1", "qa_2"}  # scored by string_match_part


def postprocess(prediction: str) -> str:
    """evaluate.py postprocess_pred."""
    return re.sub(r"[\x00-\x1f]", "\n", prediction.strip()).strip()


def score(task: str, prediction: str, references: list[str]) -> float:
    """One sample's score as a fraction, by RULER's metric for the task."""
    found = [1.0 if r.lower() in prediction.lower() else 0.0 for r in references]
    return max(found) if task in _PART else sum(found) / len(found)


def _sample(path: Path, n: int, row: dict, task: str) -> tuple[Sample, str]:
    pred, refs = row.get("pred"), row.get("outputs")
    if not isinstance(pred, str):
        raise UserError(f'{path} line {n} has no "pred" text: pass {_WHAT}')
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
        raise UserError(f'{path} line {n} has no "outputs" (a list of reference strings): pass {_WHAT}')
    answer = postprocess(pred)
    length, budget = row.get("length"), TOKENS_TO_GENERATE.get(task)
    prompt = (
        length - budget
        if isinstance(length, int) and not isinstance(length, bool) and budget is not None and length > budget
        else None
    )
    document = str(row.get("input", "")) + "\x00" + "\x00".join(refs)
    return Sample(n - 1, score(task, answer, refs), answer, prompt), document


def attach(folder: Path, cell: Cell) -> tuple[Cell, dict | None]:
    """The cell with the samples of `<folder>/<task>.jsonl` when RULER wrote it (their mean checked
    against the summary's score), and that file's {"file", "sha256"}; the cell as it was otherwise."""
    path = folder / f"{cell.task}.jsonl"
    if not path.is_file():
        return cell, None
    rows, digest = read_jsonl(path, _WHAT)
    if not rows:
        raise UserError(f"{path} holds no prediction: pass {_WHAT}")
    pairs = [_sample(path, n, row, cell.task) for n, row in enumerate(rows, 1)]
    samples = tuple(s for s, _ in pairs)
    mean = 100 * math.fsum(s.score for s in samples) / len(samples)
    if abs(round(mean, 2) - cell.score) > 0.011:  # the summary rounds to 2 places
        raise UserError(
            f"{path}: its predictions score {mean:.2f} by RULER's metric, {cell.file} says {cell.score:.2f}: "
            "pass the summary.csv made from these predictions (scripts/eval/evaluate.py)"
        )
    if cell.num_samples is not None and cell.num_samples != len(samples):
        raise UserError(
            f"{path} holds {len(samples)} predictions, {cell.file} counts {cell.num_samples}: "
            "pass the summary.csv made from these predictions"
        )
    prompts = [s.prompt_tokens for s in samples if s.prompt_tokens is not None]
    return (
        replace(
            cell,
            # the cell's value is the samples' mean, as for any cell of ours (the summary rounds it)
            score=mean,
            num_samples=len(samples),
            samples=samples,
            sample_key=sample_key("RULER", cell.task, None, [d for _, d in pairs]),
            prompt_tokens=math.fsum(prompts) / len(prompts) if len(prompts) == len(samples) else None,
            max_new_tokens=TOKENS_TO_GENERATE.get(cell.task),
        ),
        {"file": str(path), "sha256": digest},
    )
