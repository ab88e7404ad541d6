"""Results made by other harnesses, as rows of this project's results.json (docs/imports.md).

    from harness.imports import import_files
    results = import_files(["lm-eval/results_2025-01-01T00-00-00.json"], name="llama-lm-eval")

Three formats are read, each from its own module:
- lm-eval (EleutherAI/lm-evaluation-harness) `results_*.json`: its `ruler`, `longbench`,
  `longbench2` and `babilong` tasks (harness.imports.lm_eval);
- NVIDIA RULER's `summary.csv` / `summary-<task>.csv` of scripts/eval/evaluate.py
  (harness.imports.ruler);
- HELMET's per-dataset output `*.json` and `*.json.score` of eval.py (harness.imports.helmet).

Each reader turns its files into `Cell`s (suite, task, length, score x100) and a `Source` (which
harness, its version, the model, how that harness builds its inputs). `build_results` makes one
results.json of them: one "checkpoint" (the imported run: n = 1, std 0, no interval, no per-sample
blocks, so the leaderboard never pairs it), marked `provenance.source`:

    {"harness": "lm-eval", "version": "0.4.8", "git_hash": ..., "model": ..., "files": [{"file", "sha256"}],
     "protocol": {SUITE: {"summary", "length rule", "template", "truncation"}}}

A file of the wrong shape is a UserError naming it (one line, exit 2) and nothing is written.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from pathlib import Path

from harness.core.errors import UserError
from harness.core.imported import note
from harness.imports.cells import Cell, Source, loads_json, read_text

FORMATS = ("lm-eval", "ruler", "helmet")


# ----------------------------------------------------------------------------------------------
# Reading


def detect(path: Path, text: str) -> str:
    """Which harness wrote the file: by its name, then by its content."""
    name = path.name
    if name.endswith(".csv"):
        return "ruler"
    if name.endswith((".json.score", "-gpt4eval_o.json")):
        return "helmet"
    head = text.lstrip()[:1]
    if head == "{":
        data = loads_json(text, path, "an lm-eval results_*.json or a HELMET output file")
        if isinstance(data, dict) and isinstance(data.get("results"), dict):
            return "lm-eval"
        if isinstance(data, dict) and isinstance(data.get("averaged_metrics"), dict):
            return "helmet"
    raise UserError(
        f"{path} is neither an lm-eval results_*.json, a RULER summary*.csv nor a HELMET output file: "
        "pass one of those (or name the format with --from)"
    )


def read_files(paths: list[str | Path], fmt: str | None = None, length: int | None = None) -> tuple[list[Cell], Source]:
    """Every file's cells and their merged source; the files must come from one harness and model.
    lm-eval's samples_<task>_<date>.jsonl given beside its results file attach to that file's tasks
    (those lm-eval wrote in the same folder with the same date are found without being given)."""
    from harness.imports import helmet, lm_eval, ruler

    if not paths:
        raise UserError("no files given: pass lm-eval results_*.json, RULER summary*.csv or HELMET output files")
    given = [Path(p) for p in paths if _is_lm_eval_samples(Path(p))]
    cells: list[Cell] = []
    source: Source | None = None
    seen: dict[tuple, str] = {}
    for arg in paths:
        path = Path(arg)
        if path in given:
            continue
        text, digest = read_text(path)
        kind = fmt or detect(path, text)
        if kind == "lm-eval":
            got, src = lm_eval.read(path, text, length, given)
        else:
            got, src = {"ruler": ruler.read, "helmet": helmet.read}[kind](path, text, length)
        src.files = [{"file": str(path), "sha256": digest}, *src.files]
        if source is None:
            source = src
        else:
            source.merge(src)
        for c in got:
            key = (c.suite, c.task, c.length)
            if key in seen:
                raise UserError(
                    f"{c.task} at length {c.length} is in both {seen[key]} and {path}: pass one of them per run"
                )
            seen[key] = str(path)
        cells += got
    if source is None:
        raise UserError("only lm-eval samples files given: pass their results_<date>.json with them")
    read = {f["file"] for f in source.files}
    unused = [p for p in given if str(p) not in read]
    if unused:
        raise UserError(
            f"{unused[0]} belongs to no task of the results files given: pass it with the results_<date>.json of its run"
        )
    return cells, source


def _is_lm_eval_samples(path: Path) -> bool:
    return path.name.startswith("samples_") and path.name.endswith(".jsonl")


# ----------------------------------------------------------------------------------------------
# Building results.json


Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def _stats(value: float, se: float | None = None, **extra) -> dict:
    """One "checkpoint"'s statistic; with the harness's standard error, its 95% normal interval
    (clipped to 0..100), marked as the other harness's ("ci_from": "stderr")."""
    out = {"mean": value, "std": 0.0, "min": value, "max": value, "n": 1, **extra}
    if se is not None:
        out.update(ci_low=max(0.0, value - Z95 * se), ci_high=min(100.0, value + Z95 * se), stderr=se, ci_from="stderr")
    return out


