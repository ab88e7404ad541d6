"""The leaderboard's detail sections: each run's task × length grid, and the provenance table.

from leaderboards.details import drilldown, provenance
drilldown(run)          # {"run", "suites": [{"suite", "label", "lengths", "grid", "categories", ...}]}
provenance(runs, root)  # {"runs", "fields" (one row per setting, flagged where runs differ), "details"}
"""

from __future__ import annotations

import json
from pathlib import Path

from leaderboards.cells import missing, stat_cell, task_reason
from leaderboards.columns import suite_lengths, tasks_covered
from leaderboards.labels import TASK_LABELS, format_length, path_label, suite_label
from leaderboards.paint import color

PROVENANCE_FIELDS = [
    "harness",  # which harness made the scores: ours, or the one an imported row came from
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
    "model_args",
    "created",
    "imported_by",
]
# An imported run's source and note: shown in its own details (files, protocol), not as table cells.
_NOT_FIELDS = {"dataset_hashes", "source", "imported"}


def _field(run: dict, f: str):
    """A provenance field as the table shows it: the harness that made the row (an imported row's
    own, from its file), the importer in one line, the rest as recorded."""
    from harness.core.imported import imported_source

    prov = run.get("provenance") or {}
    if f == "harness":
        src = imported_source(run)
        if src is not None:
            return " ".join(str(x) for x in (src.get("harness"), src.get("version")) if x)
        return "longctx-harness" + (f" {prov['package_version']}" if prov.get("package_version") else "")
    value = prov.get(f)
    if f == "imported_by" and isinstance(value, dict):
        return " ".join(str(value[k]) for k in ("package_version", "git_hash", "at") if value.get(k))
    return value


def drilldown(run: dict) -> dict:
    """Task × length grid per suite for one run; missing tasks keep their reason."""
    suites = []
    for sname, suite in run["suites"].items():
        lengths = suite_lengths(suite)
        tasks = list(suite["tasks"]) + [t for t in suite["per_task"] if t not in suite["tasks"]]
        grid = []
        for t in tasks:
            by_len = suite["per_task"].get(t) or {}
            keys = sorted({int(x) for x in by_len}) if not lengths else lengths
            cells = []
            for L in lengths or keys:
                stats = by_len.get(str(L))
                if stats is not None:
                    c = stat_cell(stats, f"{t} {format_length(L)}")
                    c["color"] = color(max(0.0, min(1.0, c["value"] / 100)))
                elif t in suite["evaluated"]:
                    c = missing(f"{t} not evaluated at {format_length(L)}")
                else:
                    c = missing(task_reason(suite, t))
                cells.append(c)
            grid.append({"task": t, "label": TASK_LABELS.get(t, t), "cells": cells})
        cats = []
        for cat, by_len in sorted((suite.get("categories") or {}).items()):
            cats.append(
                {
                    "category": cat,
                    "cells": [
                        stat_cell(by_len[str(L)], f"{cat} {format_length(L)}")
                        if str(L) in by_len
                        else missing(f"{cat} not evaluated at {format_length(L)}")
                        for L in lengths
                    ],
                }
            )
        covered, total = tasks_covered(suite)
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


def provenance(runs: list[dict], root: Path | None = None) -> dict:
    """Every provenance field side by side (marked where the runs differ), and each run's sources,
    dataset hashes and checkpoints."""
    fields = []
    extra = sorted({k for r in runs for k in (r.get("provenance") or {})} - set(PROVENANCE_FIELDS) - _NOT_FIELDS)
    for f in PROVENANCE_FIELDS + extra:
        vals = [_field(r, f) for r in runs]
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
        src: dict = prov["source"] if isinstance(prov.get("source"), dict) else {}
        runs_info.append(
            {
                "run": r["run"]["name"],
                "sources": r["sources"],
                # an imported run: the other harness's files and how it builds each suite's inputs
                "imported_files": [f.get("file") for f in src.get("files") or [] if isinstance(f, dict)],
                "protocol": [
                    (suite, sorted((k, str(v)) for k, v in proto.items() if k != "summary"), proto.get("summary"))
                    for suite, proto in sorted((src.get("protocol") or {}).items())
                    if isinstance(proto, dict)
                ],
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
