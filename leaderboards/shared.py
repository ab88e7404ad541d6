"""Task-by-task columns shared by rows whatever suite they filed a task under.

    from leaderboards.shared import shared_columns, shared_cell, shared_delta_interval
    cols, replaced = shared_columns(runs, columns)   # new columns, ids of suite columns they replace

`harness eval --tasks niah_single_1,vt` files its scores under suite "custom"; an lm-eval import of the
same tasks files them under "ruler" (2 of 13 tasks); a LongBench `--tasks trec` run is "custom" beside
an import's "longbench" (1 of 21). Suite columns never meet across suites, so such rows shared no
cell. Every task of a task subset (a suite no family declares: a `--tasks` selection) gets a
column per length here for every row that scored it, in whichever suite: a header group per task,
a column per length. A task whose length is no context length (LongBench: the budget it was cut
to, 0 for lm-eval's "any length") gets one column, each row showing its own cell. Two rows at
least must have the cell, filed under different suites (or under one whose columns average task
sets that differ between them), or the suite columns already compare it.

The delta view pairs such a column by task and length: the samples both rows scored (the same
task version, dataset hash, seed and index) are resampled with one draw; a row without per-sample
scores but with its harness's standard error is drawn from the normal of that error; otherwise the
two rows are resampled on their own (unpaired), as harness.core.paired does for our runs.
"""

from __future__ import annotations

import numpy as np

from harness.core import stats
from harness.core.paired import cell_replicates, normal_replicates, paired_replicates, shared_indices
from leaderboards.cells import missing, stat_cell
from leaderboards.labels import TASK_LABELS, declared, format_length, suite_label, suite_rank

SHARED = "(tasks side by side)"  # the columns' suite key: no results suite is named so


def _length_free(task: str, suite: dict) -> bool:
    """Whether the task's lengths are budgets, not context lengths (LongBench, a 0-length import)."""
    from tasks.registry import all_tasks

    cls = all_tasks().get(task)
    if cls is not None:
        return not cls.length_controlled
    return suite.get("length_controlled") is False or sorted(int(L) for L in suite["per_task"].get(task, {})) == [0]


def _is_selection(name: str) -> bool:
    """A task subset: a suite no family declares (`harness eval --tasks a,b` files it as "custom").
    A declared suite with tasks missing (an import's 3 of 13) is a suite subset: its own columns
    say so, and its tasks join these columns when a selection holds them."""
    return declared(name) is None


def homes(run: dict, task: str) -> dict[int, str]:
    """{length: suite} where the run scored the task (the first suite in the page's order)."""
    out: dict[int, str] = {}
    for name in sorted(run["suites"], key=suite_rank):
        for L in run["suites"][name]["per_task"].get(task) or {}:
            out.setdefault(int(L), name)
    return out


def shared_columns(runs: list[dict], columns: list[dict]) -> tuple[list[dict], set[str]]:
    """The shared task columns and the ids of the suite columns they make redundant (a suite's own
    per-task column whose every row shows the same cell here)."""
    tasks: dict[str, bool] = {}  # task -> length-free, in the order the runs list them
    for run in runs:
        for name in sorted(run["suites"], key=suite_rank):
            suite = run["suites"][name]
            if _is_selection(name):
                for t in suite["evaluated"]:
                    tasks.setdefault(t, _length_free(t, suite))
    have = {c["id"] for c in columns}
    cols: list[dict] = []
    for t, free in tasks.items():
        where = {r["run"]["name"]: homes(r, t) for r in runs}
        if free:
            keys: list[int | None] = [None]
        else:
            keys = [L for L in sorted({L for h in where.values() for L in h})]
        cols += [c for L in keys if _needed(c := _column(t, L, where), runs, have)]
    return cols, _replaced(runs, cols, have)


def _needed(col: dict, runs: list[dict], have: set[str]) -> bool:
    """Whether a shared column shows a comparison the suite columns do not: two rows at least have the
    cell, and they filed it under different suites, or under one suite whose columns average task
    sets that differ between them."""
    at = col["homes"]
    if len(at) < 2:
        return False
    suites = {home for _, home in at.values()}
    if len(suites) > 1:
        return True
    home = next(iter(suites))
    L = next(iter(at.values()))[0]
    if f"{home}/task:{col['task']}:{L}" in have:
        return False
    sets = {frozenset(r["suites"][home]["evaluated"]) for r in runs if home in r["suites"]}
    return len(sets) > 1


