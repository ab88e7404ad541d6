"""lm-eval's per-sample files (`lm_eval --log_samples`): each document's score, answer and length.

lm_eval/loggers/evaluation_tracker.py save_results_samples writes, beside `results_<date>.json`,
one `samples_<task>_<date>.jsonl` per task; each line is one document under one filter
(lm_eval/evaluator.py evaluate):

    {"doc_id": 3, "doc": {...}, "target": "...", "arguments": {"gen_args_0": {"arg_0": PROMPT, "arg_1": {...}}},
     "resps": [[...]], "filtered_resps": [ANSWER], "filter": "none", "metrics": ["4096", ...],
     "doc_hash": sha256, "prompt_hash": ..., "target_hash": ..., METRIC: value, ...}

The score of a line is its metric's value: a RULER task's metric is the document's length
(common_utils.process_results puts the score under str(doc["max_length"]) and -1 under the
other lengths), LongBench's is "score", LongBench v2's and BABILong's "acc". A RULER document
also carries "length": the tokens of its input, counted with the model's tokenizer, plus the
task's answer budget (prepare_niah.generate_samples and the other *_utils.py), so its prompt is
`length - budget` tokens in lm-eval's own count (the answer prefix, `gen_prefix`, and any chat
template are not in it).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

from harness.core.errors import UserError
from harness.imports.cells import Cell, Sample, fraction, read_jsonl, sample_key

_WHAT = "an lm-eval samples_<task>_<date>.jsonl (written by `lm_eval --log_samples`)"

# The answer budget each RULER task of lm-eval adds to a document's "length" (tokens_to_generate in
# prepare_niah.generate_samples, vt_utils, cwe_utils, fwe_utils, qa_utils).
RULER_BUDGET = {"ruler_vt": 30, "ruler_cwe": 120, "ruler_fwe": 50, "ruler_qa_squad": 32, "ruler_qa_hotpot": 32}
NIAH_BUDGET = 128


def budget(task: str) -> int | None:
    """The answer budget lm-eval counts into a RULER document's length (None for other tasks)."""
    if task.startswith("niah_"):
        return NIAH_BUDGET
    return RULER_BUDGET.get(task)


def samples_file(results: Path, task: str, given: list[Path]) -> Path | None:
    """The samples file of `task` for this results file: one passed on the command line, else the one
    lm-eval wrote beside it with the same date (`results_<date>.json` -> `samples_<task>_<date>.jsonl`)."""
    for p in given:  # samples_<task>_<date>.jsonl: the date (isoformat, ":" as "-") starts with its year
        if re.fullmatch(rf"samples_{re.escape(task)}_\d{{4}}-.*\.jsonl", p.name):
            return p
    m = re.fullmatch(r"results_(.+)\.json", results.name)
    if m:
        beside = results.parent / f"samples_{task}_{m.group(1)}.jsonl"
        if beside.is_file():
            return beside
    return None


def _line_score(path: Path, n: int, row: dict, metric: str) -> float | None:
    value = row.get(metric)
    if value == -1:  # RULER: "no sample at this length"
        return None
    return fraction(value, path, f"line {n}'s {metric!r}")


def _line(path: Path, n: int, row: dict, task: str, family: str, length: int | None) -> tuple[int, Sample, str] | None:
    """(length, sample, document id) of one line; None for a line without a score."""
    doc: dict = row["doc"] if isinstance(row.get("doc"), dict) else {}
    doc_id = row.get("doc_id")
    if not isinstance(doc_id, int) or isinstance(doc_id, bool) or doc_id < 0:
        raise UserError(f'{path} line {n} has no "doc_id" (a count): pass {_WHAT}')
    prompt = None
    if family == "ruler":
        L = doc.get("max_length")
        if not isinstance(L, int) or isinstance(L, bool) or L <= 0:
            raise UserError(f'{path} line {n}: its doc has no "max_length" (a RULER length): pass {_WHAT}')
        score = _line_score(path, n, row, str(L))
        got, cost = doc.get("length"), budget(task)
        if isinstance(got, int) and not isinstance(got, bool) and cost is not None and got > cost:
            prompt = got - cost
    else:
        L = 0 if length is None else length
        score = _line_score(path, n, row, "score" if family == "longbench" else "acc")
    if score is None:
        return None
    resps = row.get("filtered_resps")
    answer = resps[0] if isinstance(resps, list) and resps and isinstance(resps[0], str) else None
    doc_hash = row.get("doc_hash") if isinstance(row.get("doc_hash"), str) else ""
    return L, Sample(doc_id, score, answer, prompt), f"{doc_id}:{doc_hash}"


def read_samples(path: Path, task: str, family: str, length: int | None) -> tuple[dict[int, list], str]:
    """{length: [(sample, document id)]} of one task's samples file (the lines of its first filter,
    "none" when present), and the file's sha256."""
    rows, digest = read_jsonl(path, _WHAT)
    filters = [r.get("filter") for r in rows]
    keep = "none" if "none" in filters else (filters[0] if filters else None)
    by_length: dict[int, list] = {}
    seen: set[tuple[int, int]] = set()
    for n, row in enumerate(rows, 1):
        if row.get("filter") != keep:
            continue
        got = _line(path, n, row, task, family, length)
        if got is None:
            continue
        L, sample, doc = got
        if (L, sample.index) in seen:
            raise UserError(f"{path} line {n}: document {sample.index} at length {L} twice: pass {_WHAT}")
        seen.add((L, sample.index))
        by_length.setdefault(L, []).append((sample, doc))
    if not by_length:
        raise UserError(f"{path} holds no scored line of {task}: pass {_WHAT}")
    return by_length, digest


def attach(path: Path, task: str, family: str, cells: list[Cell], version: object) -> tuple[list[Cell], dict]:
    """The task's cells with their samples from the samples file at `path` (each cell's mean checked
    against the results file's value), and the file's {"file", "sha256"}."""
    lengths = {c.length for c in cells}
    by_length, digest = read_samples(path, task, family, next(iter(lengths)) if family not in ("ruler",) else None)
    extra = sorted(set(by_length) - lengths)
    if extra:
        raise UserError(
            f"{path} holds {task} samples at length {extra[0]}, which the results file does not score: "
            "pass the samples files of the same run (lm-eval writes both with one date)"
        )
    out = []
    for c in cells:
        pairs = sorted(by_length.get(c.length, []), key=lambda p: p[0].index)
        if not pairs:
            raise UserError(
                f"{path} holds no {task} sample at length {c.length}: pass the samples file of the same run"
            )
        mean = 100 * math.fsum(s.score for s, _ in pairs) / len(pairs)
        if abs(mean - c.score) > 1e-6 * max(1.0, abs(c.score)):
            raise UserError(
                f"{path}: its {task} samples average {mean:.4f} at length {c.length}, the results file says "
                f"{c.score:.4f}: pass the samples file of the same run (lm-eval writes both with one date)"
            )
        samples = tuple(s for s, _ in pairs)
        prompts = [s.prompt_tokens for s in samples if s.prompt_tokens is not None]
        out.append(
            replace(
                c,
                num_samples=len(samples),
                samples=samples,
                sample_key=sample_key("lm-eval", task, version, [d for _, d in pairs]),
                prompt_tokens=math.fsum(prompts) / len(prompts) if len(prompts) == len(samples) else None,
            )
        )
    return out, {"file": str(path), "sha256": digest}