def _cell_stats(c: Cell) -> dict:
    extra: dict = {"num_samples": c.num_samples} if c.num_samples is not None else {}
    if c.prompt_tokens is not None:
        extra["prompt_tokens"] = round(c.prompt_tokens, 1)
    return _stats(c.score, c.stderr, **extra)


def _suite_tasks(suite: str, tasks: list[str]) -> list[str]:
    """The suite's declared task list when the imported tasks belong to it, else theirs in order."""
    from tasks.registry import all_suites

    declared = list(all_suites().get(suite) or {})
    if declared and set(tasks) <= set(declared):
        return declared
    return sorted(tasks)


def _suite_block(suite: str, cells: list[Cell], protocol: dict | None) -> dict:
    """One suite of the imported run, as aggregation shapes it: per task, per length (the mean over
    the tasks at that length), the summary and the categories, each a single "checkpoint"."""
    by_task: dict[str, dict[int, Cell]] = {}
    for c in cells:
        by_task.setdefault(c.task, {})[c.length] = c
    tasks = _suite_tasks(suite, list(by_task))
    evaluated = [t for t in tasks if t in by_task]
    lengths = sorted({c.length for c in cells})
    per_task = {t: {str(L): _cell_stats(c) for L, c in sorted(by_task[t].items())} for t in evaluated}
    per_length = {}
    for L in lengths:
        got = _average(by_task, evaluated, L)
        if got is not None:
            per_length[str(L)] = _stats(got[0], got[2], tasks_covered=got[1], tasks_total=len(tasks))
    block: dict = {
        "tasks": tasks,
        "evaluated": evaluated,
        "lengths": lengths,
        "per_task": per_task,
        "per_length": per_length,
        "summary": _summary(suite, per_length, lengths, len(evaluated), len(tasks)),
    }
    if lengths == [0]:
        block["length_controlled"] = False
    categories = _categories(suite, tasks, by_task, lengths)
    if categories:
        block["categories"] = categories
    if protocol:
        block["imported_protocol"] = protocol
    return block


def _average(by_task: dict[str, dict[int, Cell]], members: list[str], L: int) -> tuple[float, int, float | None] | None:
    """(mean score, tasks averaged, its standard error when every task has one: the tasks' samples are
    independent) of the members imported at length L; None when none is."""
    got = [by_task[t][L] for t in members if t in by_task and L in by_task[t]]
    if not got:
        return None
    ses = [c.stderr for c in got]
    se = math.sqrt(math.fsum(x * x for x in ses if x is not None)) / len(got) if None not in ses else None
    return statistics.fmean(c.score for c in got), len(got), se


def _summary(suite: str, per_length: dict, lengths: list[int], evaluated: int, total: int) -> dict:
    """Avg over the lengths (RULER's weighted averages too), coverage, and the effective length of a
    length-controlled suite at the default threshold."""
    from harness.core.effective_length import effective_length
    from harness.pipeline.aggregate import DEFAULT_THRESHOLD

    means = [per_length[str(L)]["mean"] for L in lengths]
    ses = [per_length[str(L)].get("stderr") for L in lengths]
    n = len(means)
    summary: dict = {
        "avg": _weighted(means, ses, [1] * n),
        "tasks_covered": evaluated,
        "tasks_total": total,
        "lengths_covered": len(per_length),
        "lengths_total": len(lengths),
    }
    if suite == "ruler" or suite.startswith("ruler-"):
        summary["wavg_inc"] = _weighted(means, ses, list(range(1, n + 1)))
        summary["wavg_dec"] = _weighted(means, ses, list(range(n, 0, -1)))
    if lengths != [0]:
        summary["effective_length"] = effective_length(per_length, lengths, DEFAULT_THRESHOLD)
    else:
        summary["effective_length"] = {"threshold": None, "value": None, "label": "n/a"}
    return summary


def _weighted(means: list[float], ses: list[float | None], weights: list[int]) -> dict:
    """The weighted mean over lengths; its standard error when every length has one (each length's
    samples are its own)."""
    total = sum(weights)
    value = math.fsum(w * m for w, m in zip(weights, means)) / total
    if None in ses:
        return _stats(value)
    return _stats(value, math.sqrt(math.fsum((w * s) ** 2 for w, s in zip(weights, ses) if s is not None)) / total)


