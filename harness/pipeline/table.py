"""The terminal table of a results.json: one block per suite.

    from harness.pipeline.table import format_table
    print(format_table(load_results("results/anchor/results.json")))

Rows are the suite's evaluated tasks, then the suite average (and category averages); columns are
the lengths, then Avg, wAvg(inc), wAvg(dec). A cell is "mean ±std" over checkpoints (just "mean"
when one checkpoint was evaluated: its std is 0 by definition, not a measured spread), with
"n=K" appended when fewer than the run's checkpoints took part, and "—" where there is no value
(never 0). A suite that is not length-controlled (MMLU/HellaSwag at length 0) has the column
"n/a" and effective length "n/a". Header lines give the run, the checkpoint steps, tasks covered, the effective length
with its threshold, excluded/unavailable tasks and the settings that move scores. When the
results carry 95% bootstrap intervals (schema 2: over samples and checkpoints, docs/contracts.md),
a second grid of the same shape gives each cell's "[low, high]".
"""

from __future__ import annotations

from harness.core.lengths import format_length
from harness.pipeline.sequential_table import sequential_grid, sequential_header

MISSING = "—"
_SUMMARY_COLUMNS = (("avg", "Avg"), ("wavg_inc", "wAvg(inc)"), ("wavg_dec", "wAvg(dec)"))


def format_cell(stats: dict | None, num_ckpts: int) -> str:
    if not stats:
        return MISSING
    n = stats.get("n", 1)  # results_schema checked the types; older files may leave n/std out
    text = f"{stats['mean']:.1f}" if n == 1 else f"{stats['mean']:.1f} ±{stats.get('std', 0.0):.1f}"
    if n < num_ckpts:
        text += f" n={n}"
    return text + _marks(stats)


def _marks(stats: dict) -> str:
    """Degenerate outputs (!empty, !max-len, !repeats: at least half the cell's predictions) and a
    cell at its floor or ceiling (its interval reaches chance level or 100: it separates nothing)."""
    from harness.core.degenerate import flags

    marks = [f"!{w}" for w in flags(stats.get("degenerate"))]
    cut = stats.get("budget") or {}
    if cut.get("answer_cut"):  # answers that reached their budget: cut, not finished
        marks.append(f"cut={cut['answer_cut']}/{cut['n']}")
    if cut.get("thinking_cut"):
        marks.append(f"think-cut={cut['thinking_cut']}/{cut['n']}")
    if stats.get("bound"):
        marks.append({"floor": "(floor)", "ceiling": "(ceiling)"}.get(stats["bound"], "(floor+ceiling)"))
    return "".join(f" {m}" for m in marks)


def format_interval(stats: dict | None, num_ckpts: int = 0) -> str:
    """ "[low, high]" of a statistic's 95% interval, "—" when it has none."""
    if not stats or stats.get("ci_low") is None or stats.get("ci_high") is None:
        return MISSING
    return f"[{stats['ci_low']:.1f}, {stats['ci_high']:.1f}]"


def _coverage(stats: dict) -> str:
    """ "covered/total" tasks of an average; "" when the block does not say."""
    if stats.get("tasks_covered") is None or stats.get("tasks_total") is None:
        return ""
    return f"{stats['tasks_covered']}/{stats['tasks_total']}"


def _checkpoint_line(run: dict) -> str:
    ckpts = run.get("checkpoints") or []
    names = [str(c["step"]) if c.get("step") is not None else c.get("path", MISSING) for c in ckpts]
    kind = "steps" if ckpts and all(c.get("step") is not None for c in ckpts) else "checkpoints"
    return f"{len(ckpts)} checkpoint{'s' if len(ckpts) != 1 else ''} ({kind} {', '.join(names) or MISSING})"


def _provenance_line(prov: dict) -> str:
    parts = []
    for key, label in (
        ("backend", "backend"),
        ("dtype", "dtype"),
        ("batch_size", "batch"),
        ("max_model_len", "max_model_len"),
        ("rope_theta", "rope_theta"),
        ("rope_scaling", "rope_scaling"),
        ("template", "template"),
        ("truncation", "truncation"),
        ("max_length", "max_length"),
        ("protocol", "protocol"),
        ("lm_eval_version", "lm-eval"),
        ("seed", "seed"),
    ):
        if prov.get(key) is not None:
            parts.append(f"{label} {prov[key]}")
    parts += _controls_parts(prov)
    version = prov.get("package_version")
    if version:
        git = prov.get("git_hash")
        parts.append(
            f"harness {version}" + (f" ({git[:12]}{'-dirty' if git.endswith('-dirty') else ''})" if git else "")
        )
    if prov.get("created"):
        parts.append(f"created {prov['created']}")
    return " · ".join(parts)


