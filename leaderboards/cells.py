"""The leaderboard's cells: a score with its spread, interval and marks, or a dash with its reason.

    from leaderboards.cells import cell, delta_cell
    cell(run, "ruler", column, threshold)          # what the table shows for one run and column
    delta_cell(row, base_row, column, "full", iv)  # the same column minus the baseline's

A cell is a dict: `value` (None where missing; the table sorts and colours by it), `text` (shown),
`title` (the tooltip: how the number came about) and `reason` (why a cell is missing).
"""

from __future__ import annotations

from leaderboards.columns import SUMMARY_LABELS, suite_lengths, tasks_covered
from leaderboards.intervals import cell_interval
from leaderboards.labels import TASK_LABELS, format_length, is_ruler, suite_label


def effective_length(per_length_mean: dict[int, float], threshold: float) -> tuple[int | None, str]:
    """Largest evaluated L with the mean above threshold at every evaluated length <= L."""
    from harness.core.effective_length import BELOW_FIRST, effective_length_value  # the one definition

    value = effective_length_value(per_length_mean, threshold)
    return value, (format_length(value) if value is not None else BELOW_FIRST)


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def fmt_delta(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:+.2f}".replace("-", "−") if round(value, 2) != 0 else "0.00"


def _is_stats(value) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("mean"), (int, float))
        and not isinstance(value.get("mean"), bool)
    )


def stat_cell(stats: dict, what: str, extra: str = "") -> dict:
    """A score cell from a results block (mean, std, min, max, steps, samples, interval)."""
    steps = list(stats.get("steps") or [])
    n = stats.get("n", len(steps) or None)
    parts = [f"{what}: {stats['mean']:.2f}"]
    if stats.get("std") is not None:
        parts[0] += f" ± {stats['std']:.2f} (std over checkpoints)"
    if stats.get("min") is not None and stats.get("max") is not None:
        parts.append(f"min {stats['min']:.2f}, max {stats['max']:.2f}")
    if n is not None:
        parts.append(
            f"{n} checkpoint{'s' if n != 1 else ''}"
            + (f": steps {', '.join('?' if x is None else str(x) for x in steps)}" if steps else "")
        )
    if stats.get("num_samples") is not None:
        parts.append(f"{stats['num_samples']} samples")
    iv = cell_interval(stats)
    if iv is not None:
        how = (
            "its harness's standard error, normal approximation"
            if stats.get("ci_from") == "stderr"
            else "bootstrap over samples and checkpoints"
        )
        parts.append(f"95% interval [{iv[0]:.2f}, {iv[1]:.2f}] ({how})")
    prompt = stats.get("prompt_tokens")
    if isinstance(prompt, (int, float)):
        parts.append(f"prompts: {prompt:,.0f} tokens on average, as counted where they were made")
    if extra:
        parts.append(extra)
    marks = _marks(stats, parts)
    return {
        "marks": marks,
        "degenerate": bool(stats.get("degenerate")) and any(m.startswith("!") for m in marks.split()),
        "bound": stats.get("bound"),
        "ci": list(iv) if iv is not None else None,
        "pm": f"±{(iv[1] - iv[0]) / 2:.1f}" if iv is not None else None,
        "prompt": f"{prompt:,.0f} tok" if isinstance(prompt, (int, float)) else None,
        "value": float(stats["mean"]),
        "std": stats.get("std"),
        "min": stats.get("min"),
        "max": stats.get("max"),
        "n": n,
        "steps": steps,
        "num_samples": stats.get("num_samples"),
        "reason": None,
        "text": fmt(stats["mean"]),
        "title": "\n".join(parts),
    }


def _marks(stats: dict, parts: list[str]) -> str:
    """The cell's marks (and their explanations appended to `parts`): degenerate predictions named
    (harness/core/degenerate.py) and a cell at its floor or ceiling, which separates no runs."""
    from harness.core.degenerate import flags

    marks = []
    shares = stats.get("degenerate") or {}
    for word in flags(shares):
        marks.append(f"!{word}")
    if marks:
        parts.append(
            f"degenerate predictions: {shares['empty']:.0%} empty, {shares['at_max']:.0%} ran to max new tokens, "
            f"{shares['repeat']:.0%} repeat one span (of {shares['n']}): a set-up problem, not a score (harness doctor)"
        )
    bound = stats.get("bound")
    if bound:
        marks.append({"floor": "⊥", "ceiling": "⊤"}.get(bound, "⊥⊤"))
        parts.append(f"at the task's {bound}: the 95% interval reaches it, so this cell cannot tell runs apart")
    return " ".join(marks)


def missing(reason: str) -> dict:
    return {"value": None, "reason": reason, "text": "—", "title": reason}


def task_reason(suite: dict, task: str) -> str:
    """Why a task of the suite has no scores."""
    unavailable = suite.get("unavailable") or {}
    if task in unavailable:
        return f"{task} unavailable: {unavailable[task]}"
    if task in (suite.get("excluded") or []):
        return f"{task} excluded by --exclude"
    return f"{task} not evaluated"


