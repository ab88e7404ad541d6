"""HELMET's per-sample outputs: each sample's metric values, answer and lengths, from the output
json eval.py writes beside its `.json.score`.

eval.py run_test keeps, per sample, `{**test_item, **output}` with the model's "output", its
"parsed_output", the metrics of data.py's post_process (HELMET's fractions: exact_match,
substring_exact_match, ruler_recall, rougeL_f1, NDCG@10, ...; `averaged_metrics` is their mean x100),
"input_len" (the prompt's tokens, the model's tokenizer, after HELMET cut its context to fit) and
"output_len" (tokens generated; generation_max_length of them means the answer ran to its budget).
The GPT-4-judged metrics live in `-gpt4eval_o.json` and are imported as aggregates only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from harness.core.errors import UserError
from harness.imports.cells import Cell, Sample, fraction, sample_key

_WHAT = 'a HELMET output json (eval.py\'s, with its per-sample "data")'
# what eval.py adds to a test item: the answer, its parse, the lengths and the metrics; the rest is the document
_OUTPUT_KEYS = {"output", "parsed_output", "input_len", "output_len", "input_text", "thoughts"}


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _value(path: Path, n: int, item: dict, metric: str) -> float:
    v = item.get(metric)
    if isinstance(v, bool):  # drqa's exact match is a bool in HELMET's json
        return float(v)
    return fraction(v, path, f'data[{n}]["{metric}"]')


def _document(item: dict, metrics: set[str]) -> str:
    import json

    doc = {k: v for k, v in item.items() if k not in _OUTPUT_KEYS and k not in metrics}
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str)


def attach(path: Path, data: dict, cells: list[tuple[str, Cell]], budget: int | None) -> list[Cell]:
    """The cells (each with its HELMET metric) with their samples from the output json's "data", each
    mean checked against its averaged_metrics; a cell whose metric the samples lack (a judged one)
    as it was."""
    items = data.get("data")
    if not isinstance(items, list) or not items:
        return [c for _, c in cells]
    if not all(isinstance(x, dict) for x in items):
        raise UserError(f'{path}: "data" is not a list of objects: pass {_WHAT}')
    metrics = {k for x in items for k, v in x.items() if isinstance(v, (int, float)) and k not in _OUTPUT_KEYS}
    out = []
    for metric, c in cells:
        if not all(metric in x for x in items):
            out.append(c)  # a judged metric: not in the per-sample data
            continue
        samples = tuple(
            Sample(
                n,
                _value(path, n, x, metric),
                x.get("output") if isinstance(x.get("output"), str) else None,
                _count(x.get("input_len")),
                _count(x.get("output_len")),
            )
            for n, x in enumerate(items)
        )
        mean = 100 * math.fsum(s.score for s in samples) / len(samples)
        if abs(mean - c.score) > 1e-6 * max(1.0, c.score):
            raise UserError(
                f'{path}: its samples\' "{metric}" average {mean:.4f}, its averaged_metrics say {c.score:.4f}: '
                f"pass the output json as eval.py wrote it"
            )
        prompts = [s.prompt_tokens for s in samples if s.prompt_tokens is not None]
        out.append(
            replace(
                c,
                num_samples=len(samples),
                samples=samples,
                sample_key=sample_key("HELMET", c.task, None, [_document(x, metrics) for x in items]),
                prompt_tokens=math.fsum(prompts) / len(prompts) if len(prompts) == len(samples) else c.prompt_tokens,
                max_new_tokens=budget,
            )
        )
    return out
