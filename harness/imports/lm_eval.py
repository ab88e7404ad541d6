"""lm-eval's `results_<date>.json` (EleutherAI/lm-evaluation-harness, lm_eval/evaluator.py and
lm_eval/loggers/evaluation_tracker.py, 0.4.x):

    {"results": {TASK: {"alias": ..., "METRIC,FILTER": value, "METRIC_stderr,FILTER": ...}, GROUP: {...}},
     "groups": {...}, "group_subtasks": {GROUP: [TASK, ...]}, "configs": {TASK: {..., "metadata": {...}}},
     "versions": {...}, "n-shot": {...}, "higher_is_better": {...}, "n-samples": {TASK: {"original", "effective"}},
     "config": {"model": "hf", "model_args": "pretrained=...,max_length=...", ...},
     "git_hash": ..., "date": ..., "lm_eval_version": ..., "model_name": ..., "chat_template": ..., ...}

Read here (scores are fractions; x100):
- RULER (lm_eval/tasks/ruler): niah_* and ruler_vt/cwe/fwe/qa_squad/qa_hotpot; one metric per length,
  "4096,none", a length not evaluated holds -1 (common_utils.aggregate_metrics);
- LongBench (lm_eval/tasks/longbench): longbench_<task>[_e], metric "score";
- LongBench v2 (lm_eval/tasks/longbench2): longbench2_<domain>, metric "acc" (multiple choice by loglikelihood);
- BABILong (lm_eval/tasks/babilong): babilong_qaN, metric "acc", at the length configs[task].metadata
  .max_seq_lengths names ("0k" by default, "4k" = 4096).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.core.errors import UserError
from harness.imports.cells import Cell, Source, loads_json, number, percent

_RULER = {
    "ruler_vt": "vt",
    "ruler_cwe": "cwe",
    "ruler_fwe": "fwe",
    "ruler_qa_squad": "qa_1",
    "ruler_qa_hotpot": "qa_2",
}
_WHAT = "an lm-eval results_*.json (written by `lm_eval --output_path`)"


def _model_args(config: dict) -> dict[str, str]:
    args = config.get("model_args")
    if isinstance(args, dict):
        return {str(k): str(v) for k, v in args.items()}
    out = {}
    for part in str(args or "").split(","):
        key, eq, value = part.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def _length_label(text: str, path: Path, task: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kK]?)\s*", text)
    if not m:
        raise UserError(
            f"{path}: {task}'s max_seq_lengths {text!r} is no length such as 4k: the file is not lm-eval's shape"
        )
    return int(m.group(1)) * (1024 if m.group(2) else 1)


def _metric(entry: dict, name: str) -> tuple[str, object] | None:
    """The value of metric `name` under filter "none" (else the first filter)."""
    keys = [k for k in entry if isinstance(k, str) and k.partition(",")[0] == name]
    keys.sort(key=lambda k: k.partition(",")[2] != "none")
    return (keys[0], entry[keys[0]]) if keys else None


def _protocols(data: dict, backend: str, max_length: str | None) -> dict[str, dict[str, str]]:
    chat = bool(data.get("chat_template"))
    template = (
        "the model's chat template (lm-eval --apply_chat_template)"
        if chat
        else "none: lm-eval's plain doc_to_text prompt, no chat template"
    )
    cap = f"max_length {max_length}" if max_length else "the model's max_length (lm-eval's default 2048 when unset)"
    if backend in ("hf", "vllm", "hf-auto", "huggingface"):
        left = f"left: the backend keeps the last ({cap} - max_gen_toks) tokens of a longer prompt"
    else:
        left = f"as lm-eval's {backend or 'unknown'} backend does (hf and vllm keep the last tokens)"
    short_t = "chat template" if chat else "no chat template"
    return {
        "ruler": {
            "summary": f"RULER's haystack fitted to L in the model's tokens, {short_t}, left truncation",
            "length rule": "L from metadata max_seq_lengths; the haystack sized so template + input + answer "
            "fit L in the model's tokenizer (RULER's rule as lm-eval ports it)",
            "template": template,
            "truncation": left,
        },
        "longbench": {
            "summary": f"LongBench documents at their own length, {short_t}, left truncation",
            "length rule": "none: each document at its own length (LongBench's reference middle-truncates to its max_length)",
            "template": template,
            "truncation": left,
        },
        "longbench2": {
            "summary": f"LongBench v2 by loglikelihood of A-D, {short_t}, left truncation",
            "length rule": "none: each document at its own length; scored as multiple choice by loglikelihood",
            "template": template,
            "truncation": left,
        },
        "babilong": {
            "summary": f"BABILong's released length splits, {short_t}, left truncation",
            "length rule": "the released RMT-team/babilong-1k-samples split named by max_seq_lengths (e.g. 4k)",
            "template": template,
            "truncation": left,
        },
    }


def read(path: Path, text: str, length: int | None = None) -> tuple[list[Cell], Source]:
    data = loads_json(text, path, _WHAT)
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise UserError(f'{path} has no "results" object: pass {_WHAT}')
    configs: dict = _obj(data, "configs")
    n_samples: dict = _obj(data, "n-samples")
    # a group's entry averages its tasks; "group_subtasks" also lists each lone task, with no subtasks
    subtasks: dict = _obj(data, "group_subtasks")
    groups = set(data.get("groups") or {}) | {g for g, members in subtasks.items() if members}
    source = _source(data)
    longbench = _longbench_suites()
    cells: list[Cell] = []
    for task, entry in data["results"].items():
        if task in groups or not isinstance(entry, dict):
            continue
        if not isinstance(task, str):
            continue
        effective = (n_samples.get(task) or {}).get("effective") if isinstance(n_samples.get(task), dict) else None
        count = int(effective) if isinstance(effective, int) and not isinstance(effective, bool) else None
        if task.startswith("niah_") or task in _RULER:
            cells += _ruler_cells(path, task, entry, count)
        elif task.startswith("longbench2_"):
            v = _percent(path, task, _required(path, task, entry, "acc", "LongBench v2"), "acc")
            cells.append(Cell("longbench2", task, 0, v, count, str(path)))
        elif task.startswith("longbench_"):
            name = task.removeprefix("longbench_")
            suite = longbench.get(name)
            if suite is None:
                source.skipped.append(task)
                continue
            v = _percent(path, task, _required(path, task, entry, "score", "LongBench"), "score")
            cells.append(Cell(suite, name, 0, v, count, str(path)))
        elif re.fullmatch(r"babilong_qa\d+", task):
            got = _required(path, task, entry, "acc", "BABILong")
            L = length if length is not None else _babilong_length(path, task, configs)
            cells.append(Cell("babilong", task, L, _percent(path, task, got, "acc"), count, str(path)))
        else:
            source.skipped.append(task)
    return cells, source


def _source(data: dict) -> Source:
    """Which lm-eval wrote the file, for which model, and how it builds each suite's inputs."""
    config: dict = _obj(data, "config")
    margs = _model_args(config)
    model = margs.get("pretrained") or margs.get("model") or data.get("model_name") or config.get("model")
    version = data.get("lm_eval_version")
    return Source(
        harness="lm-eval",
        version=str(version) if version else None,
        git_hash=str(data["git_hash"]) if data.get("git_hash") else None,
        model=str(model) if model else None,
        protocol=_protocols(
            data, str(config.get("model") or ""), margs.get("max_length") or _str(data.get("max_length"))
        ),
    )


