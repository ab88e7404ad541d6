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

import math
import re
from pathlib import Path

from harness.core.errors import UserError
from harness.imports.cells import Cell, Source, loads_json, number, percent
from harness.imports.lm_eval_samples import attach, samples_file

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
            "summary": f"lm-eval's RULER port: the haystack grown in coarse steps below L, answer prefix outside "
            f"the budget, {short_t}, left truncation",
            "length rule": "L from metadata max_seq_lengths, in the tokenizer of model_args (tokenizer or "
            "pretrained); the haystack grows in steps (essays 500 words; repeated or needle lines 25, 5 below 4K; "
            "vt 10 noise lines; cwe 10 words; qa 10 documents; fwe L/32 words) while tokens(input + answers) + "
            "the answer budget (niah 128, vt 30, cwe 120, fwe 50, qa 32) stay below L, then one step back: a "
            "prompt fills L minus the budget minus up to one step, and the answer prefix (gen_prefix) and any "
            "chat template are not counted (lm_eval/tasks/ruler prepare_niah.generate_samples, *_utils.py)",
            "scoring": "string_match_all on the stripped answer; qa's string_match_part is the share of the "
            "references found, not NVIDIA RULER's any-reference match (common_utils.py); vt's answer prefix "
            "keeps an older RULER's 'assgined' (vt_utils.py)",
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


def read(
    path: Path, text: str, length: int | None = None, given: list[Path] | None = None
) -> tuple[list[Cell], Source]:
    """The file's cells, each with its samples where lm-eval logged them (`given` samples files, else
    the ones beside the results file with its date), and the run's source."""
    data = loads_json(text, path, _WHAT)
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise UserError(f'{path} has no "results" object: pass {_WHAT}')
    source = _source(data)
    by_task = _cells(path, data, length, source)
    versions: dict = _obj(data, "versions")
    cells: list[Cell] = []
    for task, (family, got) in by_task.items():
        found = samples_file(path, task, given or [])
        if found is not None:
            got, entry = attach(found, task, family, got, versions.get(task))
            source.files.append(entry)
        cells += got
    return cells, source


def _cells(path: Path, data: dict, length: int | None, source: Source) -> dict[str, tuple[str, list[Cell]]]:
    """{lm-eval task: (family, its cells)} of the tasks read here; the others go to source.skipped."""
    configs: dict = _obj(data, "configs")
    n_samples: dict = _obj(data, "n-samples")
    # a group's entry averages its tasks; "group_subtasks" also lists each lone task, with no subtasks
    subtasks: dict = _obj(data, "group_subtasks")
    groups = set(data.get("groups") or {}) | {g for g, members in subtasks.items() if members}
    longbench = _longbench_suites()
    out: dict[str, tuple[str, list[Cell]]] = {}
    for task, entry in data["results"].items():
        if task in groups or not isinstance(entry, dict) or not isinstance(task, str):
            continue
        effective = (n_samples.get(task) or {}).get("effective") if isinstance(n_samples.get(task), dict) else None
        count = int(effective) if isinstance(effective, int) and not isinstance(effective, bool) else None
        if task.startswith("niah_") or task in _RULER:
            out[task] = ("ruler", _ruler_cells(path, task, entry, count))
        elif task.startswith("longbench2_"):
            out[task] = (
                "longbench2",
                [_mean_cell(path, task, entry, "acc", "LongBench v2", "longbench2", task, 0, count)],
            )
        elif task.startswith("longbench_") and task.removeprefix("longbench_") in longbench:
            name = task.removeprefix("longbench_")
            cell = _mean_cell(path, task, entry, "score", "LongBench", longbench[name], name, 0, count)
            out[task] = ("longbench", [cell])
        elif re.fullmatch(r"babilong_qa\d+", task):
            L = length if length is not None else _babilong_length(path, task, configs)
            out[task] = ("babilong", [_mean_cell(path, task, entry, "acc", "BABILong", "babilong", task, L, count)])
        else:
            source.skipped.append(task)
    return out


def _mean_cell(
    path: Path, task: str, entry: dict, metric: str, family: str, suite: str, ours: str, L: int, count: int | None
) -> Cell:
    """A mean-aggregated task's cell, with lm-eval's standard error of the mean (x100) where it wrote one."""
    got = _required(path, task, entry, metric, family)
    se = _stderr(entry.get(f"{metric}_stderr,{got[0].partition(',')[2]}"))
    return Cell(suite, ours, L, _percent(path, task, got, metric), count, str(path), stderr=se)


def _stderr(value) -> float | None:
    """lm-eval's standard error of a mean, x100; None for its "N/A" (one sample, bootstrap_iters 0, or
    an aggregation without one)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return 100 * float(value)
    return None


def _source(data: dict) -> Source:
    """Which lm-eval wrote the file, for which model, how it builds each suite's inputs, and the
    settings its config states (the row's provenance)."""
    config: dict = _obj(data, "config")
    margs = _model_args(config)
    model = margs.get("pretrained") or margs.get("model") or data.get("model_name") or config.get("model")
    version = data.get("lm_eval_version")
    max_length = margs.get("max_length") or _str(data.get("max_length"))
    return Source(
        harness="lm-eval",
        version=str(version) if version else None,
        git_hash=str(data["git_hash"]) if data.get("git_hash") else None,
        model=str(model) if model else None,
        protocol=_protocols(data, str(config.get("model") or ""), max_length),
        settings=_settings(data, config, margs, max_length),
    )


def _settings(data: dict, config: dict, margs: dict[str, str], max_length: str | None) -> dict[str, object]:
    """What lm-eval's file says moves scores: backend (`--model`), dtype (model_args, else the loaded
    model's), the model arguments as given, batch size, max length, chat template, seed, date, versions."""
    from datetime import datetime, timezone

    dtype = margs.get("dtype") or _str(config.get("model_dtype"))
    date = data.get("date")
    created = (
        datetime.fromtimestamp(float(date), timezone.utc).isoformat(timespec="seconds")
        if isinstance(date, (int, float)) and not isinstance(date, bool) and 0 < date < 1e11
        else None
    )
    args = config.get("model_args")
    template = data.get("chat_template")
    return {
        "backend": _str(config.get("model")),
        "dtype": dtype.removeprefix("torch.") if dtype else None,
        "model_args": args if isinstance(args, str) else ",".join(f"{k}={v}" for k, v in margs.items()) or None,
        "batch_size": _str(config.get("batch_size")),
        "max_model_len": max_length,
        "template": "chat template"
        + (f" (sha {str(data.get('chat_template_sha'))[:12]})" if data.get("chat_template_sha") else "")
        if template
        else "none",
        "seed": config.get("random_seed") if isinstance(config.get("random_seed"), int) else None,
        "created": created,
        "lm_eval_version": _str(data.get("lm_eval_version")),
        "transformers_version": _str(data.get("transformers_version")),
    }


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
        # "N/A" at the yaml's lengths (aggregate_metrics has no stderr); mean_stderr at others
        se = _stderr(entry.get(f"{m.group(1)}_stderr,{m.group(2)}"))
        found.append((int(m.group(1)), percent(100 * v, path, f'results["{task}"]["{key}"] x100'), se))
    if not found:
        raise UserError(f'{path}: RULER task {task} has no "<length>,<filter>" score: the file is not lm-eval\'s shape')
    per = count // len(found) if count is not None and count % len(found) == 0 else None
    return [Cell("ruler", ours, L, v, per, str(path), stderr=se) for L, v, se in found]


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
