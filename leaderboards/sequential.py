"""The leaderboard's section for runs evaluated sequentially (harness eval --against / --until-width).

    from leaderboards.sequential import sequential_sections
    board["sequential"] = sequential_sections(runs)    # [] when no run has a "sequential" block

One section per run whose results.json has a "sequential" block: the rule (harness.core.
sequential_text.rule_lines), the samples used against the fixed protocol's, a count per verdict,
and per suite a grid in the drill-down's shape (the suite's tasks, then its average; one column per
length) whose cells hold the verdict, the paired difference (or, in width mode, the score) with its
anytime-valid interval, and n. `records` is the same cells flat, for the CSV. Read from the results
dict alone: the reports layer never imports the pipeline that wrote it.
"""

from __future__ import annotations

from harness.core import sequential_text as st
from leaderboards.labels import TASK_LABELS, format_length, suite_label, suite_rank


def sequential_sections(runs: list[dict]) -> list[dict]:
    return [section(i, run) for i, run in enumerate(runs) if run.get("sequential")]


def section(i: int, run: dict) -> dict:
    block = run["sequential"]
    paired = st.is_paired(block)
    used, fixed = (block.get("samples") or {}).get("used"), (block.get("samples") or {}).get("fixed")
    suites, records = [], []
    for name in sorted(run["suites"], key=suite_rank):
        grid = suite_grid(block, name, run["suites"][name], paired)
        if grid is not None:
            suites.append(grid)
            records += grid.pop("records")
    return {
        "id": f"seq-r{i}",
        "run": run["run"]["name"],
        "mode": block["mode"],
        "paired": paired,
        "against": st.against_name(block) if paired else None,
        "what": f"minus {st.against_name(block)}" if paired else f"until {st.width_text(block)}",
        "lines": st.rule_lines(block),
        "samples": {"used": used, "fixed": fixed, "ratio": used / fixed if used is not None and fixed else None},
        "counts": [
            {"status": s, "css": "v-" + s.replace(" ", "-"), "n": n} for s, n in st.status_counts(block).items()
        ],
        "stops": st.stop_line(block),
        "suites": suites,
        "records": records,
    }


def suite_grid(block: dict, name: str, suite: dict, paired: bool) -> dict | None:
    rows = st.suite_rows(block, name, suite)
    if not rows:
        return None
    lengths = list(suite.get("lengths") or [])
    label = suite_label(name, suite.get("tasks"))
    out_rows, records = [], []
    for task, is_avg, entries in rows:
        row_label = f"Average ({label})" if is_avg else TASK_LABELS.get(task, task)
        cells = []
        for L, entry in zip(lengths, entries):
            where = f"{row_label} at {format_length(L)}"
            cells.append(_cell(entry, paired, where))
            if entry is not None:
                records.append(_record(entry, name, "average" if is_avg else task, L))
        out_rows.append({"label": row_label, "average": is_avg, "cells": cells})
    return {
        "suite": name,
        "label": label,
        "lengths": [format_length(L) for L in lengths],
        "rows": out_rows,
        "records": records,
    }


def _cell(entry: dict | None, paired: bool, where: str) -> dict:
    if entry is None:
        return {"status": None, "css": "v-none", "text": st.MISSING, "title": f"{where}: no sequential cell"}
    status = st.status(entry)
    return {
        "status": status,
        "css": st.css_class(entry),
        "verdict": st.SHORT.get(status, status),
        "estimate": st.estimate_text(entry, paired) if entry.get("interval") else None,
        "interval": st.interval_text(entry, paired) if entry.get("interval") else None,
        "n": st.n_text(entry),
        "text": st.cell_text(entry, paired),
        "title": st.cell_title(entry, paired, where),
    }


def _record(entry: dict, suite: str, task: str, length: int) -> dict:
    iv = entry.get("interval") or [None, None]
    return {
        "suite": suite,
        "task": task,
        "length": length,
        "status": st.status(entry),
        "estimate": entry.get("estimate"),
        "low": iv[0],
        "high": iv[1],
        "n": entry["n"],
        "fixed_n": entry["fixed_n"],
        "pool": entry["pool"],
        "seen": entry["seen"],
        "stopped": entry["stopped"],
        "tasks": entry.get("tasks") or [],
    }
