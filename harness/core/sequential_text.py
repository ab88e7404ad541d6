"""What a results.json "sequential" block says, in words: the one wording of every report.

    from harness.core.sequential_text import cell_text, rule_lines, suite_rows
    rule_lines(results["sequential"])          # the header: rule, alpha, margin, the other run, samples
    for label, is_average, cells in suite_rows(block, "ruler", results["suites"]["ruler"]):
        print(label, [cell_text(c, paired=True) if c else "—" for c in cells])

The terminal table (harness.pipeline.sequential_table), the LaTeX table and the leaderboard page and
exports (leaderboards.sequential*) all word a cell through these functions, so they never disagree.
It lives in the foundation because the reports layer may not import the pipeline.

A cell's status is its verdict (better / worse / equivalent / within width / undecided), except that
an undecided cell still being sampled (stopped "open": results.json is rewritten after every round,
so a killed or running evaluation leaves such cells) reads "open". Its n is the samples it drew out of
the fixed protocol's; a suite average's unit is one sample index averaged over the suite's tasks, so
its n and fixed count are per task.
"""

from __future__ import annotations

from harness.core.lengths import format_length

MISSING = "—"
AVERAGE = "average"  # the key of the suite averages in block["cells"] (harness.pipeline.sequential_cells)
STATUSES = ("better", "worse", "equivalent", "within width", "undecided", "open")
SHORT = {"equivalent": "equiv", "within width": "within"}
MEANING = {
    "better": "this run is better: the interval lies above 0",
    "worse": "this run is worse: the interval lies below 0",
    "equivalent": "equivalent: the interval lies inside ± the margin",
    "within width": "the interval is narrower than the width asked for",
    "undecided": "undecided: its pool (or --max-samples) was used up first",
    "open": "still open: the evaluation stopped between rounds",
}


def is_paired(block: dict) -> bool:
    return block.get("mode") != "width"


def status(entry: dict) -> str:
    """The cell's verdict, or "open" for an undecided cell that was still being sampled."""
    if entry.get("verdict") == "undecided" and entry.get("stopped") == "open":
        return "open"
    return str(entry.get("verdict"))


def css_class(entry: dict) -> str:
    """v-better, v-worse, v-equivalent, v-within-width, v-undecided or v-open."""
    return "v-" + status(entry).replace(" ", "-")


def points(value: float, paired: bool, digits: int = 1) -> str:
    """A number of points: signed for a paired difference (+7.2, -3.0, 0.0), plain for a score."""
    if round(value, digits) == 0:
        return f"{0.0:.{digits}f}"  # neither +0.0 nor -0.0: no direction
    return f"{value:+.{digits}f}" if paired else f"{value:.{digits}f}"


def estimate_text(entry: dict, paired: bool, digits: int = 1) -> str:
    est = entry.get("estimate")
    return MISSING if est is None else points(est, paired, digits)


def interval_text(entry: dict, paired: bool, digits: int = 1) -> str:
    """ "[+1.1, +13.0]" (paired) or "[45.1, 59.5]" (one run's score); "—" before any sample was seen."""
    iv = entry.get("interval")
    if not iv:
        return MISSING
    return f"[{points(iv[0], paired, digits)}, {points(iv[1], paired, digits)}]"


def fixed_count(entry: dict) -> float:
    """The fixed protocol's samples for this cell, per task for a suite average."""
    tasks = entry.get("tasks") or []
    return entry["fixed_n"] / len(tasks) if tasks else entry["fixed_n"]


def n_text(entry: dict) -> str:
    """ "n=75/500": samples drawn out of the fixed protocol's (per task for an average)."""
    fixed = fixed_count(entry)
    return f"n={entry['n']}/{fixed:g}" if fixed == int(fixed) else f"n={entry['n']}/{fixed:.1f}"


def cell_text(entry: dict | None, paired: bool, digits: int = 1) -> str:
    """One cell in a line: "better +7.2 [+1.1, +13.0] n=75/500", "equiv n=50/500",
    "undecided +1.0 [-2.5, +4.4] n=500/500"; in width mode "within 52.3 [45.1, 59.5] n=40/500".
    An equivalent cell leaves its numbers out: the verdict says its interval is inside ± the margin."""
    if entry is None:
        return MISSING
    st = status(entry)
    parts = [SHORT.get(st, st)]
    if entry.get("interval") and not (paired and st == "equivalent"):
        parts += [estimate_text(entry, paired, digits), interval_text(entry, paired, digits)]
    return " ".join(parts + [n_text(entry)])


def cell_title(entry: dict, paired: bool, where: str) -> str:
    """A cell's tooltip: everything the record holds about it."""
    lines = [f"{where}: {MEANING.get(status(entry), status(entry))}"]
    if entry.get("interval"):
        what = "this run minus the other" if paired else "score"
        lines.append(f"{what}: {estimate_text(entry, paired)} {interval_text(entry, paired)}")
    per = " per task" if entry.get("tasks") else ""
    lines.append(f"{entry['n']} samples drawn{per} of the fixed protocol's {fixed_count(entry):g}{per}")
    lines.append(f"its sequence saw {entry['seen']} of a pool of {entry['pool']}; stopped: {entry['stopped']}")
    if entry.get("tasks"):
        lines.append("average of " + ", ".join(entry["tasks"]))
    return "\n".join(lines)


