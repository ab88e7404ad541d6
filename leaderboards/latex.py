"""A LaTeX (booktabs) table of the leaderboard's scores view, for papers.

    from leaderboards.latex import to_latex
    to_latex(board)                      # mean ± half-width of the 95% interval
    to_latex(board, interval="range")    # mean [low, high]

One row per run, the page's columns under their suite groups (\\cmidrule per group), the best
value per column in bold (the page's "best": only among rows with the same task and length set),
and, with a baseline, the delta view's significance mark (*: the paired 95% interval of the
difference excludes 0) on the scores it applies to. Needs \\usepackage{booktabs} in the preamble.
"""

from __future__ import annotations

INTERVALS = ("pm", "range", "none")
_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "—": "--",
    "−": "-",
    # a cell that opens with [ after \\ or \midrule would be read as their optional argument
    # ("\\[2pt]"): a run named "[x]" broke the table's compile; braces make a bracket plain text
    "[": "{[}",
    "]": "{]}",
}


def escape(text: str) -> str:
    """Text as LaTeX prints it: run names are data, never commands (a name may hold \\input)."""
    return "".join(_SPECIAL.get(ch, ch) for ch in " ".join(str(text).split()))


def number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}".replace("-", "$-$") if round(value, digits) != 0 else f"{0:.{digits}f}"


def cell_text(cell: dict, numeric: bool, interval: str = "pm", digits: int = 1, sig: bool = False) -> str:
    """One table cell: the mean, its 95% interval as ± half-width or [low, high], bold when best,
    `*` when the delta view calls the difference from the baseline significant."""
    if cell.get("value") is None:
        return "--"
    if not numeric:
        return escape(cell["text"])
    text = number(cell["value"], digits)
    if cell.get("best"):
        text = rf"\textbf{{{text}}}"
    ci = cell.get("ci")
    if ci and interval == "pm":
        text += rf"\,{{\scriptsize$\pm${(ci[1] - ci[0]) / 2:.{digits}f}}}"
    elif ci and interval == "range":
        text += rf"\,{{\scriptsize[{number(ci[0], digits)}, {number(ci[1], digits)}]}}"
    return text + (r"$^{*}$" if sig else "")


def _header(board: dict) -> list[str]:
    """The suite-group row with its \\cmidrule spans, then the column labels."""
    groups, rules, at = [r"\multicolumn{2}{c}{}"], [], 3
    for g in board["groups"]:
        groups.append(rf"\multicolumn{{{g['span']}}}{{c}}{{{escape(g['label'])}}}")
        rules.append(rf"\cmidrule(lr){{{at}-{at + g['span'] - 1}}}")
        at += g["span"]
    labels = ["Run", "Mode"] + [escape(c["label"]) for c in board["columns"]]
    return [" & ".join(groups) + r" \\", " ".join(rules), " & ".join(labels) + r" \\"]


def _row(board: dict, row: dict, interval: str, digits: int) -> str:
    delta = row.get("delta") or {}
    name = escape(row["run"]) + (r"\textsuperscript{\dag}" if row["flags"] else "")
    if row["is_baseline"]:
        name += r"\textsuperscript{b}"
    cells = [name, escape(row["mode"])]
    for col in board["columns"]:
        sig = bool((delta.get(col["id"]) or {}).get("sig"))
        cells.append(cell_text(row["cells"][col["id"]], col["numeric"], interval, digits, sig))
    return " & ".join(cells) + r" \\"


def caption(board: dict, interval: str) -> str:
    parts = [escape(board["title"]) + ". Scores $\\times$100, mean over checkpoints"]
    if board.get("any_intervals") and interval == "pm":
        parts[0] += r" $\pm$ half-width of the 95\% interval (bootstrap over samples and checkpoints)"
    elif board.get("any_intervals") and interval == "range":
        parts[0] += r" [low, high] of the 95\% interval (bootstrap over samples and checkpoints)"
    parts.append("best per column in bold; -- = not available")
    if board.get("baseline"):
        parts.append(rf"\textsuperscript{{b}} baseline {escape(board['baseline'])}")
        if board.get("any_delta_intervals"):
            parts.append("$^{*}$ differs from the baseline at 95\\% (paired bootstrap: the interval excludes 0)")
    if any(set(r["flags"]) - set(r.get("record_marks", [])) for r in board["rows"]):
        parts.append(r"\textsuperscript{\dag} evaluated task or length set differs from the other rows")
    for r in board["rows"]:  # a store's record problems travel with the row (leaderboards.record_marks)
        parts += [rf"\textsuperscript{{\dag}} {escape(r['run'])}: {escape(mark)}" for mark in r.get("record_marks", [])]
    if board.get("threshold_text"):
        parts.append(f"effective-length threshold {escape(board['threshold_text'])}")
    return "; ".join(parts) + "."


def to_latex(board: dict, interval: str = "pm", digits: int = 1, label: str = "tab:long-context") -> str:
    """The scores view as a booktabs `table` environment (a string ending in a newline)."""
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {INTERVALS}, not {interval!r}")
    spec = "ll" + "".join("r" if c["numeric"] else "c" for c in board["columns"])
    lines = [
        r"% Generated by `harness report --format latex` / `harness leaderboard`; needs \usepackage{booktabs}.",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        *_header(board),
        r"\midrule",
        *(_row(board, row, interval, digits) for row in board["rows"]),
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{caption(board, interval)}}}",
        rf"\label{{{escape(label)}}}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"
