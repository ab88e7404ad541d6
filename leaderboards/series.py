"""Chart data of the leaderboard model: one block per length-controlled suite.

    from leaderboards.series import chart_series
    series = chart_series(runs, threshold=None)
    series["suites"][0]   # {"suite", "label", "threshold", "by_length", "by_step", "eff_by_step", "eff_by_tokens"}

A suite is charted when its block's lengths are context lengths (harness.pipeline.aggregate's
suite_length_controlled: not a suite stored at length 0, nor one marked length_controlled false)
and it has at least two of them: RULER, NoLiMa, a `--tasks` selection ("custom"), a HELMET-like
suite alike. The page's SVG charts and the figure files (leaderboards.figures) draw these blocks,
so every output shows the same numbers.
"""

from __future__ import annotations

from collections import Counter

from leaderboards.intervals import cell_interval


def length_controlled(suite: dict) -> bool:
    """Whether a results suite block's lengths are context lengths (the block's own flag, else
    anything but length 0 alone), as harness.pipeline.aggregate decides it for the spec."""
    if suite.get("length_controlled") is False:
        return False
    return sorted({int(L) for L in suite.get("lengths") or suite.get("per_length") or []}) not in ([], [0])


def chartable(suite: dict) -> bool:
    """Length-controlled with two or more lengths holding an average (one point is no curve)."""
    return length_controlled(suite) and len({int(L) for L in suite.get("per_length") or {}} - {0}) >= 2


def chart_series(runs: list[dict], threshold: float | None = None) -> dict:
    """Per charted suite: score vs length per run, score vs step per run, effective length vs step.

    `by_length` and `by_step` at the top level repeat the first suite's (the page's first chart)."""
    from leaderboards.labels import suite_label, suite_rank
    from leaderboards.training_curve import eff_by_tokens

    names = sorted({n for r in runs for n, s in r["suites"].items() if chartable(s)}, key=suite_rank)
    blocks = []
    for name in names:
        have = [r for r in runs if name in r["suites"] and chartable(r["suites"][name])]
        thr = _threshold(name, have, threshold)
        blocks.append(
            {
                "suite": name,
                "label": suite_label(name, [t for r in have for t in r["suites"][name]["tasks"]]),
                "threshold": thr,
                "by_length": [_by_length(r, name) for r in have],
                "by_step": [s for s in (_by_step(r, name) for r in have) if s is not None],
                "eff_by_step": [e for e in (_eff_by_step(r, name, thr) for r in have) if e is not None],
                "eff_by_tokens": [e for e in (eff_by_tokens(r, name, thr) for r in have) if e is not None],
            }
        )
    first = blocks[0] if blocks else {"by_length": [], "by_step": []}
    return {"suites": blocks, "by_length": first["by_length"], "by_step": first["by_step"]}


def _threshold(name: str, runs: list[dict], threshold: float | None) -> float | None:
    """--threshold, else the one the runs' results state for this suite (None when they differ)."""
    if threshold is not None:
        return threshold
    stated = {(r["suites"][name]["summary"].get("effective_length") or {}).get("threshold") for r in runs}
    numbers = {float(t) for t in stated if isinstance(t, (int, float))}
    return numbers.pop() if len(numbers) == 1 and len(stated) == 1 else None


def _by_length(run: dict, name: str) -> dict:
    """(length, mean, std, ci_low, ci_high) per length; the interval is None without schema-2 data."""
    points = []
    for L, s in sorted(run["suites"][name]["per_length"].items(), key=lambda kv: int(kv[0])):
        if int(L) == 0:
            continue
        iv = cell_interval(s)
        points.append((int(L), s["mean"], s.get("std"), iv[0] if iv else None, iv[1] if iv else None))
    return {"run": run["run"]["name"], "points": points}


def _step_table(suite: dict) -> dict[int, dict[int, float]] | None:
    """length -> {step: within-checkpoint mean}; None when a checkpoint has no step (labelled by path)."""
    table = {}
    for L, s in sorted(suite["per_length"].items(), key=lambda kv: int(kv[0])):
        raw = s.get("per_step") or {}
        if not all(str(k).lstrip("-").isdigit() for k in raw):
            return None
        if raw and int(L) != 0:
            table[int(L)] = {int(k): float(v) for k, v in raw.items()}
    return table


def _by_step(run: dict, name: str) -> dict | None:
    from leaderboards.labels import format_length

    suite = run["suites"][name]
    table = _step_table(suite)
    if not table:
        return None
    lines = [{"label": format_length(L), "points": sorted(per.items())} for L, per in table.items()]
    counts: Counter = Counter(st for per in table.values() for st in per)
    # Per-step average over lengths, only at steps every length has (the within-checkpoint mean).
    full = sorted(st for st, c in counts.items() if c == len(table))
    avg = [(st, sum(per[st] for per in table.values()) / len(table)) for st in full]
    return {"run": run["run"]["name"], "lines": lines, "avg": avg, "window": _window(suite, counts)}


def _window(suite: dict, counts: Counter) -> list[int] | None:
    """[first, last] step of the checkpoints the table's means average (the stats' `steps`), which
    the step chart shades: the reader sees which part of the curve the headline number stands for."""
    steps = {st for s in suite["per_length"].values() for st in s.get("steps") or [] if isinstance(st, int)}
    steps = steps or set(counts)
    return [min(steps), max(steps)] if steps else None


def _eff_by_step(run: dict, name: str, threshold: float | None) -> dict | None:
    """The effective length at each checkpoint step (the run's one definition, per step's means);
    None with fewer than two steps or no threshold."""
    from harness.core.effective_length import effective_length_value

    table = _step_table(run["suites"][name])
    if not table or threshold is None:
        return None
    counts: Counter = Counter(st for per in table.values() for st in per)
    steps = sorted(st for st, c in counts.items() if c == len(table))
    if len(steps) < 2:
        return None
    points = [(st, effective_length_value({L: per[st] for L, per in table.items()}, threshold)) for st in steps]
    return {"run": run["run"]["name"], "lengths": sorted(table), "points": points, "threshold": threshold}
