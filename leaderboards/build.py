"""Collect runs from results.json files into one leaderboard model (rows = runs).

    from leaderboards.build import load_runs, build
    board = build(load_runs(["out/full", "out/anchor/results.json"]), baseline="full")

`build` returns plain dicts and lists (JSON-serialisable): the columns, the rows with one cell per
column, the delta-vs-baseline cells, per-run drill-down grids, chart series and provenance. The
HTML page, the CSV/JSON/Markdown exports and the SVG charts all render this one model, so every
output shows the same numbers. Results files follow docs/contracts.md ("Aggregated results").
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import cast

from harness.core.errors import UserError
from leaderboards.diagnostic import rope_section
from leaderboards.intervals import cell_interval, delta_interval, heatmaps
from leaderboards.labels import (
    TASK_LABELS,
    declared,
    format_length,
    is_ruler,
    lower_is_better,
    path_label,
    suite_label,
    suite_rank,
)
from leaderboards.series import chart_series

TASK_ORDER = ["mmlu", "hellaswag"]  # the paper's table order
SUMMARY_LABELS = {"avg": "Avg", "wavg_inc": "wAvg (inc)", "wavg_dec": "wAvg (dec)"}
SUMMARY_HELP = {
    "avg": "Mean over lengths of the per-length average",
    "wavg_inc": "Weighted average, weights increasing with length (RULER)",
    "wavg_dec": "Weighted average, weights decreasing with length (RULER)",
}
PROVENANCE_FIELDS = [
    "package_version",
    "git_hash",
    "backend",
    "dtype",
    "batch_size",
    "max_model_len",
    "rope_theta",
    "rope_scaling",
    "template",
    "truncation",
    "tokenizer",
    "seed",
    "lm_eval_version",
    "created",
]


# ----------------------------------------------------------------------------------------------
# Reading results files


def resolve_path(arg: str | Path) -> Path:
    """A results.json file or a run directory holding one."""
    path = Path(arg)
    if path.is_dir():
        path = path / "results.json"
    if not path.is_file():
        raise UserError(
            f"no results file at {path}: pass a results.json or the run directory that holds it (written by `harness eval`)"
        )
    return path


def _read_json(path: Path) -> dict:
    from harness.core.results_file import load_results  # the project's one typed reader

    return load_results(path)


def _is_stats(value) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("mean"), (int, float))
        and not isinstance(value.get("mean"), bool)
    )


def validate(data, path: Path | str) -> dict:
    """Schema checks from docs/contracts.md (the one validator `harness report` uses too)."""
    from harness.core.results_schema import validate_results

    return validate_results(data, path)


def load_runs(paths) -> list[dict]:
    """Read and validate results files; files naming the same run are merged by suite."""
    if not paths:
        raise UserError("no results given: pass results.json files or run directories")
    runs: dict[str, dict] = {}
    for arg in paths:
        path = resolve_path(arg)
        data = validate(_read_json(path), path)
        name = data["run"]["name"]
        if name not in runs:
            runs[name] = {**data, "sources": [str(path)], "suites": dict(data["suites"])}
            continue
        # The same run evaluated on different suites into different out dirs: one row.
        have = runs[name]
        clash = set(have["suites"]) & set(data["suites"])
        if clash:
            raise UserError(
                f"run {name!r} has suite {min(clash)!r} in both {have['sources'][0]} and {path}: "
                "pass one of them, or give the runs different names with `harness eval --name`"
            )
        have["suites"].update(data["suites"])
        have["sources"].append(str(path))
    return list(runs.values())


# ----------------------------------------------------------------------------------------------
# Pure helpers (checked against brute force in the tests)


def effective_length(per_length_mean: dict[int, float], threshold: float) -> tuple[int | None, str]:
    """Largest evaluated L with the mean above threshold at every evaluated length <= L."""
    from harness.core.effective_length import BELOW_FIRST, effective_length_value  # the one definition

    value = effective_length_value(per_length_mean, threshold)
    return value, (format_length(value) if value is not None else BELOW_FIRST)


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def fmt_delta(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:+.2f}".replace("-", "−") if round(value, 2) != 0 else "0.00"


def _steps_range(steps: list[int]) -> str:
    if not steps:
        return "—"
    steps = sorted(steps)
    return f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"


# ----------------------------------------------------------------------------------------------
# Building the model


def _stat_cell(stats: dict, what: str, extra: str = "") -> dict:
    steps = list(stats.get("steps") or [])
    n = stats.get("n", len(steps) or None)
    parts = [f"{what}: {stats['mean']:.2f}"]
    if stats.get("std") is not None:
        parts[0] += f" ± {stats['std']:.2f} (std over checkpoints)"
    if stats.get("min") is not None and stats.get("max") is not None:
        parts.append(f"min {stats['min']:.2f}, max {stats['max']:.2f}")
    if n is not None:
        parts.append(
            f"{n} checkpoint{'s' if n != 1 else ''}"
            + (f": steps {', '.join('?' if x is None else str(x) for x in steps)}" if steps else "")
        )
    if stats.get("num_samples") is not None:
        parts.append(f"{stats['num_samples']} samples")
    iv = cell_interval(stats)
    if iv is not None:
        parts.append(f"95% interval [{iv[0]:.2f}, {iv[1]:.2f}] (bootstrap over samples and checkpoints)")
    if extra:
        parts.append(extra)
    marks = _marks(stats, parts)
    return {
        "marks": marks,
        "degenerate": bool(stats.get("degenerate")) and any(m.startswith("!") for m in marks.split()),
        "bound": stats.get("bound"),
        "ci": list(iv) if iv is not None else None,
        "pm": f"±{(iv[1] - iv[0]) / 2:.1f}" if iv is not None else None,
        "value": float(stats["mean"]),
        "std": stats.get("std"),
        "min": stats.get("min"),
        "max": stats.get("max"),
        "n": n,
        "steps": steps,
        "num_samples": stats.get("num_samples"),
        "reason": None,
        "text": fmt(stats["mean"]),
        "title": "\n".join(parts),
    }


def _marks(stats: dict, parts: list[str]) -> str:
    """The cell's marks (and their explanations appended to `parts`): degenerate predictions named
    (harness/core/degenerate.py) and a cell at its floor or ceiling, which separates no runs."""
    from harness.core.degenerate import flags

    marks = []
    shares = stats.get("degenerate") or {}
    for word in flags(shares):
        marks.append(f"!{word}")
    if marks:
        parts.append(
            f"degenerate predictions: {shares['empty']:.0%} empty, {shares['at_max']:.0%} ran to max new tokens, "
            f"{shares['repeat']:.0%} repeat one span (of {shares['n']}): a set-up problem, not a score (harness doctor)"
        )
    bound = stats.get("bound")
    if bound:
        marks.append({"floor": "⊥", "ceiling": "⊤"}.get(bound, "⊥⊤"))
        parts.append(f"at the task's {bound}: the 95% interval reaches it, so this cell cannot tell runs apart")
    return " ".join(marks)


def _missing(reason: str) -> dict:
    return {"value": None, "reason": reason, "text": "—", "title": reason}


def _task_reason(suite: dict, task: str) -> str:
    unavailable = suite.get("unavailable") or {}
    if task in unavailable:
        return f"{task} unavailable: {unavailable[task]}"
    if task in (suite.get("excluded") or []):
        return f"{task} excluded by --exclude"
    return f"{task} not evaluated"


def _lengths(suite: dict) -> list[int]:
    return sorted({int(x) for x in suite["lengths"]} | {int(x) for x in suite["per_length"]})


def _samples_at(suite: dict, length: int) -> int | None:
    counts = [s.get("num_samples") for s in (by.get(str(length)) for by in suite["per_task"].values()) if s]
    return sum(counts) if counts and all(c is not None for c in counts) else None


def _covered(suite: dict) -> tuple[int, int]:
    summary = suite["summary"]
    total = summary.get("tasks_total", len(suite["tasks"]))
    covered = summary.get("tasks_covered", len(suite["evaluated"]))
    return covered, total


def _suite_columns(name: str, suites: list[dict]) -> list[dict]:
    """Columns of one suite group, from the union over runs of what they evaluated."""
    label = suite_label(name, [t for s in suites for t in s["tasks"]])
    cols: list[dict] = []
    many_tasks = any(len(s["tasks"]) > 3 for s in suites) or any(_covered(s)[0] != _covered(s)[1] for s in suites)
    if many_tasks:
        cols.append({"key": "tasks", "label": "Tasks", "help": "Tasks with scores / tasks in the suite"})
    cols += _headline_columns(label, suites)
    if is_ruler(name) or not any(s.get("categories") for s in suites) and all(len(s["tasks"]) > 3 for s in suites):
        lengths = sorted({L for s in suites for L in _lengths(s)})
        cols += [
            {
                "key": f"len:{L}",
                "label": format_length(L),
                "length": L,
                "help": f"Average over tasks at {format_length(L)} tokens",
            }
            for L in lengths
        ]
        summary_keys = ["avg", "wavg_inc", "wavg_dec"] if is_ruler(name) else ["avg"]
        cols += [{"key": k, "label": SUMMARY_LABELS[k], "help": SUMMARY_HELP[k]} for k in summary_keys]
        if is_ruler(name):
            cols.append(
                {
                    "key": "eff",
                    "label": "Eff. length",
                    "help": "Effective length: largest length with the average above the threshold at it and every shorter length",
                }
            )
    elif any(s.get("categories") for s in suites):
        cats: dict[str, set] = {}
        for s in suites:
            for cat, by_len in (s.get("categories") or {}).items():
                cats.setdefault(cat, set()).update(int(L) for L in by_len)
        order = list(dict.fromkeys(c for s in suites for c in (s.get("categories") or {})))
        for cat in order:
            short = cat.removeprefix(label + " ").strip() or cat
            for L in sorted(cats[cat]):
                col = {
                    "key": f"cat:{cat}:{L}",
                    "label": short,
                    "category": cat,
                    "length": L,
                    "help": f"{cat}" + (f" at {format_length(L)} tokens" if L else ""),
                }
                if len(cats[cat]) > 1:  # a category at several lengths gets its own header group
                    col.update(label=format_length(L), group=f"{label} · {cat}")
                cols.append(col)
        cols.append({"key": "avg", "label": "Avg", "help": SUMMARY_HELP["avg"]})
    else:
        tasks: dict[str, set] = {}
        for s in suites:
            for t in s["tasks"]:
                tasks.setdefault(t, set()).update(int(L) for L in (s["per_task"].get(t) or {}))
        multi = any(len(v) > 1 for v in tasks.values())
        for t in sorted(tasks, key=lambda t: (TASK_ORDER.index(t) if t in TASK_ORDER else len(TASK_ORDER), t)):
            for L in sorted(tasks[t]) or [None]:
                tl = TASK_LABELS.get(t, t)
                cols.append(
                    {
                        "key": f"task:{t}:{L}",
                        "label": f"{tl} {format_length(L)}" if multi and L else tl,
                        "task": t,
                        "length": L,
                        "help": f"{tl}" + (f" at {format_length(L)} tokens" if L else ""),
                    }
                )
        if len(tasks) > 1 and not multi:
            pass  # a two-task short suite reads better without an average nobody reports
    if any((s["summary"].get("effective_length_nolima") or {}).get("base_score") is not None for s in suites) and (
        name == "nolima" or name.startswith("nolima-")
    ):
        cols.append(
            {
                "key": "eff_nolima",
                "label": "Eff. length",
                "help": "NoLiMa's effective length: longest length whose score stays at or above 85% of the base "
                "score (the mean at lengths up to 1K) at it and every shorter length",
            }
        )
    for c in cols:
        c.setdefault("group", label)
        c.update(suite=name, id=f"{name}/{c['key']}")
        c["numeric"] = c["key"] not in ("tasks", "eff", "eff_nolima")
    return cols


def _headline_columns(label: str, suites: list[dict]) -> list[dict]:
    """The suite's published headline first (tasks.registry.Headline): one column per group and
    length, headed with how the reference averages it."""
    groups: dict[str, set[int]] = {}
    how = ""
    for s in suites:
        headline = s.get("headline") or {}
        how = how or headline.get("label", "")
        for group, block in (headline.get("groups") or {}).items():
            groups.setdefault(group, set()).update(int(L) for L in block.get("per_length") or {})
    cols = []
    for group, lengths in groups.items():
        for L in sorted(lengths):
            cols.append(
                {
                    "key": f"hl:{group}:{L}",
                    "label": group if len(lengths) == 1 else format_length(L),
                    "headline": group,
                    "length": L,
                    "group": f"{label} · headline" if len(lengths) == 1 else f"{label} · {group}",
                    "help": f"{group}: {how}" + (f", at {format_length(L)}" if L else ""),
                }
            )
    return cols


def _cell(run: dict, suite_name: str, col: dict, threshold: float | None) -> dict:
    suite = run["suites"].get(suite_name)
    label = suite_label(suite_name, suite["tasks"] if suite else None)
    if suite is None:
        return _missing(f"no {label} results for this run")
    key = col["key"]
    covered, total = _covered(suite)
    if key == "tasks":
        cell: dict = {"value": covered, "total": total, "text": f"{covered}/{total}", "reason": None}
        missing = [t for t in suite["tasks"] if t not in suite["evaluated"]]
        cell["title"] = f"{covered} of {total} tasks scored" + (
            "".join(f"\n• {_task_reason(suite, t)}" for t in missing)
        )
        return cell
    if key.startswith("len:"):
        L = col["length"]
        stats = suite["per_length"].get(str(L))
        if stats is None:
            have = ", ".join(format_length(x) for x in _lengths(suite)) or "none"
            return _missing(f"not evaluated at {format_length(L)} (this run has {have})")
        stats = {**stats, "num_samples": stats.get("num_samples", _samples_at(suite, L))}
        tc, tt = stats.get("tasks_covered", covered), stats.get("tasks_total", total)
        cell = _stat_cell(stats, f"{label} {format_length(L)}", f"average of {tc}/{tt} tasks")
        thr = threshold if threshold is not None else (suite["summary"].get("effective_length") or {}).get("threshold")
        if not is_ruler(suite_name):
            return cell
        cell["above"] = thr is not None and cell["value"] > thr
        if thr is not None:
            cell["title"] += f"\n{'above' if cell['above'] else 'not above'} the threshold {thr:g}"
        return cell
    if key in SUMMARY_LABELS:
        stats = suite["summary"].get(key)
        if not _is_stats(stats):
            have, total_len = suite["summary"].get("lengths_covered"), suite["summary"].get("lengths_total")
            if have is not None and total_len is not None and have < total_len:
                return _missing(
                    f"{SUMMARY_LABELS[key]} needs every length of the run: only {have}/{total_len} have an average"
                )
            return _missing(f"{SUMMARY_LABELS[key]} not in this run's results")
        return _stat_cell(
            stats, f"{label} {SUMMARY_LABELS[key]}", f"over {len(suite['per_length'])} lengths, {covered}/{total} tasks"
        )
    if key == "eff":
        return _eff_cell(suite, threshold)
    if key == "eff_nolima":
        return _nolima_eff_cell(suite)
    if key.startswith("hl:"):
        block = ((suite.get("headline") or {}).get("groups") or {}).get(col["headline"]) or {}
        stats = (block.get("per_length") or {}).get(str(col["length"]))
        if stats is None:
            return _missing(f"{col['headline']} not evaluated at {format_length(col['length'])} for this run")
        how = (suite.get("headline") or {}).get("label", "")
        cats = f"{stats.get('categories_covered')}/{stats.get('categories_total')} categories"
        return _stat_cell(stats, f"{label} {col['headline']}", f"{how}; {cats}")
    if key.startswith("cat:"):
        stats = (suite.get("categories") or {}).get(col["category"], {}).get(str(col["length"]))
        if stats is None:
            return _missing(f"{col['category']} not evaluated at {format_length(col['length'])} for this run")
        return _stat_cell(stats, f"{col['category']} {format_length(col['length'])}")
    if key.startswith("task:"):
        t = col["task"]
        by_len = suite["per_task"].get(t) or {}
        stats = by_len.get(str(col["length"])) if col["length"] is not None else None
        if stats is None:
            reason = (
                _task_reason(suite, t)
                if t not in suite["evaluated"]
                else f"{t} not evaluated at {format_length(col['length'])}"
            )
            return _missing(reason)
        return _stat_cell(stats, TASK_LABELS.get(t, t))
    raise AssertionError(f"unknown column {key}")


def _eff_cell(suite: dict, threshold: float | None) -> dict:
    covered, total = _covered(suite)
    means = {int(L): s["mean"] for L, s in suite["per_length"].items()}
    if threshold is not None:
        value, text = effective_length(means, threshold)
        note = f"threshold {threshold:g} (--threshold)"
        if covered != total:
            note += f"; ⚑ only {covered}/{total} tasks, not comparable with full-suite numbers"
    else:
        eff = suite["summary"].get("effective_length")
        if not eff:
            return _missing("effective length not in this run's results")
        if covered != total:
            return _missing(
                f"only {covered}/{total} tasks: effective length is shown for full suites only (pass --threshold to show it anyway)"
            )
        value, text, note = eff.get("value"), eff.get("label") or "—", f"threshold {eff.get('threshold')}"
    lengths = _lengths(suite)
    if value is None and lengths and text == "below the first length":
        text = f"< {format_length(lengths[0])}"  # short enough for the column; the title spells it out
    # Sorts below every real length (0), yet is a value, not a missing cell.
    return {
        "value": value if value is not None else 0,
        "text": text,
        "reason": None,
        "partial": covered != total,
        "title": f"effective length {text}" + (" (below the first length)" if value is None else "") + f": {note}",
    }


def _nolima_eff_cell(suite: dict) -> dict:
    rel = suite["summary"].get("effective_length_nolima") or {}
    if rel.get("base_score") is None:
        return _missing("NoLiMa effective length not in this run's results")
    value, text = rel.get("value"), rel.get("label") or "—"
    lengths = _lengths(suite)
    if value is None and lengths and text == "below the first length":
        text = f"< {format_length(lengths[0])}"
    bases = ", ".join(format_length(int(L)) for L in rel.get("base_lengths") or [])
    return {
        "value": value if value is not None else 0,
        "text": text,
        "reason": None,
        "title": f"NoLiMa effective length {text}: score >= {rel.get('fraction', 0.85):g} x base score "
        f"{rel['base_score']:.1f} (mean at {bases}) = {rel.get('threshold') or 0:.1f} at it and every shorter length",
    }


def _color(t: float) -> str:
    """Sequential light→blue scale; dark text stays readable at both ends."""
    lo, hi = (247, 251, 255), (107, 174, 214)
    return "rgb({},{},{})".format(*(round(a + (b - a) * t) for a, b in zip(lo, hi)))


def _diverging(d: float, scale: float) -> str:
    t = min(1.0, abs(d) / scale) if scale > 0 else 0.0
    end = (103, 169, 207) if d > 0 else (239, 138, 98)
    return "rgb({},{},{})".format(*(round(255 + (b - 255) * t) for b in end))


def _paint(rows: list[dict], columns: list[dict], cells_key: str, diverging: bool = False) -> None:
    """Per-column colour scale over the rows' values (numbers only); "best" only among comparable rows."""
    for col in columns:
        if not col["numeric"]:
            continue
        vals = [r[cells_key][col["id"]]["value"] for r in rows if r[cells_key][col["id"]]["value"] is not None]
        if not vals:
            continue
        lo, hi = min(vals), max(vals)
        for r in rows:
            cell = r[cells_key][col["id"]]
            if cell["value"] is None:
                continue
            if diverging:
                cell["color"] = _diverging(cell["value"], max(abs(lo), abs(hi)))
            else:
                t = (cell["value"] - lo) / (hi - lo) if hi > lo else 0.5
                cell["color"] = _color(1 - t if lower_is_better(col["suite"]) else t)
        # an imported row (another harness, another input protocol) is shown, never crowned best
        comparable = [
            r[cells_key][col["id"]]["value"]
            for r in rows
            if col["suite"] not in r["flag_suites"]
            and not r.get("imported")
            and r[cells_key][col["id"]]["value"] is not None
        ]
        if diverging or len(comparable) < 2 or lower_is_better(col["suite"]):
            continue
        for r in rows:
            cell = r[cells_key][col["id"]]
            cell["best"] = (
                col["suite"] not in r["flag_suites"] and not r.get("imported") and cell["value"] == max(comparable)
            )