def _replaced(runs: list[dict], cols: list[dict], have: set[str]) -> set[str]:
    """Suite columns `<suite>/task:<t>:<L>` whose every row shows the same cell in a shared column."""
    out = set()
    for c in cols:
        for L, home in set(c["homes"].values()):
            cid = f"{home}/task:{c['task']}:{L}"
            rows = [r for r in runs if str(L) in (r["suites"].get(home, {}).get("per_task", {}).get(c["task"]) or {})]
            if cid in have and all(c["homes"].get(r["run"]["name"]) == (L, home) for r in rows):
                out.add(cid)
    return out


def _column(task: str, L: int | None, where: dict[str, dict[int, str]]) -> dict:
    """One shared column: the task at L (None: each row's one budget), with each row's (length, suite)."""
    label = TASK_LABELS.get(task, task)
    at: dict[str, tuple[int, str]] = {}
    for run, h in where.items():
        if L is None and len(h) == 1:
            at[run] = next(iter(h.items()))
        elif L is not None and L in h:
            at[run] = (L, h[L])
    n = len(at)
    return {
        "key": f"shared:{task}:{'' if L is None else L}",
        "label": "any length" if L is None else format_length(L),
        "task": task,
        "length": L,
        "group": label,
        "suite": SHARED,
        "id": f"{SHARED}/{task}:{'' if L is None else L}",
        "numeric": True,
        "shared": True,
        "homes": at,
        "help": f"{label}"
        + (f" at {format_length(L)} tokens" if L else " at each row's own budget")
        + f": the {n} rows that scored it, whichever suite they filed it under",
    }


def shared_cell(run: dict, col: dict) -> dict:
    """What `run` shows in a shared column: its own cell of the task, said where it comes from."""
    name = run["run"]["name"]
    got = col["homes"].get(name)
    task, label = col["task"], TASK_LABELS.get(col["task"], col["task"])
    if got is None:
        h = homes(run, task)
        if not h:
            return missing(f"{task} not scored by this run")
        if col["length"] is None:
            return missing(f"{task} scored at several budgets by this run ({', '.join(map(format_length, sorted(h)))})")
        return missing(f"{task} not scored at {format_length(col['length'])} by this run")
    L, home = got
    suite = run["suites"][home]
    where = f"filed under {suite_label(home, suite['tasks'])}"
    if col["length"] is None:
        where += f", budget {format_length(L)}" if L else ", at each document's own length"
    out = stat_cell(suite["per_task"][task][str(L)], f"{label} {format_length(L)}", where)
    out["home"] = home
    return out


def _side(run: dict, col: dict) -> tuple[dict, int, dict | None, list[str]] | None:
    """(stats, length, samples block, checkpoint labels) of the run's cell in a shared column."""
    got = col["homes"].get(run["run"]["name"])
    if got is None:
        return None
    L, home = got
    suite = run["suites"][home]
    block = (suite.get("samples") or {}).get(col["task"], {}).get(str(L))
    labels = list(
        dict.fromkeys(
            k for b in (suite.get("samples") or {}).values() for x in b.values() for k in x.get("scores") or {}
        )
    )
    return suite["per_task"][col["task"]][str(L)], L, block, labels


def shared_delta_interval(run: dict, base: dict, col: dict) -> dict | None:
    """The 95% interval of (run - baseline) in a shared column, paired over the samples both scored."""
    a, b = _side(run, col), _side(base, col)
    if a is None or b is None:
        return None
    (sa, La, ba, la), (sb, Lb, bb, lb) = a, b
    t = col["task"]
    idx = shared_indices(ba, bb) if ba is not None and bb is not None and La == Lb else []
    ra: np.ndarray | None
    rb: np.ndarray | None
    if idx and ba is not None and bb is not None:
        ra, rb = paired_replicates(t, La, ba, la, bb, lb, idx)
    else:
        ra = cell_replicates(t, La, ba, la) if ba is not None else normal_replicates(sa, run["run"]["name"], col["id"])
        rb = cell_replicates(t, Lb, bb, lb) if bb is not None else normal_replicates(sb, base["run"]["name"], col["id"])
    if ra is None or rb is None:
        return None
    from_stderr = [r["run"]["name"] for r, blk in ((run, ba), (base, bb)) if blk is None]
    seed = (run["run"]["name"], base["run"]["name"], col["id"])
    da = stats.over_checkpoints(ra, stats.rng_for(*seed, "run"))
    db = stats.over_checkpoints(rb, stats.rng_for(*seed, "baseline"))
    iv = stats.interval(da - db)
    if iv is None:
        return None
    return {
        "low": iv[0],
        "high": iv[1],
        "significant": stats.significant(*iv),
        "paired_samples": len(idx),
        "unpaired_tasks": [] if idx else [t],
        "from_stderr": from_stderr,
        "level": stats.LEVEL,
    }
