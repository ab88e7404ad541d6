"""The one validator of results.json (docs/contracts.md), used by every reader.

    from harness.results_schema import validate_results
    data = validate_results(json.loads(text), "results/anchor/results.json")   # UserError if malformed

`harness report` (harness.aggregate.load_results) and `harness leaderboard`
(leaderboards.build.load_runs) both call it, so a file one of them accepts the other accepts too,
and nothing malformed reaches the table or page code as a KeyError/TypeError. It checks what
those readers use: types of the run, provenance and every suite block, numeric finite statistics,
integer length keys. Fields beyond these are passed through untouched (the schema grows by adding
fields; a reader ignores what it does not know).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from harness.errors import UserError

# The newest results.json this harness writes and reads (older ones are read too). 2 added
# intervals (ci_low/ci_high), per-sample "samples" blocks, "depth_heatmap", "intervals" and
# provenance "throughput" -- all optional, so version-1 files still read.
SCHEMA_VERSION = 2
_FIX = "it does not follow the results.json schema (re-create it with `harness eval`)"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_stats(value: Any) -> bool:
    """A statistics block over checkpoints: finite mean and std, a positive count n."""
    return (
        isinstance(value, dict)
        and _number(value.get("mean"))
        and _number(value.get("std", 0.0))
        and _int(value.get("n", 1))
        and value.get("n", 1) >= 1
    )


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def validate_results(data: Any, path: str | Path) -> dict:
    """data (parsed JSON) if it is a results.json this harness can read; else a UserError naming path."""

    def bad(what: str) -> NoReturn:
        raise UserError(f"{path}: {what}; {_FIX}")

    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(
            f"{path} is not a harness results file (no schema_version/suites): pass a results.json written by harness eval"
        )
    if version > SCHEMA_VERSION:
        raise UserError(
            f"{path} has results schema_version {version}, this harness reads {SCHEMA_VERSION}: upgrade the harness"
        )
    run = data.get("run")
    if not isinstance(run, dict):
        bad('"run" is missing or not an object')
    if not isinstance(run.get("name"), str) or not run["name"]:
        bad('"run.name" is missing')
    for key in ("model", "mode"):
        value = run.get(key)
        if value is not None and not isinstance(value, (str, list)):
            bad(f'"run.{key}" is not text')
    ckpts = run.get("checkpoints", [])
    if not isinstance(ckpts, list) or not all(isinstance(c, dict) for c in ckpts):
        bad('"run.checkpoints" is not a list of objects')
    for c in ckpts:
        if c.get("step") is not None and not _int(c["step"]):
            bad(f"checkpoint step {c['step']!r} is not an integer")
        if not isinstance(c.get("path", ""), str):
            bad(f"checkpoint path {c['path']!r} is not text")
    prov = data.get("provenance", {})
    if not isinstance(prov, dict):
        bad('"provenance" is not an object')
    for key in ("package_version", "git_hash", "created"):
        if prov.get(key) is not None and not isinstance(prov[key], str):
            bad(f'"provenance.{key}" is not text')
    suites = data.get("suites")
    if not isinstance(suites, dict) or not suites:
        bad('"suites" is missing or empty')
    for name, suite in suites.items():
        _validate_suite(name, suite, bad)
    return data


def _validate_suite(name: str, suite: Any, bad: Callable[[str], NoReturn]) -> None:
    if not isinstance(suite, dict):
        bad(f"suite {name!r} is not an object")
    for key in ("tasks", "evaluated"):
        if not _str_list(suite.get(key)):
            bad(f'suite {name!r} has no "{key}" list of task names')
    lengths = suite.get("lengths")
    if not isinstance(lengths, list) or not all(_int(L) for L in lengths):
        bad(f'suite {name!r} has no "lengths" list of integers')
    if not _str_list(suite.get("excluded", [])):
        bad(f'suite {name!r} "excluded" is not a list of task names')
    for key in ("per_task", "per_length", "summary"):
        if not isinstance(suite.get(key), dict):
            bad(f'suite {name!r} has no "{key}" object')
    for key in ("unavailable", "per_task_summary", "categories", "unavailable_lengths"):
        if not isinstance(suite.get(key, {}), dict):
            bad(f'suite {name!r} "{key}" is not an object')
    for task, by_len in suite["per_task"].items():
        if not isinstance(by_len, dict) or not all(_is_stats(s) for s in by_len.values()):
            bad(f"suite {name!r} task {task!r} has a score without a numeric mean")
        for length in by_len:
            _length_key(length, bad)
    for length, stats in suite["per_length"].items():
        _length_key(length, bad)
        if not _is_stats(stats):
            bad(f"suite {name!r} length {length} has no numeric mean")
        for key in ("tasks_covered", "tasks_total"):
            if not _int(stats.get(key, 0)):
                bad(f'suite {name!r} length {length} "{key}" is not an integer')
    for cat, by_len in (suite.get("categories") or {}).items():
        if not isinstance(by_len, dict) or not all(_is_stats(s) for s in by_len.values()):
            bad(f"suite {name!r} category {cat!r} has a score without a numeric mean")
        for length in by_len:
            _length_key(length, bad)
    for task, summ in (suite.get("per_task_summary") or {}).items():
        if not isinstance(summ, dict) or not all(_is_stats(s) for s in summ.values()):
            bad(f"suite {name!r} per_task_summary of {task!r} has a score without a numeric mean")
    for task, by_len in (suite.get("unavailable_lengths") or {}).items():
        if not isinstance(by_len, dict):
            bad(f"suite {name!r} unavailable_lengths of {task!r} is not an object")
        for length in by_len:
            _length_key(length, bad)
    summary = suite["summary"]
    for key in ("avg", "wavg_inc", "wavg_dec"):
        if key in summary and not _is_stats(summary[key]):
            bad(f'suite {name!r} summary "{key}" has no numeric mean')
    for key in ("tasks_covered", "tasks_total", "lengths_covered", "lengths_total"):
        if summary.get(key) is not None and not _int(summary[key]):
            bad(f'suite {name!r} summary "{key}" is not an integer')
    eff = summary.get("effective_length", {})
    if not isinstance(eff, dict):
        bad(f'suite {name!r} summary "effective_length" is not an object')
    if eff.get("threshold") is not None and not _number(eff["threshold"]):
        bad(f"suite {name!r} effective-length threshold {eff['threshold']!r} is not a number")
    if eff.get("value") is not None and not _int(eff["value"]):
        bad(f"suite {name!r} effective length {eff['value']!r} is not an integer")


def _length_key(key: Any, bad: Callable[[str], NoReturn]) -> int:
    try:
        return int(key)
    except (TypeError, ValueError):
        bad(f"length key {key!r} is not an integer")