def _flag_sets(runs: list[dict], suite_names: list[str], against: dict[str, tuple] | None) -> tuple[dict, dict]:
    """Per run, why its task or length set differs from the others' (or the baseline's), and in which suites."""
    flags: dict[str, list[str]] = {r["run"]["name"]: [] for r in runs}
    where: dict[str, set] = {r["run"]["name"]: set() for r in runs}
    for sname in suite_names:
        have = [r for r in runs if sname in r["suites"]]
        sets = {
            r["run"]["name"]: (frozenset(r["suites"][sname]["evaluated"]), frozenset(_lengths(r["suites"][sname])))
            for r in have
        }
        if against is not None:
            ref = against.get(sname)
        else:
            ref = (
                (frozenset().union(*(s[0] for s in sets.values())), frozenset().union(*(s[1] for s in sets.values())))
                if sets
                else None
            )
        if ref is None or len(set(sets.values()) | {ref}) == 1:
            continue
        label = suite_label(sname, [t for r in have for t in r["suites"][sname]["tasks"]])
        for name, (tasks, lengths) in sets.items():
            why = []
            if tasks != ref[0]:
                lacks, extra = sorted(ref[0] - tasks), sorted(tasks - ref[0])
                why.append(
                    f"{label}: tasks differ"
                    + (f" (lacks {', '.join(lacks)})" if lacks else "")
                    + (f" (extra {', '.join(extra)})" if extra else "")
                )
            if lengths != ref[1]:
                lacks = sorted(ref[1] - lengths)
                why.append(
                    f"{label}: lengths differ" + (f" (lacks {', '.join(map(format_length, lacks))})" if lacks else "")
                )
            flags[name] += why
            if why:
                where[name].add(sname)
    return flags, where


