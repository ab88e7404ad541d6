"""Records whose fields contradict themselves: kept out of the averages and reported.

    from harness.pipeline.record_checks import split_inconsistent
    records, report = split_inconsistent(records)   # report: {"count", "reasons": {reason: n}} or None

The store's schema (harness/core/store_schema.py) checks each field alone; a hand-edited line can
still hold fields that no evaluation writes together. Every record harness eval writes carries its
task's name and metric (harness/pipeline/engine.py), its suite label (the --suite it ran, or
"custom"), the protocol the task was shown (settings.protocol, for tasks that offer protocols), a
length from the task's own length rule (Task.task_lengths) and its prompt's tokens. A record of a
registered task (tasks.registry) is inconsistent when:

- its suite is a registry suite that does not hold its task;
- its metric is not its task's metric;
- its protocol is not one its task offers;
- its length is outside the range every reader of lengths applies (harness.core.lengths
  length_problem: 250..1m for a length-controlled task, as --lengths takes; else 0..2**24);
- its length is not one its task can have under that protocol, where the task's lengths are a
  fixed set: 0 for prompts without a context to fit (MMLU/HellaSwag, BABILong 0K, LongBench v2
  without its document), and under "reference" NoLiMa's haystack sizes (multiples of 250),
  HELMET's config lengths and BABILong's released lengths;
- its num_tokens exceeds its length where the length is the whole prompt + generation budget the
  prompt was fitted to (a length-controlled generation task whose length is a budget: RULER, ICL,
  HELMET, and NoLiMa and BABILong under exact-length).

A task the registry does not know is checked against the suite its record names alone (a registry
suite that does not hold it is a contradiction, as for a known task); otherwise there is nothing to
check it against, and such records are legitimate (a renamed task in an older store, a task
registered at run time through the Python API, filed as "custom"); re-aggregation reads them
(harness.pipeline.reaggregate). A record naming
no protocol for a task that offers some (written before protocols existed) gets no length check:
which rule made its length is not known.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tasks.base import Task


@dataclass(frozen=True)
class _PossibleLengths:
    """The lengths a task can have: a test and the words that name them in a reason."""

    holds: Callable[[int], bool]
    description: str


def split_inconsistent(records: list[dict]) -> tuple[list[dict], dict | None]:
    """(the records that can be what they say, {"count", "reasons": {reason: records}} of the
    others, None when there are none). Reasons are in the order first met."""
    registry = _Registry()
    kept: list[dict] = []
    reasons: dict[str, int] = {}
    for r in records:
        reason = _inconsistency(r, registry)
        if reason is None:
            kept.append(r)
        else:
            reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return kept, None
    return kept, {"count": sum(reasons.values()), "reasons": reasons}


class _Registry:
    """The registered tasks and suites, with one task object per (task, protocol)."""

    def __init__(self) -> None:
        from tasks.registry import all_suites, all_tasks

        self.classes: dict[str, type[Task]] = all_tasks()
        self.suites = {name: set(tasks) for name, tasks in all_suites().items()}
        self._made: dict[tuple[str, str], Task] = {}

    def task(self, name: str, protocol: str = "") -> Task:
        if (name, protocol) not in self._made:
            task = self.classes[name]()
            if protocol:
                task.set_protocol(protocol)
            self._made[(name, protocol)] = task
        return self._made[(name, protocol)]


def _inconsistency(r: dict, registry: _Registry) -> str | None:
    """Why record r cannot be what it says (one phrase), or None when nothing contradicts."""
    name = r["task"]
    suite = r.get("suite")
    # first, for a task the registry does not know too: a record of suite "ruler" naming a task
    # RULER lacks would be shown as a RULER task and move its headline (issue 49)
    if suite in registry.suites and name not in registry.suites[suite]:
        return f"suite {_shown(suite)} does not hold task {_shown(name)}"
    if name not in registry.classes:  # nothing else to check it against (see the module docstring)
        return None
    task = registry.task(name)
    metric = r.get("metric")
    if metric is not None and metric != task.metric:
        return f"metric {_shown(metric)} is not {name}'s ({task.metric!r})"
    if task.protocols:
        protocol = (r.get("settings") or {}).get("protocol")
        if protocol is None:  # written before tasks had protocols: the rule of its length is not known
            return None
        if protocol not in task.protocols:
            return f"protocol {_shown(protocol)} is not one {name} offers ({', '.join(task.protocols)})"
        task = registry.task(name, protocol)
    return _length_problem(task, int(r["length"]), r.get("num_tokens"))


def _length_problem(task: Task, length: int, num_tokens: int | None) -> str | None:
    from harness.core.lengths import length_problem

    under = f" under protocol {task.protocol!r}" if task.protocol else ""
    outside = length_problem(length, bool(task.length_controlled))  # the range every reader applies
    if outside is not None:
        return f"{task.name}{under}: {outside}"
    possible = _possible_lengths(task)
    if possible is not None and not possible.holds(length):
        return f"length {length} is not one {task.name} can have{under} ({possible.description})"
    if num_tokens is not None and num_tokens > length and _length_is_whole_budget(task):
        return (
            f"num_tokens {num_tokens} exceeds length {length}, {task.name}'s whole budget (prompt + generation){under}"
        )
    return None


def _possible_lengths(task: Task) -> _PossibleLengths | None:
    """The fixed set of lengths the task (with its protocol set) can have, by the length rule it
    runs (its task_lengths); None where any length can be asked for (length-controlled tasks, and
    fixed datasets cut to a budget the run chooses)."""
    from tasks.babilong.released import LABELS
    from tasks.babilong.tasks import BabilongTask
    from tasks.helmet.reference import RUNS, ReferenceProtocol
    from tasks.nolima.tasks import NoLiMaTask

    reference = task.protocol == "reference"
    if isinstance(task, BabilongTask):  # 0K tasks at 0; the released sets' labels under "reference"
        if task.no_context:
            return _ZERO
        return _one_of(set(LABELS.values()), "the released sets' lengths") if reference else None
    if isinstance(task, NoLiMaTask):  # tasks.nolima.protocol: under "reference" a length is the haystack's size
        return (
            _PossibleLengths(_nolima_haystack, "NoLiMa's haystack sizes: multiples of 250 tokens")
            if reference
            else None
        )
    if isinstance(task, ReferenceProtocol):  # HELMET's configs under "reference"
        return _one_of(set(RUNS[task.name]), "HELMET's config lengths") if reference and task.name in RUNS else None
    base_rule = type(task).task_lengths is Task.task_lengths
    if base_rule and not task.length_controlled and (task.kind != "generate" or task.no_context):
        return _ZERO  # Task.task_lengths: a prompt without a context to fit runs at 0
    return None


def _length_is_whole_budget(task: Task) -> bool:
    """Whether a record's length is the whole prompt + generation budget its prompt was fitted to
    (harness.pipeline.sample_plan fits these to the length, less a chat template's tokens)."""
    return task.kind == "generate" and bool(task.length_controlled) and task.length_is_budget()


def _one_of(lengths: set[int], what: str) -> _PossibleLengths:
    shown = ", ".join(str(L) for L in sorted(lengths))
    return _PossibleLengths(lengths.__contains__, f"{what}: {shown}" if len(lengths) > 1 else what)


_ZERO = _one_of({0}, "0 only: its prompts have no context to fit")


def _nolima_haystack(length: int) -> bool:
    """A haystack size tasks.nolima.protocol.reference_length maps to itself (what every reference
    record holds); 0 names none."""
    from harness.core.errors import UserError
    from tasks.nolima.protocol import reference_length

    try:
        return length > 0 and reference_length(length) == length
    except UserError:
        return False


def _shown(value: object) -> str:
    """A field's value as a reason quotes it: its repr (one line, escapes shown), cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
