"""Task and suite registry.

Task families register themselves when their module is imported; `get_task` imports the
family modules on first use so `harness --help` stays light.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import TypeVar

from harness.core.errors import UserError
from tasks.base import Task

T = TypeVar("T", bound=Task)

_TASKS: dict[str, type[Task]] = {}
_SUITES: dict[str, list[str]] = {}
_SUITE_HELP: dict[str, str] = {}
_SUITE_INFO: dict[str, SuiteInfo] = {}
_HEADLINES: dict[str, Headline] = {}

# Family modules that register tasks/suites on import. A module that fails to import is an error:
# skipping it would silently drop a whole task family.
_FAMILY_MODULES = [
    "tasks.ruler",
    "tasks.longbench",
    "tasks.longbench_v2",
    "tasks.babilong",
    "tasks.icl",
    "tasks.short",
    "tasks.ppl",
    "tasks.helmet",
    "tasks.nolima",
    "tasks.graphwalks",
    "tasks.mrcr",
    "tasks.aa_lcr",
    "tasks.suites",
]
_loaded = False


def register_task(cls: type[T]) -> type[T]:
    """Class decorator: make a task reachable by name."""
    assert cls.name not in _TASKS or _TASKS[cls.name] is cls, f"task {cls.name} registered twice"
    _TASKS[cls.name] = cls
    # Families build some task classes in a loop (type(...)); give each a module-level name so
    # pickle finds it: local --data-parallel workers receive tasks by pickle.
    module = sys.modules[cls.__module__]
    if getattr(module, cls.__qualname__, None) is not cls:
        assert getattr(module, cls.__name__, cls) is cls, f"{cls.__module__}.{cls.__name__} names something else"
        cls.__qualname__ = cls.__name__
        setattr(module, cls.__name__, cls)
    return cls


@dataclass(frozen=True)
class SuiteInfo:
    """How reports show a suite: its label, whether a higher score is better, and its place among
    the column groups (lower first; suites without one come after, alphabetically)."""

    label: str | None = None
    higher_is_better: bool = True
    order: int | None = None


@dataclass(frozen=True)
class Headline:
    """The number a suite's reference publishes, and how it is averaged (shown with it).

    groups: headline name -> {category: [tasks]}. At each length a group's value is the mean over
    its categories of each category's mean over its tasks (LongBench v1's per-language Avg, HELMET's
    mean of its 7 category means); with weighting "samples" a category pools its tasks' samples
    (LongBench v2's Overall/Easy/Hard/...). Categories none of whose tasks ran are left out and the
    value says how many it covers."""

    label: str
    groups: dict[str, dict[str, list[str]]]
    weighting: str | None = None

    def to_spec(self, names: list[str]) -> dict | None:
        """The headline restricted to the tasks of a run (None when it covers none of them)."""
        keep = set(names)
        groups = {
            g: {c: [t for t in ts if t in keep] for c, ts in cats.items() if any(t in keep for t in ts)}
            for g, cats in self.groups.items()
        }
        groups = {g: cats for g, cats in groups.items() if cats}
        if not groups:
            return None
        totals = {g: len(cats) for g, cats in self.groups.items() if g in groups}
        spec: dict = {"label": self.label, "groups": groups, "categories_total": totals}
        if self.weighting:
            spec["weighting"] = self.weighting
        return spec


def register_suite(
    name: str,
    task_names: list[str],
    help: str = "",
    *,
    label: str | None = None,
    higher_is_better: bool = True,
    order: int | None = None,
    headline: Headline | None = None,
) -> None:
    _SUITES[name] = list(task_names)
    _SUITE_HELP[name] = help
    _SUITE_INFO[name] = SuiteInfo(label, higher_is_better, order)
    if headline is not None:
        _HEADLINES[name] = headline


def suite_headline(name: str) -> Headline | None:
    """The published headline a suite declared (None: its suite average is its headline)."""
    _load_families()
    return _HEADLINES.get(name)


def suite_info(name: str) -> SuiteInfo | None:
    """What the suite declared when it registered; None for a name no family registers."""
    _load_families()
    return _SUITE_INFO.get(name)


def _load_families() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in _FAMILY_MODULES:
        importlib.import_module(mod)


def all_tasks() -> dict[str, type[Task]]:
    _load_families()
    return dict(_TASKS)


def all_suites() -> dict[str, list[str]]:
    _load_families()
    return {k: list(v) for k, v in _SUITES.items()}


def get_task(name: str) -> Task:
    _load_families()
    if name not in _TASKS:
        raise UserError(f"unknown task {name!r}: choose from {', '.join(sorted(_TASKS))}")
    return _TASKS[name]()


def narrow_suite(
    suite: str | None, tasks: list[str] | None, exclude: list[str] | None
) -> tuple[str | None, list[str], list[str]]:
    """(suite, tasks, exclude) as a run evaluates them. `--suite X --tasks T` is X with its other
    tasks excluded, so X's table counts k of its N tasks (never an average over T shown as all of
    X); a task outside X, or an unknown X, is a UserError instead of --suite dropped in silence."""
    if not (suite and tasks):
        return suite, list(tasks or []), list(exclude or [])
    _load_families()
    if suite not in _SUITES:
        raise UserError(f"unknown suite {suite!r}: choose from {', '.join(sorted(_SUITES))}")
    members = _SUITES[suite]
    outside = [t for t in tasks if t not in members]
    if outside:
        raise UserError(
            f"--tasks names {outside[0]!r}, which is not in --suite {suite}: drop --suite to run the tasks as a "
            f"set of their own, or choose tasks of {suite} ({', '.join(members)})"
        )
    twice = next((n for i, n in enumerate(tasks) if n in tasks[:i]), None)
    if twice is not None:
        raise UserError(f"--tasks names {twice!r} twice: list each task once")
    rest = [t for t in members if t not in tasks]
    return suite, [], list(dict.fromkeys([*(exclude or []), *rest]))


def resolve_tasks(suite: str | None, tasks: list[str] | None = None, exclude: list[str] | None = None) -> list[str]:
    """Task names from --suite, --tasks and --exclude (comma lists already split)."""
    narrow_suite(suite, tasks, exclude)  # --suite beside --tasks: the suite is known and holds them
    _load_families()
    for flag, given in (("--tasks", tasks), ("--exclude", exclude)):
        twice = next((n for i, n in enumerate(given or []) if n in (given or [])[:i]), None)
        if twice is not None:
            raise UserError(f"{flag} names {twice!r} twice: list each task once")
    if tasks:
        names = list(tasks)
    elif suite:
        if suite not in _SUITES:
            raise UserError(f"unknown suite {suite!r}: choose from {', '.join(sorted(_SUITES))}")
        names = list(_SUITES[suite])
    else:
        raise UserError("no tasks chosen: pass --suite NAME or --tasks a,b,c")
    for n in names + list(exclude or []):
        if n not in _TASKS:
            raise UserError(f"unknown task {n!r}: choose from {', '.join(sorted(_TASKS))}")
    names = [n for n in names if n not in set(exclude or [])]
    if not names:
        raise UserError("--exclude removed every task: nothing to run")
    return names


def split_csv(value: str | None) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else []