def _text(value) -> str:
    """A run field for display: lists (several parents) joined, None as a dash."""
    if value is None or value == "":
        return "—"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except (OSError, ValueError):
        return a == b


def _continued_from(run: dict) -> set[str]:
    """The models this run's checkpoints were trained from (harness_training.json job.model.path)."""
    out = set()
    for c in run["run"].get("checkpoints", []):
        node = c.get("training")
        for key in ("job", "model", "path"):  # results files are untrusted: any level may be missing
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, str) and node:
            out.add(node)
    return out


def is_base_of(run: dict, runs: list[dict]) -> bool:
    """Whether `run` is one model that other rows were continued from (the demo's base row)."""
    ckpts = run["run"].get("checkpoints", [])
    if len(ckpts) != 1 or not isinstance(ckpts[0].get("path"), str):
        return False
    parents = {p for other in runs if other is not run for p in _continued_from(other)}
    return any(_same_path(ckpts[0]["path"], p) for p in parents)


def row_identity(run: dict, runs: list[dict], root: Path | None = None) -> dict:
    """What a reader needs of a row: the model (a lone model by its own name, a training run by its
    folder relative to `root`) and the training mode, `—` for a base that other rows continue from."""
    info = run["run"]
    ckpts = info.get("checkpoints", [])
    base = is_base_of(run, runs)
    recorded = info.get("model")
    if len(ckpts) == 1 and isinstance(ckpts[0].get("path"), str) and (base or ckpts[0].get("step") is None):
        path = ckpts[0]["path"]
        hub = str(ckpts[0].get("fingerprint", "")).startswith("hub:")
        model, model_title = (path if hub else Path(path).name or path), path
    elif isinstance(recorded, list):
        model, model_title = ", ".join(path_label(str(m), root) for m in recorded), ", ".join(map(str, recorded))
    else:
        model, model_title = path_label(_text(recorded), root), _text(recorded)
    own_mode = _text(info.get("mode"))
    if base:
        mode = "—"
        mode_title = "not trained in this comparison: the model the other rows continue from" + (
            f" (its own training record: {own_mode})" if own_mode != "—" else ""
        )
    else:
        mode, mode_title = own_mode, own_mode
    return {"model": model, "model_title": model_title, "mode": mode, "mode_title": mode_title, "is_base": base}