def _controls_parts(prov: dict) -> list[str]:
    """The served endpoint and the instruct/reasoning controls, when they are not the defaults."""
    parts = []
    ep = prov.get("endpoint")
    if isinstance(ep, dict):
        root = f" (root {ep['root']})" if ep.get("root") and ep.get("root") != ep.get("model") else ""
        parts.append(f"served {ep.get('model')}{root} at {ep.get('base_url')}")
    if prov.get("chat_template"):
        parts.append(f"chat template {prov['chat_template']}")
    if prov.get("answer_prefix") is False:
        parts.append("no answer prefix")
    mnt = prov.get("max_new_tokens")
    if mnt:
        parts.append("max_new_tokens " + ",".join(str(n) if t == "*" else f"{t}={n}" for t, n in mnt.items()))
    if prov.get("system_prompt") is not None:
        text = prov["system_prompt"]
        parts.append(f"system prompt {text[:40] + '…' if len(text) > 40 else text!r}")
    if prov.get("strip_thinking"):
        parts.append("strip thinking")
    if prov.get("max_thinking_tokens"):
        parts.append(f"thinking budget {prov['max_thinking_tokens']}")
    return parts


def _grid(header: list[str], rows: list[list[str]], footer: int = 1) -> list[str]:
    """Aligned columns; a rule under the header and above the last `footer` rows (the averages)."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(r):
        return "  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    body, foot = rows[: len(rows) - footer], rows[len(rows) - footer :]
    return [line(header), rule] + [line(r) for r in body] + ([rule] + [line(r) for r in foot] if foot else [])


def _suite_block(name: str, suite: dict, num_ckpts: int) -> list[str]:
    summary = suite.get("summary", {})
    lengths = suite.get("lengths", [])
    eff = summary.get("effective_length") or {}
    total = len(suite.get("tasks", []))
    covered = f"{len(suite.get('evaluated', []))}/{total}"  # tasks with any score; cells say when they cover fewer
    threshold = eff.get("threshold")
    out = [
        f"{name} · tasks {covered} · effective length {eff.get('label', MISSING)}"
        + (f" (threshold {threshold:g})" if threshold is not None else "")
    ]
    rel = summary.get("effective_length_nolima") or {}
    if name.startswith("nolima") and rel.get("base_score") is not None:  # NoLiMa's own rule beside RULER's
        bases = ",".join(format_length(int(L)) for L in rel.get("base_lengths") or [])
        out.append(
            f"NoLiMa effective length {rel.get('label', MISSING)} (>= {rel.get('fraction', 0.85):g} x base score "
            f"{rel['base_score']:.1f} at {bases})"
        )
    if suite.get("excluded"):
        out.append("excluded: " + ", ".join(suite["excluded"]))
    for task, reason in (suite.get("unavailable") or {}).items():
        out.append(f"unavailable: {task} ({reason})")
    for task, by_len in (suite.get("unavailable_lengths") or {}).items():
        for L, reason in sorted(by_len.items(), key=lambda kv: int(kv[0])):
            out.append(f"unavailable: {task} at {format_length(int(L))} ({reason})")
    if summary.get("lengths_covered") is not None and summary.get("lengths_covered") != summary.get("lengths_total"):
        total_lengths = summary.get("lengths_total", MISSING)  # either may be absent from a hand-edited file
        out.append(f"lengths evaluated: {summary['lengths_covered']}/{total_lengths} (no Avg until all are)")

    headline = suite.get("headline")
    if headline:  # the number the suite's reference publishes, named with how it is averaged
        out.append(f"headline ({headline.get('label', MISSING)}): rows ‹group› below the average")
    header = ["Task"] + [format_length(L) for L in lengths] + [label for _, label in _SUMMARY_COLUMNS]
    footer = 1 + len((headline or {}).get("groups") or {})
    grid = out + _grid(header, _rows(suite, num_ckpts, format_cell, covered, coverage=True), footer)
    cells = [s for by in (suite.get("per_task") or {}).values() for s in by.values() if s]
    if any(s.get("degenerate") and _marks({"degenerate": s["degenerate"]}) for s in cells):
        grid.append(
            "!empty / !max-len / !repeats: at least half of the cell's predictions are empty, ran to max new tokens, "
            "or repeat one short span (a set-up problem, not a score: harness doctor)"
        )
    if any((s.get("budget") or {}).get("answer_cut") or (s.get("budget") or {}).get("thinking_cut") for s in cells):
        grid.append(
            "cut=K/N: K of the cell's N answers reached the answer budget (--max-new-tokens or the task's) and were "
            "cut there; think-cut=K/N: K thoughts reached --max-thinking-tokens and were closed before the answer"
        )
    if any(s.get("bound") for s in cells):
        grid.append(
            "(floor) / (ceiling): the cell's 95% interval reaches the task's chance level (or 0) / 100: it cannot tell "
            "two runs apart"
        )
    has_ci = any(s.get("ci_low") is not None for by in (suite.get("per_task") or {}).values() for s in by.values() if s)
    if has_ci:
        grid += ["", "95% intervals [low, high] of the same cells (bootstrap over samples and checkpoints)"]
        grid += _grid(header, _rows(suite, num_ckpts, format_interval, covered, coverage=False), footer)
    return grid


def _rows(suite: dict, num_ckpts: int, fmt, covered: str, coverage: bool) -> list[list[str]]:
    """The task rows, category rows and the average row, each cell written by fmt(stats, num_ckpts)."""
    summary = suite.get("summary", {})
    lengths = suite.get("lengths", [])
    rows = []
    task_summaries = suite.get("per_task_summary", {})
    for task in suite.get("evaluated", []):
        cells = suite.get("per_task", {}).get(task, {})
        ts = task_summaries.get(task, {})
        rows.append(
            [task]
            + [fmt(cells.get(str(L)), num_ckpts) for L in lengths]
            + [fmt(ts.get(key), num_ckpts) for key, _ in _SUMMARY_COLUMNS]
        )
    for cat, per_len in (suite.get("categories") or {}).items():
        stats = [per_len.get(str(L)) for L in lengths]
        cov = next((s for s in stats if s), None)
        label = f"[{cat}]" + (f" ({_coverage(cov)})" if cov and _coverage(cov) else "")
        rows.append([label] + [fmt(s, num_ckpts) for s in stats] + [MISSING] * len(_SUMMARY_COLUMNS))
    avg_row = [f"Average ({covered})"]
    for L in lengths:
        stats = suite.get("per_length", {}).get(str(L))
        text = fmt(stats, num_ckpts)
        if coverage and stats and _coverage(stats) not in ("", covered):
            text += f" [{_coverage(stats)}]"
        avg_row.append(text)
    for key, _ in _SUMMARY_COLUMNS:
        text = fmt(summary.get(key), num_ckpts)
        if coverage and summary.get(key) and _coverage(summary) not in ("", covered):
            text += f" [{_coverage(summary)}]"
        avg_row.append(text)
    rows.append(avg_row)
    for group, block in ((suite.get("headline") or {}).get("groups") or {}).items():
        per_len = block.get("per_length") or {}
        rows.append(
            [f"‹{group}›"]
            + [fmt(per_len.get(str(L)), num_ckpts) for L in lengths]
            + [fmt(block.get("avg"), num_ckpts)]
            + [MISSING] * (len(_SUMMARY_COLUMNS) - 1)
        )
    return rows


def format_table(results: dict) -> str:
    run = results.get("run", {})
    num_ckpts = len(run.get("checkpoints") or [])
    head = f"run {run.get('name', MISSING)}"
    if run.get("model"):
        head += f" · model {run['model']}"
    if run.get("mode"):
        head += f" · mode {run['mode']}"
    lines = [head + " · " + _checkpoint_line(run)]
    prov = _provenance_line(results.get("provenance", {}))
    if prov:
        lines.append(prov)
    iv = results.get("intervals")
    if iv:
        lines.append(
            f"intervals: {iv.get('level', 0.95) * 100:g}% {iv.get('method', 'bootstrap')} of each mean "
            f"({iv.get('resamples')} resamples of the samples and the checkpoints)"
        )
    lines += sequential_header(results)  # a sequential evaluation's rule and what it cost
    if results.get("conflicting_records"):
        lines.append(
            f"warning: {results['conflicting_records']} record(s) share an identity with an earlier record but hold "
            "another prediction or score (a hand-edited or merged store): the first written of each is used"
        )
    if results.get("inconsistent_records"):
        bad = results["inconsistent_records"]
        lines.append(
            f"warning: {bad['count']} record(s) contradict themselves (a hand-edited store) and are left out of "
            "every average: " + "; ".join(f"{n} x {why}" for why, n in bad["reasons"].items())
        )
    for name, suite in results.get("suites", {}).items():
        lines.append("")
        lines += _suite_block(name, suite, num_ckpts)
        lines += sequential_grid(results, name, suite)  # its verdict and n per cell
    return "\n".join(lines)