def _samples_at(suite: dict, length: int) -> int | None:
    counts = [s.get("num_samples") for s in (by.get(str(length)) for by in suite["per_task"].values()) if s]
    return sum(counts) if counts and all(c is not None for c in counts) else None


def cell(run: dict, suite_name: str, col: dict, threshold: float | None) -> dict:
    """What `run` shows in column `col` (of suite `suite_name`); `threshold` overrides the results'."""
    suite = run["suites"].get(suite_name)
    label = suite_label(suite_name, suite["tasks"] if suite else None)
    if suite is None:
        return missing(f"no {label} results for this run")
    key = col["key"]
    covered = tasks_covered(suite)
    if key == "tasks":
        return _tasks_cell(suite, covered)
    if key.startswith("len:"):
        return _length_cell(suite, suite_name, label, col["length"], covered, threshold)
    if key in SUMMARY_LABELS:
        return _summary_cell(suite, label, key, covered)
    if key == "eff":
        return _eff_cell(suite, threshold)
    if key == "eff_nolima":
        return _nolima_eff_cell(suite)
    if key.startswith("hl:"):
        return _headline_cell(suite, label, col)
    if key.startswith("cat:"):
        return _category_cell(suite, col)
    if key.startswith("task:"):
        return _task_cell(suite, col)
    raise AssertionError(f"unknown column {key}")


def _tasks_cell(suite: dict, covered_total: tuple[int, int]) -> dict:
    covered, total = covered_total
    out: dict = {"value": covered, "total": total, "text": f"{covered}/{total}", "reason": None}
    missing_tasks = [t for t in suite["tasks"] if t not in suite["evaluated"]]
    out["title"] = f"{covered} of {total} tasks scored" + (
        "".join(f"\n• {task_reason(suite, t)}" for t in missing_tasks)
    )
    return out


def _length_cell(
    suite: dict, suite_name: str, label: str, length: int, covered_total: tuple[int, int], threshold: float | None
) -> dict:
    """The average over tasks at one length; RULER's cells say whether they clear the threshold."""
    stats = suite["per_length"].get(str(length))
    if stats is None:
        have = ", ".join(format_length(x) for x in suite_lengths(suite)) or "none"
        return missing(f"not evaluated at {format_length(length)} (this run has {have})")
    covered, total = covered_total
    stats = {**stats, "num_samples": stats.get("num_samples", _samples_at(suite, length))}
    tc, tt = stats.get("tasks_covered", covered), stats.get("tasks_total", total)
    out = stat_cell(stats, f"{label} {format_length(length)}", f"average of {tc}/{tt} tasks")
    thr = threshold if threshold is not None else (suite["summary"].get("effective_length") or {}).get("threshold")
    if not is_ruler(suite_name):
        return out
    out["above"] = thr is not None and out["value"] > thr
    if thr is not None:
        out["title"] += f"\n{'above' if out['above'] else 'not above'} the threshold {thr:g}"
    return out


def _summary_cell(suite: dict, label: str, key: str, covered_total: tuple[int, int]) -> dict:
    """Avg, wAvg (inc) or wAvg (dec) over the run's lengths."""
    stats = suite["summary"].get(key)
    if not _is_stats(stats):
        have, total_len = suite["summary"].get("lengths_covered"), suite["summary"].get("lengths_total")
        if have is not None and total_len is not None and have < total_len:
            return missing(
                f"{SUMMARY_LABELS[key]} needs every length of the run: only {have}/{total_len} have an average"
            )
        return missing(f"{SUMMARY_LABELS[key]} not in this run's results")
    covered, total = covered_total
    return stat_cell(
        stats, f"{label} {SUMMARY_LABELS[key]}", f"over {len(suite['per_length'])} lengths, {covered}/{total} tasks"
    )


def _headline_cell(suite: dict, label: str, col: dict) -> dict:
    block = ((suite.get("headline") or {}).get("groups") or {}).get(col["headline"]) or {}
    stats = (block.get("per_length") or {}).get(str(col["length"]))
    if stats is None:
        return missing(f"{col['headline']} not evaluated at {format_length(col['length'])} for this run")
    how = (suite.get("headline") or {}).get("label", "")
    cats = f"{stats.get('categories_covered')}/{stats.get('categories_total')} categories"
    return stat_cell(stats, f"{label} {col['headline']}", f"{how}; {cats}")


def _category_cell(suite: dict, col: dict) -> dict:
    stats = (suite.get("categories") or {}).get(col["category"], {}).get(str(col["length"]))
    if stats is None:
        return missing(f"{col['category']} not evaluated at {format_length(col['length'])} for this run")
    return stat_cell(stats, f"{col['category']} {format_length(col['length'])}")