def _checkpoint_text(run: dict) -> tuple[str, list[int]]:
    steps = sorted(c["step"] for c in run["run"].get("checkpoints", []) if isinstance(c.get("step"), int))
    if not steps:
        return "—", []
    return f"{_steps_range(steps)} ({len(steps)})", steps


def build(
    runs: list[dict],
    baseline: str | None = None,
    threshold: float | None = None,
    title: str | None = None,
    root: str | Path | None = None,
    rope: dict | None = None,
) -> dict:
    """The leaderboard model: what every output shows.

    root: the folder the page's paths are shown relative to (the CLI passes the parent of --out,
    so `harness demo`'s page shows runs/full, not an absolute temporary path). rope: a RoPE
    diagnostic (leaderboards.diagnostic.load_rope_diagnostic) shown in its own section."""
    root = Path(root) if root is not None else None
    names = [r["run"]["name"] for r in runs]
    if baseline is not None and baseline not in names:
        raise UserError(f"--baseline {baseline!r} is not one of the runs: choose from {', '.join(names)}")
    if threshold is not None and not (math.isfinite(threshold) and 0 <= threshold <= 100):
        raise UserError(f"--threshold {threshold} is outside 0..100: scores are percentages (RULER uses 85.6)")

    present = {s for r in runs for s in r["suites"]}
    suite_names = sorted(present, key=suite_rank)
    columns = [c for s in suite_names for c in _suite_columns(s, [r["suites"][s] for r in runs if s in r["suites"]])]
    groups: list[dict] = []
    for c in columns:
        if groups and groups[-1]["suite"] == c["suite"] and groups[-1]["label"] == c["group"]:
            groups[-1]["span"] += 1
        else:
            # A suite no family declares is labelled by its task names: shown as written, not upper-cased.
            by_tasks = declared(c["suite"]) is None and c["group"] != c["suite"]
            groups.append({"suite": c["suite"], "label": c["group"], "span": 1, "by_tasks": by_tasks})

    flags, flag_suites = _flag_sets(runs, suite_names, None)
    base_run = next((r for r in runs if r["run"]["name"] == baseline), None)
    base_sets = None
    if base_run is not None:
        base_sets = {
            s: (frozenset(base_run["suites"][s]["evaluated"]), frozenset(_lengths(base_run["suites"][s])))
            for s in base_run["suites"]
        }
    delta_flags = _flag_sets(runs, suite_names, base_sets)[0] if base_run is not None else {}

    rows = []
    for i, run in enumerate(runs):
        info = run["run"]
        ckpt_text, steps = _checkpoint_text(run)
        ident = row_identity(run, runs, root)
        row = {
            "id": f"r{i}",
            "run": info["name"],
            "model": ident["model"],
            "model_title": ident["model_title"],
            "mode": ident["mode"],
            "mode_title": ident["mode_title"],
            "checkpoints": ckpt_text,
            "steps": steps,
            "flags": flags[info["name"]],
            "flag_suites": sorted(flag_suites[info["name"]]),
            "delta_flags": delta_flags.get(info["name"], []),
            "is_baseline": info["name"] == baseline,
            "cells": {c["id"]: _cell(run, c["suite"], c, threshold) for c in columns},
        }
        _mark_imported(row, run)
        rows.append(row)
    _paint(rows, columns, "cells")

    if base_run is not None:
        assert baseline is not None  # base_run is the run named `baseline` (run names are strings)
        base_row = next(r for r in rows if r["is_baseline"])
        replicates: dict = {}  # each task cell of each run resampled once for all its columns
        for row, run in zip(rows, runs):
            row["delta"] = {
                c["id"]: _delta_cell(
                    row,
                    base_row,
                    c,
                    baseline,
                    delta_interval(run, base_run, c, replicates) if c["numeric"] and not row["is_baseline"] else None,
                )
                for c in columns
            }
        _paint(rows, columns, "delta", diverging=True)

    thresholds = sorted(
        cast(
            "set[float]",
            {
                (s["summary"].get("effective_length") or {}).get("threshold")
                for r in runs
                for n, s in r["suites"].items()
                if is_ruler(n)
            }
            - {None},
        )
    )
    return {
        "schema_version": 1,
        "title": title or "Long-context leaderboard",
        "threshold": threshold,
        "threshold_text": (
            f"{threshold:g} (--threshold)"
            if threshold is not None
            else ", ".join(f"{t:g}" for t in thresholds) + " (from the results)"
            if thresholds
            else None
        ),
        "baseline": baseline,
        "suites": suite_names,
        "groups": groups,
        "columns": columns,
        "rows": rows,
        "any_flags": any(r["flags"] for r in rows),
        "drilldown": [_drilldown(run) for run in runs],
        "provenance": _provenance(runs, root),
        "rope": rope_section(rope, root, names) if rope else None,
        "series": chart_series(runs, threshold),
        "heatmaps": heatmaps(runs, baseline),
        "any_intervals": any(c.get("ci") for r in rows for c in r["cells"].values()),
        "any_delta_intervals": any(c.get("ci") for r in rows for c in (r.get("delta") or {}).values()),
    }


