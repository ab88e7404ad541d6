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
import re
import statistics
from pathlib import Path

from harness.core.errors import UserError
from harness.core.imported import note
from harness.imports.cells import Cell, Source, loads_json

FORMATS = ("lm-eval", "ruler", "helmet")
MAX_BYTES = 1 << 30  # a HELMET output json holds every prediction; nothing of these formats is larger


# ----------------------------------------------------------------------------------------------
# Reading


def read_text(path: Path) -> tuple[str, str]:
    """(text, sha256) of a regular UTF-8 file; a UserError naming it otherwise."""
    try:
        if not path.is_file():
            raise UserError(
                f"no file at {path}: pass lm-eval results_*.json, RULER summary*.csv or HELMET output files"
            )
        if path.stat().st_size > MAX_BYTES:
            raise UserError(f"{path} is larger than 1 GB: no results file of lm-eval, RULER or HELMET is")
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path} ({exc.strerror or exc}): check the path and its permissions") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text: pass a results file as its harness wrote it") from None
    return text, hashlib.sha256(data).hexdigest()


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
    """Every file's cells and their merged source; the files must come from one harness and model."""
    from harness.imports import helmet, lm_eval, ruler

    readers = {"lm-eval": lm_eval.read, "ruler": ruler.read, "helmet": helmet.read}
    if not paths:
        raise UserError("no files given: pass lm-eval results_*.json, RULER summary*.csv or HELMET output files")
    cells: list[Cell] = []
    source: Source | None = None
    seen: dict[tuple, str] = {}
    for arg in paths:
        path = Path(arg)
        text, digest = read_text(path)
        kind = fmt or detect(path, text)
        got, src = readers[kind](path, text, length)
        src.files = [{"file": str(path), "sha256": digest}]
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
    assert source is not None
    return cells, source


# ----------------------------------------------------------------------------------------------
# Building results.json


def _stats(value: float, **extra) -> dict:
    return {"mean": value, "std": 0.0, "min": value, "max": value, "n": 1, **extra}


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
    per_task = {
        t: {
            str(L): _stats(c.score, **({"num_samples": c.num_samples} if c.num_samples is not None else {}))
            for L, c in sorted(by_task[t].items())
        }
        for t in evaluated
    }
    per_length = {}
    for L in lengths:
        got = _average(by_task, evaluated, L)
        if got is not None:
            per_length[str(L)] = _stats(got[0], tasks_covered=got[1], tasks_total=len(tasks))
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


def _average(by_task: dict[str, dict[int, Cell]], members: list[str], L: int) -> tuple[float, int] | None:
    """(mean score, tasks averaged) of the members imported at length L; None when none is."""
    vals = [by_task[t][L].score for t in members if t in by_task and L in by_task[t]]
    return (statistics.fmean(vals), len(vals)) if vals else None


def _summary(suite: str, per_length: dict, lengths: list[int], evaluated: int, total: int) -> dict:
    """Avg over the lengths (RULER's weighted averages too), coverage, and the effective length of a
    length-controlled suite at the default threshold."""
    from harness.core.effective_length import effective_length
    from harness.pipeline.aggregate import DEFAULT_THRESHOLD

    means = [per_length[str(L)]["mean"] for L in lengths]
    summary: dict = {
        "avg": _stats(statistics.fmean(means)),
        "tasks_covered": evaluated,
        "tasks_total": total,
        "lengths_covered": len(per_length),
        "lengths_total": len(lengths),
    }
    if suite == "ruler" or suite.startswith("ruler-"):
        n = len(means)
        summary["wavg_inc"] = _stats(sum((i + 1) * m for i, m in enumerate(means)) / (n * (n + 1) / 2))
        summary["wavg_dec"] = _stats(sum((n - i) * m for i, m in enumerate(means)) / (n * (n + 1) / 2))
    if lengths != [0]:
        summary["effective_length"] = effective_length(per_length, lengths, DEFAULT_THRESHOLD)
    else:
        summary["effective_length"] = {"threshold": None, "value": None, "label": "n/a"}
    return summary


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
                categories.setdefault(cat, {})[str(L)] = _stats(got[0], tasks_covered=got[1], tasks_total=len(members))
    return categories


def run_name(source: Source) -> str:
    """`<model>-<harness>`: the model's last path part, printable."""
    model = (source.model or "model").rstrip("/").split("/")[-1] or "model"
    name = re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", "", f"{model}-{source.harness.lower()}")
    return name or "imported"


def build_results(cells: list[Cell], source: Source, name: str | None = None) -> dict:
    """The results.json of the imported cells (validated with the one schema)."""
    from datetime import datetime, timezone

    from harness.core.provenance import git_hash, package_version
    from harness.core.results_schema import SCHEMA_VERSION, validate_results

    if not cells:
        files = ", ".join(f["file"] for f in source.files)
        skipped = f" (found only {', '.join(source.skipped[:6])})" if source.skipped else ""
        raise UserError(f"{files} holds no score this harness imports{skipped}: see docs/imports.md for the tasks read")
    suites: dict[str, list[Cell]] = {}
    for c in cells:
        suites.setdefault(c.suite, []).append(c)
    model = source.model or "unknown model"
    src: dict = {
        "harness": source.harness,
        "version": source.version,
        "git_hash": source.git_hash,
        "model": source.model,
        "files": source.files,
        "protocol": {s: source.protocol[s] for s in suites if s in source.protocol},
    }
    if source.skipped:
        src["not_imported"] = source.skipped
    results = {
        "schema_version": SCHEMA_VERSION,
        "run": {
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
        },
        "provenance": {
            "package_version": package_version(),
            "git_hash": git_hash(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "source": src,
            "imported": note(src),
        },
        "suites": {s: _suite_block(s, cs, source.protocol.get(s)) for s, cs in sorted(suites.items())},
    }
    return validate_results(results, "the imported results")


def import_files(
    paths: list[str | Path], fmt: str | None = None, name: str | None = None, length: int | None = None
) -> dict:
    cells, source = read_files(paths, fmt, length)
    return build_results(cells, source, name)