def _task_cell(suite: dict, col: dict) -> dict:
    t = col["task"]
    by_len = suite["per_task"].get(t) or {}
    stats = by_len.get(str(col["length"])) if col["length"] is not None else None
    if stats is None:
        reason = (
            task_reason(suite, t)
            if t not in suite["evaluated"]
            else f"{t} not evaluated at {format_length(col['length'])}"
        )
        return missing(reason)
    return stat_cell(stats, TASK_LABELS.get(t, t))


def _eff_cell(suite: dict, threshold: float | None) -> dict:
    covered, total = tasks_covered(suite)
    means = {int(L): s["mean"] for L, s in suite["per_length"].items()}
    if threshold is not None:
        value, text = effective_length(means, threshold)
        note = f"threshold {threshold:g} (--threshold)"
        if covered != total:
            note += f"; ⚑ only {covered}/{total} tasks, not comparable with full-suite numbers"
    else:
        eff = suite["summary"].get("effective_length")
        if not eff:
            return missing("effective length not in this run's results")
        if covered != total:
            return missing(
                f"only {covered}/{total} tasks: effective length is shown for full suites only (pass --threshold to show it anyway)"
            )
        value, text, note = eff.get("value"), eff.get("label") or "—", f"threshold {eff.get('threshold')}"
    lengths = suite_lengths(suite)
    if value is None and lengths and text == "below the first length":
        text = f"< {format_length(lengths[0])}"  # short enough for the column; the title spells it out
    # Sorts below every real length (0), yet is a value, not a missing cell.
    return {
        "value": value if value is not None else 0,
        "text": text,
        "reason": None,
        "partial": covered != total,
        "title": f"effective length {text}" + (" (below the first length)" if value is None else "") + f": {note}",
    }


def _nolima_eff_cell(suite: dict) -> dict:
    rel = suite["summary"].get("effective_length_nolima") or {}
    if rel.get("base_score") is None:
        return missing("NoLiMa effective length not in this run's results")
    value, text = rel.get("value"), rel.get("label") or "—"
    lengths = suite_lengths(suite)
    if value is None and lengths and text == "below the first length":
        text = f"< {format_length(lengths[0])}"
    bases = ", ".join(format_length(int(L)) for L in rel.get("base_lengths") or [])
    return {
        "value": value if value is not None else 0,
        "text": text,
        "reason": None,
        "title": f"NoLiMa effective length {text}: score >= {rel.get('fraction', 0.85):g} x base score "
        f"{rel['base_score']:.1f} (mean at {bases}) = {rel.get('threshold') or 0:.1f} at it and every shorter length",
    }


def delta_cell(row: dict, base: dict, col: dict, baseline: str, iv: dict | None = None) -> dict:
    """Row minus baseline in one column; `iv` is its paired interval (leaderboards.intervals.delta_interval)."""
    a, b = row["cells"][col["id"]], base["cells"][col["id"]]
    if col["key"] == "tasks":
        return {**a, "title": a.get("title", "") + f"\nbaseline {baseline}: {b['text']}"}
    if col["key"] in ("eff", "eff_nolima"):
        return {
            "value": None,
            "text": a["text"],
            "reason": None,
            "title": f"{a['text']} here; baseline {baseline}: {b['text']}",
            "plain": True,
        }
    if row["is_baseline"]:
        return {
            "value": 0.0 if a["value"] is not None else None,
            "text": "base" if a["value"] is not None else "—",
            "reason": a["reason"],
            "title": a["title"],
        }
    if a["value"] is None or b["value"] is None:
        reason = a["reason"] if a["value"] is None else f"baseline {baseline}: {b['reason']}"
        return missing(reason)
    d = a["value"] - b["value"]
    out = {
        "value": d,
        "text": fmt_delta(d),
        "reason": None,
        "title": f"{row['run']} {a['value']:.2f} − {baseline} {b['value']:.2f} = {d:+.2f}",
    }
    if iv is not None:
        _add_interval(out, iv)
    return out


def _add_interval(out: dict, iv: dict) -> None:
    """A difference's 95% interval, how it was drawn and whether it excludes 0."""
    how = (
        f"paired bootstrap over {iv['paired_samples']} shared samples and the checkpoints"
        if iv["paired_samples"]
        else "unpaired bootstrap: no shared samples"
    )
    if iv["paired_samples"] and iv["unpaired_tasks"]:
        how += f"; unpaired for {', '.join(iv['unpaired_tasks'])} (different samples)"
    if iv.get("from_stderr"):  # an imported cell without per-sample scores (leaderboards.shared)
        how += f"; {', '.join(iv['from_stderr'])} drawn from its harness's standard error (normal)"
    verdict = (
        "significant at 95%: the interval excludes 0"
        if iv["significant"]
        else "not significant at 95%: the interval contains 0"
    )
    out.update(ci=[iv["low"], iv["high"]], pm=f"±{(iv['high'] - iv['low']) / 2:.1f}", sig=iv["significant"])
    out["title"] += f"\n95% interval [{iv['low']:+.2f}, {iv['high']:+.2f}] ({how})\n{verdict}"
