"""The leaderboard's columns: which ones each suite group gets, from what its runs evaluated.

    from leaderboards.columns import suite_columns
    cols = suite_columns("ruler", [run["suites"]["ruler"] for run in runs])

A RULER-like suite gets one column per length and its summaries, a suite with categories one per
category (and length), any other suite one per task (and length); every suite may lead with its
published headline (tasks.registry.Headline) and a tasks-covered column. Each column is a dict
with a key (what its cells show: leaderboards.cells), a label, its header group and a help text.
"""

from __future__ import annotations

from leaderboards.labels import TASK_LABELS, format_length, is_ruler, suite_label

TASK_ORDER = ["mmlu", "hellaswag"]  # the paper's table order
SUMMARY_LABELS = {"avg": "Avg", "wavg_inc": "wAvg (inc)", "wavg_dec": "wAvg (dec)"}
SUMMARY_HELP = {
    "avg": "Mean over lengths of the per-length average",
    "wavg_inc": "Weighted average, weights increasing with length (RULER)",
    "wavg_dec": "Weighted average, weights decreasing with length (RULER)",
}
# Columns whose cells are text (a count, a length), not scores to colour or difference.
TEXT_KEYS = ("tasks", "eff", "eff_nolima")


def suite_lengths(suite: dict) -> list[int]:
    """Every length a suite block names: those asked for and those with an average."""
    return sorted({int(x) for x in suite["lengths"]} | {int(x) for x in suite["per_length"]})


def tasks_covered(suite: dict) -> tuple[int, int]:
    """(tasks with scores, tasks in the suite)."""
    summary = suite["summary"]
    total = summary.get("tasks_total", len(suite["tasks"]))
    covered = summary.get("tasks_covered", len(suite["evaluated"]))
    return covered, total


def suite_columns(name: str, suites: list[dict]) -> list[dict]:
    """Columns of one suite group, from the union over runs of what they evaluated."""
    label = suite_label(name, [t for s in suites for t in s["tasks"]])
    note = _subset_note(name, suites)
    cols: list[dict] = []
    many_tasks = any(len(s["tasks"]) > 3 for s in suites) or any(
        tasks_covered(s)[0] != tasks_covered(s)[1] for s in suites
    )
    if many_tasks:
        cols.append({"key": "tasks", "label": "Tasks", "help": "Tasks with scores / tasks in the suite"})
    cols += headline_columns(label, suites)
    if is_ruler(name) or not any(s.get("categories") for s in suites) and all(len(s["tasks"]) > 3 for s in suites):
        cols += _length_columns(name, suites)
    elif any(s.get("categories") for s in suites):
        cols += _category_columns(label, suites)
    else:
        cols += _task_columns(suites)
    cols += _nolima_columns(name, suites)
    for c in cols:
        c.setdefault("group", label)
        if note:
            c["subset"] = note  # the page's header group says it; the Tasks column says it everywhere
        c.update(suite=name, id=f"{name}/{c['key']}")
        c["numeric"] = c["key"] not in TEXT_KEYS
    return cols


def _subset_note(name: str, suites: list[dict]) -> str:
    """ "3 of 13 tasks" when every row scored only part of a declared suite: its averages are the
    subset's, and the page's header says so."""
    from leaderboards.labels import declared

    counts = {(len(s["evaluated"]), len(s["tasks"])) for s in suites}
    if declared(name) is None or any(k >= n for k, n in counts):
        return ""
    if len(counts) == 1:
        k, n = next(iter(counts))
        return f"{k} of {n} tasks"
    return "subsets of its tasks"


def _length_columns(name: str, suites: list[dict]) -> list[dict]:
    """A column per length (the average over tasks), the summaries, and RULER's effective length."""
    lengths = sorted({L for s in suites for L in suite_lengths(s)})
    cols = [
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
    return cols


def _category_columns(label: str, suites: list[dict]) -> list[dict]:
    """A column per category and length, then the average."""
    cats: dict[str, set] = {}
    for s in suites:
        for cat, by_len in (s.get("categories") or {}).items():
            cats.setdefault(cat, set()).update(int(L) for L in by_len)
    order = list(dict.fromkeys(c for s in suites for c in (s.get("categories") or {})))
    cols = []
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
    return cols


def _task_columns(suites: list[dict]) -> list[dict]:
    """A column per task (and length, where a task has several), in the paper's order. No average:
    a two-task short suite reads better without an average nobody reports."""
    tasks: dict[str, set] = {}
    for s in suites:
        for t in s["tasks"]:
            tasks.setdefault(t, set()).update(int(L) for L in (s["per_task"].get(t) or {}))
    multi = any(len(v) > 1 for v in tasks.values())
    cols = []
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
    return cols


def _nolima_columns(name: str, suites: list[dict]) -> list[dict]:
    """NoLiMa's own effective length, where its results carry one."""
    if not any((s["summary"].get("effective_length_nolima") or {}).get("base_score") is not None for s in suites):
        return []
    if not (name == "nolima" or name.startswith("nolima-")):
        return []
    return [
        {
            "key": "eff_nolima",
            "label": "Eff. length",
            "help": "NoLiMa's effective length: longest length whose score stays at or above 85% of the base "
            "score (the mean at lengths up to 1K) at it and every shorter length",
        }
    ]


def headline_columns(label: str, suites: list[dict]) -> list[dict]:
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