def _longbench_suites() -> dict[str, str]:
    """Our suite of each LongBench task name lm-eval may hold (longbench_<name>): longbench-e for
    the LongBench-E names, else longbench (or longbench-en)."""
    from tasks.registry import all_suites

    suites = all_suites()
    out = {n: "longbench" for n in set(suites.get("longbench") or []) | set(suites.get("longbench-en") or [])}
    out.update({n: "longbench-e" for n in suites.get("longbench-e") or []})
    return out


def _ruler_cells(path: Path, task: str, entry: dict, count: int | None) -> list[Cell]:
    """A RULER task's cells: one per "<length>,<filter>" score that is not -1; the samples split
    evenly over the lengths when n-samples divides by them."""
    ours = _RULER.get(task, task)
    found = []
    for key, value in entry.items():
        m = re.fullmatch(r"(\d+),(.*)", str(key))
        if not m:
            continue
        v = number(value, path, f'results["{task}"]["{key}"]')
        if v == -1:
            continue  # lm-eval's "no sample at this length"
        found.append((int(m.group(1)), percent(100 * v, path, f'results["{task}"]["{key}"] x100')))
    if not found:
        raise UserError(f'{path}: RULER task {task} has no "<length>,<filter>" score: the file is not lm-eval\'s shape')
    per = count // len(found) if count is not None and count % len(found) == 0 else None
    return [Cell("ruler", ours, L, v, per, str(path)) for L, v in found]


def _required(path: Path, task: str, entry: dict, metric: str, family: str) -> tuple[str, object]:
    """(key, value) of the task's `metric`; a UserError naming the family when it is absent."""
    got = _metric(entry, metric)
    if got is None:
        raise UserError(
            f'{path}: {family} task {task} has no "{metric},<filter>" {"value" if metric == "score" else "score"}: '
            "the file is not lm-eval's shape"
        )
    return got


def _percent(path: Path, task: str, got: tuple[str, object], metric: str) -> float:
    """A metric's value (a fraction) x100, as a percentage."""
    return percent(100 * number(got[1], path, f'results["{task}"]["{got[0]}"]'), path, f"{task} {metric} x100")


def _babilong_length(path: Path, task: str, configs: dict) -> int:
    """The length of a BABILong task: its config's metadata.max_seq_lengths ("0k" when unset)."""
    meta = (configs.get(task) or {}).get("metadata") if isinstance(configs.get(task), dict) else None
    label = (meta or {}).get("max_seq_lengths", "0k") if isinstance(meta, dict) else "0k"
    if isinstance(label, list) and len(label) == 1:
        label = label[0]
    return _length_label(str(label), path, task)


def _str(value) -> str | None:
    return None if value is None else str(value)


def _obj(data: dict, key: str) -> dict:
    """data[key] when it is an object, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}