def ratio_text(block: dict) -> str:
    """ "60 of the fixed protocol's 120 (0.50x)"."""
    samples = block.get("samples") or {}
    used, fixed = samples.get("used"), samples.get("fixed")
    ratio = f" ({used / fixed:.2f}x)" if used is not None and fixed else ""
    return f"{MISSING if used is None else used} of the fixed protocol's {MISSING if fixed is None else fixed}{ratio}"


def against_name(block: dict) -> str:
    """The other run's name ("another run" when the block does not say)."""
    name = (block.get("against") or {}).get("name")
    return "another run" if name in (None, "") else str(name)


def against_text(block: dict) -> str:
    """What a paired block compared with: "embedded (B, its missing samples evaluated too)"."""
    other = block.get("against") or {}
    path = other.get("path")
    how = "its missing samples evaluated too" if other.get("evaluated") else ""
    if other.get("read_only"):
        how = f"read-only: {other['read_only']}"
    inside = ", ".join(str(p) for p in (path, how) if p)
    return f"{against_name(block)} ({inside})" if inside else against_name(block)


def width_text(block: dict) -> str:
    """ "narrower than 10 points": a width-mode block's stopping width."""
    width = block.get("width")
    return "narrower than the width asked for" if width is None else f"narrower than {width:g} points"


def rule_lines(block: dict) -> list[str]:
    """Two lines: what was compared and what it cost; the rule and its error control."""
    paired = is_paired(block)
    if paired:
        what = f"paired against {against_text(block)}"
    else:
        what = f"until each cell's interval is {width_text(block)}"
    cap = f", at most {block['max_samples']} a cell" if block.get("max_samples") else ""
    first = (
        f"sequential: {what} · samples {ratio_text(block)} · {block['rounds']} round"
        f"{'s' if block['rounds'] != 1 else ''} of {block['round_size']}{cap}"
    )
    rule = (block.get("rule") or {}).get("name", "confidence sequence")
    cells = block["cells_total"]
    second = (
        f"rule: {rule}, anytime-valid; alpha {block['alpha']:g} family-wise over {cells} cell"
        f"{'s' if cells != 1 else ''} (Bonferroni: {block['alpha_per_cell']:.2g} each)"
    )
    if paired and block.get("equivalence_margin"):
        second += f"; equivalent = the interval inside ±{block['equivalence_margin']:g} points"
    return [first, second]


def suite_rows(block: dict, name: str, suite: dict) -> list[tuple[str, bool, list[dict | None]]]:
    """The suite's grid of cells in the scores table's shape: (task, False, cells per length) for each
    evaluated task, then (name, True, cells) for its average; [] when no cell belongs to the suite."""
    cells = block.get("cells") or {}
    keys = [str(L) for L in suite.get("lengths") or []]
    rows: list[tuple[str, bool, list[dict | None]]] = []
    for task in suite.get("evaluated") or []:
        by_len = cells.get(task) or {}
        rows.append((task, False, [by_len.get(k) for k in keys]))
    averages = cells.get(AVERAGE) or {}
    mine = [e if e is not None and e.get("suite") == name else None for e in (averages.get(k) for k in keys)]
    if any(mine):
        rows.append((name, True, mine))
    return rows if any(c is not None for _, _, row in rows for c in row) else []


def stop_counts(block: dict) -> dict[str, int]:
    """Why the cells without a verdict stopped ("pool used up", "max samples", ...), counted; the open
    ones are not stopped (status_counts counts them)."""
    out: dict[str, int] = {}
    for by_len in (block.get("cells") or {}).values():
        for entry in by_len.values():
            if status(entry) == "undecided":
                out[entry["stopped"]] = out.get(entry["stopped"], 0) + 1
    return out


def stop_line(block: dict) -> str:
    """ "stopped without a verdict: 1 x max samples, 8 x pool used up; 7 cells still open (...)", or ""."""
    parts = []
    stops = stop_counts(block)
    if stops:
        parts.append("stopped without a verdict: " + ", ".join(f"{n} x {why}" for why, n in sorted(stops.items())))
    still = status_counts(block).get("open", 0)
    if still:
        parts.append(f"{still} cell{'s' if still != 1 else ''} still open (the evaluation ended between rounds)")
    return "; ".join(parts)


def status_counts(block: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for by_len in (block.get("cells") or {}).values():
        for entry in by_len.values():
            out[status(entry)] = out.get(status(entry), 0) + 1
    return {s: out[s] for s in STATUSES if s in out}


def length_label(key: str | int) -> str:
    return format_length(int(key))