def _categories(suite: str, tasks: list[str], by_task: dict[str, dict[int, Cell]], lengths: list[int]) -> dict:
    """{category: {length: average}} of the suite's registered categories, when its tasks are the
    registry's."""
    from tasks.suites import suite_categories

    cats = suite_categories(suite) if set(tasks) <= set(_suite_tasks(suite, [])) else {}
    categories: dict[str, dict] = {}
    for cat, members in (cats or {}).items():
        for L in lengths:
            got = _average(by_task, members, L)
            if got is not None:
                categories.setdefault(cat, {})[str(L)] = _stats(
                    got[0], got[2], tasks_covered=got[1], tasks_total=len(members)
                )
    return categories


def run_name(source: Source) -> str:
    """`<model>-<harness>`: the model's last path part, printable."""
    model = (source.model or "model").rstrip("/").split("/")[-1] or "model"
    name = re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", "", f"{model}-{source.harness.lower()}")
    return name or "imported"


def build_results(cells: list[Cell], source: Source, name: str | None = None) -> dict:
    """The results.json of the imported cells (validated with the one schema): the cells with samples
    aggregated our way (harness.imports.sampled), the others from the harness's aggregates with its
    standard error where it wrote one; the provenance is the other harness's, ours only as the importer."""
    from harness.core.results_schema import SCHEMA_VERSION, validate_results
    from harness.imports.sampled import sampled_block

    if not cells:
        files = ", ".join(f["file"] for f in source.files)
        skipped = f" (found only {', '.join(source.skipped[:6])})" if source.skipped else ""
        raise UserError(f"{files} holds no score this harness imports{skipped}: see docs/imports.md for the tasks read")
    suites: dict[str, list[Cell]] = {}
    for c in cells:
        suites.setdefault(c.suite, []).append(c)
    model = source.model or "unknown model"
    src = _source_block(source, suites)
    run = {
        "name": name or run_name(source),
        "model": model,
        "mode": f"imported ({source.harness})",
        "checkpoints": [
            {
                "path": model,
                "step": None,
                "fingerprint": "imported:"
                + hashlib.sha256("".join(f["sha256"] for f in source.files).encode()).hexdigest()[:16],
            }
        ],
    }
    blocks = {}
    for s, cs in sorted(suites.items()):
        block = _suite_block(s, cs, source.protocol.get(s))
        blocks[s] = sampled_block(s, cs, block, run, _declared_categories(s, block["tasks"]))
    results: dict = {
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "provenance": {**_provenance(source), "source": src, "imported": note(src)},
        "suites": blocks,
    }
    if any(c.samples for c in cells):
        from harness.core import stats

        results["intervals"] = dict(stats.METHOD)
    return validate_results(results, "the imported results")


def _source_block(source: Source, suites: dict[str, list[Cell]]) -> dict:
    """provenance.source: the harness, its version, the model, the files read, each suite's protocol,
    which cells came with per-sample scores, and the tasks left out."""
    cells = [c for cs in suites.values() for c in cs]
    sampled = sum(bool(c.samples) for c in cells)
    src: dict = {
        "harness": source.harness,
        "version": source.version,
        "git_hash": source.git_hash,
        "model": source.model,
        "files": source.files,
        "protocol": {s: source.protocol[s] for s in suites if s in source.protocol},
        "per_sample": "every cell"
        if sampled == len(cells)
        else f"{sampled} of {len(cells)} cells"
        if sampled
        else "none",
    }
    if source.skipped:
        src["not_imported"] = source.skipped
    return src


def _provenance(source: Source) -> dict:
    """The row's provenance: what the other harness's files state (its git hash, backend, dtype, model
    arguments, ...), never our package's; ours is kept as the importer."""
    from datetime import datetime, timezone

    from harness.core.provenance import git_hash, package_version

    settings = {k: v for k, v in source.settings.items() if v is not None}
    return {
        "package_version": None,
        "git_hash": source.git_hash,
        **settings,
        "created": settings.get("created"),
        "imported_by": {
            "package_version": package_version(),
            "git_hash": git_hash(),
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
    }


def _declared_categories(suite: str, tasks: list[str]) -> dict | None:
    """The suite's registered categories when its tasks are the registry's (as _categories uses them)."""
    from tasks.suites import suite_categories

    return (suite_categories(suite) or None) if set(tasks) <= set(_suite_tasks(suite, [])) else None


def import_files(
    paths: list[str | Path], fmt: str | None = None, name: str | None = None, length: int | None = None
) -> dict:
    cells, source = read_files(paths, fmt, length)
    return build_results(cells, source, name)
