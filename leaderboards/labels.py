"""The leaderboard's labels and orders: suite names, lengths, task lists and run paths as shown.

    from leaderboards.labels import format_length, path_label, suite_label, suite_rank
    suite_label("ruler-llama2")          # "RULER llama2"
    sorted(names, key=suite_rank)        # the declared column-group order

Shared by the board (leaderboards.build), its chart series (leaderboards.series) and the diagnostic
section (leaderboards.diagnostic), so each shows a suite, a length and a path the same way.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.lengths import format_length as _format_length

# Suite labels, "higher is better" and the column-group order are declared by the suites
# themselves (tasks.registry.register_suite); unknown suites show their own name.


def declared(name: str):
    """The suite's declaration (tasks.registry.register_suite), None when no family declares it."""
    from tasks.registry import suite_info

    return suite_info(name)


def format_length(value: int) -> str:
    """Length label; 0 is the length tasks without length control (LongBench, MMLU) are stored at."""
    return "any length" if int(value) == 0 else _format_length(int(value))


def suite_label(name: str, tasks: list[str] | None = None) -> str:
    """ "ruler" -> RULER, "ruler-llama2" -> RULER llama2, "longbench-icl" -> LongBench ICL; a suite
    no family declares (`harness eval --tasks a,b` writes "custom") is named by its `tasks`."""
    info = declared(name)
    if info is not None and info.label:
        return info.label
    head, _, rest = name.partition("-")
    head_info = declared(head) if rest else None
    if head_info is not None and head_info.label:  # a variant of a labelled suite
        return f"{head_info.label} {rest.upper() if len(rest) <= 3 else rest}"
    if info is None and tasks:
        return tasks_label(tasks)
    return name


TASKS_SHOWN = 4  # a longer task list is cut ("+N more"); the column titles and the drill-down list them all


def tasks_label(tasks: list[str]) -> str:
    """ "RULER: niah_single_1, vt": the tasks, after the label of the smallest top-level declared
    suite that holds them all (composite suites such as "paper" do not count; no label when the
    tasks come from several suites)."""
    from tasks.registry import all_suites

    tasks = list(dict.fromkeys(tasks))
    top = {
        suite: set(members)
        for suite, members in all_suites().items()
        if "-" not in suite and getattr(declared(suite), "label", None)
    }
    # A suite that contains another whole top-level suite is a bundle of families, not a home.
    homes = sorted(
        (len(members), suite)
        for suite, members in top.items()
        if set(tasks) <= members and not any(other < members for other in top.values())
    )
    shown = ", ".join(TASK_LABELS.get(t, t) for t in tasks[:TASKS_SHOWN])
    if len(tasks) > TASKS_SHOWN:
        shown += f", +{len(tasks) - TASKS_SHOWN} more"
    return f"{suite_label(homes[0][1])}: {shown}" if homes else shown


def lower_is_better(name: str) -> bool:
    """Suites scored so that lower is better (perplexity): no "best" mark, colour scale reversed."""
    info = declared(name)
    return info is not None and not info.higher_is_better


def suite_rank(name: str) -> tuple:
    """Column-group order: the declared order of the suite (or of the suite it is a variant of)."""
    for candidate in (name, name.partition("-")[0]):
        info = declared(candidate)
        if info is not None and info.order is not None:
            return (info.order, name)
    return (float("inf"), name)


def is_ruler(name: str) -> bool:
    """RULER-type suites get wAvg and effective-length columns (every length-controlled suite is
    charted: leaderboards.series)."""
    return name == "ruler" or name.startswith("ruler-")


TASK_LABELS = {"mmlu": "MMLU", "hellaswag": "HellaSwag"}


def path_label(path: str, root: Path | None) -> str:
    """`path` relative to `root` when it lies under it (a relative path counts from the current
    directory, as `harness eval` recorded it), else as recorded."""
    if root is None or not path or path.startswith("hub:"):
        return path
    try:
        return Path(path).expanduser().resolve().relative_to(root.resolve()).as_posix() or "."
    except (ValueError, OSError):
        return path