def _mark_imported(row: dict, run: dict) -> None:
    """A row imported from another harness (harness import): its note leads the row's flags (shown
    beside the run, in the exports), and it never gets a paired interval (no per-sample data)."""
    from harness.core.imported import imported_source, note

    src = imported_source(run)
    if src is None:
        return
    row["imported"] = note(src)
    row["flags"] = [row["imported"], *row["flags"]]
    row["delta_flags"] = [row["imported"], *row["delta_flags"]]


def _delta_cell(row: dict, base: dict, col: dict, baseline: str, iv: dict | None = None) -> dict:
    a, b = row["cells"][col["id"]], base["cells"][col["id"]]
    if col["key"] == "tasks":
        return {**a, "title": a.get("title", "") + f"\nbaseline {baseline}: {b['text']}"}
    if col["key"] in ("eff", "eff_nolima"):
        return {
            "value": None,
            "text": a["text"],
            "reason": None,
            "title": f"{a['text']} here; baseline {baseline}: {b['text']}",
            "plain": True,
        }
    if row["is_baseline"]:
        return {
            "value": 0.0 if a["value"] is not None else None,
            "text": "base" if a["value"] is not None else "—",
            "reason": a["reason"],
            "title": a["title"],
        }
    if a["value"] is None or b["value"] is None:
        reason = a["reason"] if a["value"] is None else f"baseline {baseline}: {b['reason']}"
        return _missing(reason)
    d = a["value"] - b["value"]
    cell = {
        "value": d,
        "text": fmt_delta(d),
        "reason": None,
        "title": f"{row['run']} {a['value']:.2f} − {baseline} {b['value']:.2f} = {d:+.2f}",
    }
    if iv is not None:
        how = (
            f"paired bootstrap over {iv['paired_samples']} shared samples and the checkpoints"
            if iv["paired_samples"]
            else "unpaired bootstrap: no shared samples"
        )
        if iv["paired_samples"] and iv["unpaired_tasks"]:
            how += f"; unpaired for {', '.join(iv['unpaired_tasks'])} (different samples)"
        verdict = (
            "significant at 95%: the interval excludes 0"
            if iv["significant"]
            else "not significant at 95%: the interval contains 0"
        )
        cell.update(ci=[iv["low"], iv["high"]], pm=f"±{(iv['high'] - iv['low']) / 2:.1f}", sig=iv["significant"])
        cell["title"] += f"\n95% interval [{iv['low']:+.2f}, {iv['high']:+.2f}] ({how})\n{verdict}"
    return cell


