"""The length rule of a registered task, for every reader of lengths from outside (issue 49):
`harness import` (harness.imports.cells), `harness eval` and `harness report` reading records
(harness.pipeline.record_checks) and `harness report` / `harness leaderboard` reading results.json.

    from tasks.length_rule import task_length_problem, results_length_problem
    task_length_problem("niah_single_1", 0)      # "niah_single_1: length 0 is outside 250..1048576, ..."
    results_length_problem(results)              # the first per-task cell no task can have, or None

The range itself is harness.core.lengths.length_problem: a length-controlled task's lengths are the
ones --lengths takes (a RULER cell at length 0 or 10^20 is a file's mistake, never averaged in);
another task's are 0 or a token budget. A task the registry does not know is not judged here.
"""

from __future__ import annotations

from functools import cache

from harness.core.lengths import length_problem


@cache
def _length_controlled(task: str, protocol: str | None) -> bool | None:
    """Whether the task is length-controlled under the protocol (its default when None); None for a
    task the registry does not know, or a protocol it does not offer."""
    from tasks.registry import all_tasks

    cls = all_tasks().get(task)
    if cls is None:
        return None
    made = cls()
    if protocol is not None:
        if protocol not in made.protocols:
            return None
        made.set_protocol(protocol)
    return bool(made.length_controlled)


def task_length_problem(task: str, length: int, protocol: str | None = None) -> str | None:
    """Why `length` cannot be one of the task's (one phrase naming the task), or None."""
    controlled = _length_controlled(task, protocol)
    if controlled is None:
        return None
    problem = length_problem(length, controlled)
    return f"{task}: {problem}" if problem else None


def results_length_problem(results: dict) -> str | None:
    """The first per-task length key of a validated results.json that its task cannot have, as
    "suite <s>, <problem>", or None."""
    for suite, block in (results.get("suites") or {}).items():
        protocol = block.get("protocol") if isinstance(block.get("protocol"), str) else None
        for task, cells in (block.get("per_task") or {}).items():
            for key in cells:
                problem = task_length_problem(task, int(key), protocol)
                if problem is not None:
                    return f"suite {suite}, {problem}"
    return None


def check_results_lengths(results: dict, path: object) -> dict:
    """results (a validated results.json) when every per-task length is one its task can have; a
    one-line UserError naming the cell otherwise. Returns results."""
    from harness.core.errors import UserError

    problem = results_length_problem(results)
    if problem is not None:
        raise UserError(
            f"{path}: {problem}: a score at a length its task cannot have would move the averages; "
            "fix the file or import the run again"
        )
    return results
