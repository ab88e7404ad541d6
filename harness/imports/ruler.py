"""NVIDIA RULER's summary CSV (NVIDIA/RULER scripts/eval/evaluate.py `write_evaluation`).

evaluate.py writes, per length, `<root>/<model>/<benchmark>/<L>/pred/summary.csv` (several tasks)
or `summary-<task>.csv` (one task): a pandas frame of three rows written with `index=False`, so the
first line is the frame's column numbers:

    0,1,2
    Tasks,niah_single_1,vt
    Score,99.8,91.2
    Nulls,0/500,1/500

Scores are already x100 (string_match_all/part, rounded to 2 places); "Nulls" is empty predictions
over samples. The length is the folder above `pred` (scripts/run.sh), or `--length`. The prediction
files beside it (`<task>.jsonl`) give each sample's score and length (harness.imports.ruler_preds).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from harness.core.errors import UserError
from harness.imports.cells import Cell, Source, number, percent
from harness.imports.ruler_preds import attach

_WHAT = "a RULER summary.csv / summary-<task>.csv (written by scripts/eval/evaluate.py)"

PROTOCOL = {
    "ruler": {
        "summary": "RULER's reference: the haystack filled to L in the model's tokens, with its template",
        "length rule": "max_seq_length L less the model template's tokens: a binary search finds the largest "
        "haystack (sentences, essay words, noise lines) whose input with its answer prefix plus the task's "
        "tokens_to_generate (niah 128, vt 30, cwe 120, fwe 50, qa 32) fits, counted with the model's tokenizer "
        "(scripts/data/synthetic/*.py generate_samples)",
        "scoring": "string_match_all on the stripped answer; qa string_match_part: 1 when any reference is found "
        "(scripts/eval/synthetic/constants.py)",
        "template": "the model's template type from scripts/config_models.sh (MODEL_TEMPLATE_TYPE)",
        "truncation": "none: inputs are built to fit L",
    }
}


def _length_from_path(path: Path) -> int | None:
    """<model>/<benchmark>/<L>/pred/summary.csv -> L (the nearest all-digits folder above the file)."""
    for part in reversed(path.resolve().parent.parts[-3:]):
        if part.isdigit() and int(part) > 0:
            return int(part)
    return None


def _model_from_path(path: Path) -> str | None:
    parts = path.resolve().parent.parts
    for i in range(len(parts) - 1, 1, -1):
        if parts[i].isdigit() and i >= 2:
            return parts[i - 2]  # <model>/<benchmark>/<L>
    return None


def read(path: Path, text: str, length: int | None = None) -> tuple[list[Cell], Source]:
    from tasks.ruler import RULER_TASKS

    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if r]
    except csv.Error as exc:
        raise UserError(f"{path} is not CSV ({exc}): pass {_WHAT}") from None
    by_head = {r[0].strip(): r[1:] for r in rows}
    if "Tasks" not in by_head or "Score" not in by_head:
        raise UserError(f'{path} has no "Tasks" and "Score" rows: pass {_WHAT}')
    tasks, scores, nulls = by_head["Tasks"], by_head["Score"], by_head.get("Nulls")
    if not tasks or len(scores) != len(tasks) or (nulls is not None and len(nulls) != len(tasks)):
        raise UserError(f'{path}: its "Tasks" and "Score" rows differ in length: pass {_WHAT}')
    source = Source(harness="RULER", model=_model_from_path(path), protocol=PROTOCOL)
    found = []
    for i, task in enumerate(t.strip() for t in tasks):
        try:
            raw = float(scores[i])
        except ValueError:
            raise UserError(f"{path}: the score of {task} is {scores[i][:20]!r}, not a number: pass {_WHAT}") from None
        v = percent(number(raw, path, f"the score of {task}"), path, f"the score of {task}")
        count = None
        if nulls is not None:
            _, slash, total = nulls[i].partition("/")
            if not slash or not total.strip().isdigit():
                raise UserError(f"{path}: the nulls of {task} are {nulls[i][:20]!r}, not N/M: pass {_WHAT}")
            count = int(total)
            if count == 0:  # evaluate.py divides by the samples: a score of none is no score
                raise UserError(
                    f"{path}: the nulls of {task} are {nulls[i].strip()!r}: a score of no samples; pass {_WHAT}"
                )
        if task not in RULER_TASKS:
            source.skipped.append(task)
            continue
        found.append((task, v, count or None))
    L = length if length is not None else _length_from_path(path)
    if L is None:
        raise UserError(
            f"{path}: no length in its path (RULER writes <model>/<benchmark>/<L>/pred/summary.csv): pass --length L"
        )
    cells = []
    for task, v, count in found:  # each task's predictions beside the summary give its samples
        cell, entry = attach(path.parent, Cell("ruler", task, L, v, count, str(path)))
        cells.append(cell)
        if entry is not None:
            source.files.append(entry)
    return cells, source