def _drilldown(run: dict) -> dict:
    """Task × length grid per suite for one run; missing tasks keep their reason."""
    suites = []
    for sname, suite in run["suites"].items():
        lengths = _lengths(suite)
        tasks = list(suite["tasks"]) + [t for t in suite["per_task"] if t not in suite["tasks"]]
        grid = []
        for t in tasks:
            by_len = suite["per_task"].get(t) or {}
            keys = sorted({int(x) for x in by_len}) if not lengths else lengths
            cells = []
            for L in lengths or keys:
                stats = by_len.get(str(L))
                if stats is not None:
                    c = _stat_cell(stats, f"{t} {format_length(L)}")
                    c["color"] = _color(max(0.0, min(1.0, c["value"] / 100)))
                elif t in suite["evaluated"]:
                    c = _missing(f"{t} not evaluated at {format_length(L)}")
                else:
                    c = _missing(_task_reason(suite, t))
                cells.append(c)
            grid.append({"task": t, "label": TASK_LABELS.get(t, t), "cells": cells})
        cats = []
        for cat, by_len in sorted((suite.get("categories") or {}).items()):
            cats.append(
                {
                    "category": cat,
                    "cells": [
                        _stat_cell(by_len[str(L)], f"{cat} {format_length(L)}")
                        if str(L) in by_len
                        else _missing(f"{cat} not evaluated at {format_length(L)}")
                        for L in lengths
                    ],
                }
            )
        covered, total = _covered(suite)
        suites.append(
            {
                "suite": sname,
                "label": suite_label(sname, suite["tasks"]),
                "lengths": [format_length(L) for L in lengths],
                "grid": grid,
                "categories": cats,
                "tasks_text": f"{covered}/{total}",
            }
        )
    return {"run": run["run"]["name"], "suites": suites}


def _provenance(runs: list[dict], root: Path | None = None) -> dict:
    fields = []
    extra = sorted({k for r in runs for k in (r.get("provenance") or {})} - set(PROVENANCE_FIELDS) - {"dataset_hashes"})
    for f in PROVENANCE_FIELDS + extra:
        vals = [(r.get("provenance") or {}).get(f) for r in runs]
        fields.append(
            {
                "field": f,
                "cells": ["—" if v is None else json.dumps(v) if isinstance(v, (dict, list)) else str(v) for v in vals],
                "differs": len({json.dumps(v, sort_keys=True) for v in vals}) > 1,
            }
        )
    runs_info = []
    for r in runs:
        prov = r.get("provenance") or {}
        runs_info.append(
            {
                "run": r["run"]["name"],
                "sources": r["sources"],
                "dataset_hashes": sorted((prov.get("dataset_hashes") or {}).items()),
                "checkpoints": [
                    {
                        "step": c.get("step"),
                        "path": path_label(str(c.get("path", "—")), root),
                        "fingerprint": str(c.get("fingerprint", "—")),
                    }
                    for c in r["run"].get("checkpoints", [])
                ],
            }
        )
    return {"runs": [r["run"]["name"] for r in runs], "fields": fields, "details": runs_info}
