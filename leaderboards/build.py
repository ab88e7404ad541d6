"""Collect runs from results.json files into one leaderboard model (rows = runs).

    from leaderboards.build import load_runs, build
    board = build(load_runs(["out/full", "out/anchor/results.json"]), baseline="full")

`build` returns plain dicts and lists (JSON-serialisable): the columns, the rows with one cell per
column, the delta-vs-baseline cells, per-run drill-down grids, chart series and provenance. The
HTML page, the CSV/JSON/Markdown exports and the SVG charts all render this one model, so every
output shows the same numbers. Results files follow docs/contracts.md ("Aggregated results").
The pieces live beside it: the columns (leaderboards.columns), the cells (leaderboards.cells),
their colours (leaderboards.paint), what a row says of its run (leaderboards.rows), and the
drill-down and provenance sections (leaderboards.details).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import cast

from harness.core.errors import UserError
from leaderboards.cells import cell, delta_cell
from leaderboards.columns import suite_columns, suite_lengths
from leaderboards.details import drilldown, provenance
from leaderboards.diagnostic import rope_section
from leaderboards.intervals import delta_interval, heatmaps
from leaderboards.labels import declared, is_ruler, suite_rank
from leaderboards.paint import paint
from leaderboards.rows import checkpoint_text, flag_sets, row_identity
from leaderboards.sequential import sequential_sections
from leaderboards.series import chart_series
from leaderboards.shared import shared_cell, shared_columns, shared_delta_interval

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


def validate(data, path: Path | str) -> dict:
    """Schema checks from docs/contracts.md (the one validator `harness report` uses too)."""
    from harness.core.results_schema import validate_results
    from tasks.length_rule import check_results_lengths

    # a per-task length its task cannot have (RULER at 0): the rule import and eval apply too
    return check_results_lengths(validate_results(data, path), path)


def load_runs(paths) -> list[dict]:
    """Read and validate results files; files naming the same run are merged by suite."""
    from leaderboards.record_marks import merge_record_counts

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
        merge_record_counts(have, data)  # its records' warnings travel with the merged row
    return list(runs.values())


# ----------------------------------------------------------------------------------------------
# Building the model


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
    _check_options(names, baseline, threshold)
    present = {s for r in runs for s in r["suites"]}
    suite_names = sorted(present, key=suite_rank)
    columns = [c for s in suite_names for c in suite_columns(s, [r["suites"][s] for r in runs if s in r["suites"]])]
    # a task subset compared task by task: shared columns first, each suite's own copy of them dropped
    shared, replaced = shared_columns(runs, columns)
    columns = shared + [c for c in columns if c["id"] not in replaced]
    groups = _header_groups(columns)
    base_run = next((r for r in runs if r["run"]["name"] == baseline), None)
    rows = _rows(runs, columns, suite_names, base_run, threshold, root)
    paint(rows, columns, "cells")
    if base_run is not None:
        assert baseline is not None  # base_run is the run named `baseline` (run names are strings)
        _add_deltas(rows, runs, columns, base_run, baseline)
    return {
        "schema_version": 1,
        "title": title or "Long-context leaderboard",
        "threshold": threshold,
        "threshold_text": _threshold_text(runs, threshold),
        "baseline": baseline,
        "suites": suite_names,
        "groups": groups,
        "columns": columns,
        "rows": rows,
        "any_flags": any(r["flags"] for r in rows),
        "drilldown": [drilldown(run) for run in runs],
        "provenance": provenance(runs, root),
        "rope": rope_section(rope, root, names) if rope else None,
        "series": chart_series(runs, threshold),
        "heatmaps": heatmaps(runs, baseline),
        "sequential": sequential_sections(runs),  # runs evaluated with --against / --until-width
        "any_intervals": any(c.get("ci") for r in rows for c in r["cells"].values()),
        "any_delta_intervals": any(c.get("ci") for r in rows for c in (r.get("delta") or {}).values()),
    }


def _check_options(names: list[str], baseline: str | None, threshold: float | None) -> None:
    if baseline is not None and baseline not in names:
        raise UserError(f"--baseline {baseline!r} is not one of the runs: choose from {', '.join(names)}")
    if threshold is not None and not (math.isfinite(threshold) and 0 <= threshold <= 100):
        raise UserError(f"--threshold {threshold} is outside 0..100: scores are percentages (RULER uses 85.6)")


def _header_groups(columns: list[dict]) -> list[dict]:
    """The header row above the columns: one group per run of columns sharing a suite and group label."""
    groups: list[dict] = []
    for c in columns:
        if groups and groups[-1]["suite"] == c["suite"] and groups[-1]["label"] == c["group"]:
            groups[-1]["span"] += 1
        else:
            # A suite no family declares is labelled by its task names: shown as written, not upper-cased.
            by_tasks = declared(c["suite"]) is None and c["group"] != c["suite"]
            groups.append(
                {"suite": c["suite"], "label": c["group"], "span": 1, "by_tasks": by_tasks, "note": c.get("subset")}
            )
    return groups


def _rows(
    runs: list[dict],
    columns: list[dict],
    suite_names: list[str],
    base_run: dict | None,
    threshold: float | None,
    root: Path | None,
) -> list[dict]:
    """One row per run: what identifies it, its flags (against the others and the baseline), its cells."""
    flags, flag_suites = flag_sets(runs, suite_names, None)
    delta_flags: dict = {}
    if base_run is not None:
        base_sets = {
            s: (frozenset(base_run["suites"][s]["evaluated"]), frozenset(suite_lengths(base_run["suites"][s])))
            for s in base_run["suites"]
        }
        delta_flags = flag_sets(runs, suite_names, base_sets)[0]
    baseline = base_run["run"]["name"] if base_run is not None else None
    rows = []
    for i, run in enumerate(runs):
        info = run["run"]
        ckpt_text, steps = checkpoint_text(run)
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
            "cells": {
                c["id"]: shared_cell(run, c) if c.get("shared") else cell(run, c["suite"], c, threshold)
                for c in columns
            },
        }
        _mark_imported(row, run)
        _mark_records(row, run)
        rows.append(row)
    return rows


def _add_deltas(rows: list[dict], runs: list[dict], columns: list[dict], base_run: dict, baseline: str) -> None:
    """Each row's cells minus the baseline's, with paired intervals, coloured on a diverging scale."""
    base_row = next(r for r in rows if r["is_baseline"])
    replicates: dict = {}  # each task cell of each run resampled once for all its columns
    for row, run in zip(rows, runs):
        row["delta"] = {
            c["id"]: delta_cell(
                row,
                base_row,
                c,
                baseline,
                None
                if not c["numeric"] or row["is_baseline"]
                else shared_delta_interval(run, base_run, c)
                if c.get("shared")
                else delta_interval(run, base_run, c, replicates),
            )
            for c in columns
        }
    paint(rows, columns, "delta", diverging=True)


def _threshold_text(runs: list[dict], threshold: float | None) -> str | None:
    """The effective-length threshold as the page states it: the option's, else the results' own."""
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
    if threshold is not None:
        return f"{threshold:g} (--threshold)"
    return ", ".join(f"{t:g}" for t in thresholds) + " (from the results)" if thresholds else None


def _mark_records(row: dict, run: dict) -> None:
    """A run whose store held records that contradict themselves or conflict: the warning report
    prints leads the row's flags, so the page, the CSV, JSON, Markdown and LaTeX all carry it."""
    from leaderboards.record_marks import record_marks

    row["record_marks"] = record_marks(run)
    row["flags"] = [*row["record_marks"], *row["flags"]]
    row["delta_flags"] = [*row["record_marks"], *row["delta_flags"]]


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
