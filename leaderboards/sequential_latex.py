"""LaTeX (booktabs) tables of the leaderboard's sequential section: the verdict and n per cell.

    from leaderboards.sequential_latex import sequential_latex
    to_latex(board) + sequential_latex(board)     # what `harness report --format latex` prints

One `table` per run evaluated sequentially, in the drill-down's shape: a row per task and one for
the suite's average (\\midrule between suites), a column per length. A cell is two short lines: the
verdict with the difference (this run minus the other, points; in width mode the score), then the
anytime-valid interval and n = samples drawn / the fixed protocol's. The caption states the rule,
alpha, the margin, the other run and the samples used against the fixed protocol's. Needs only
\\usepackage{booktabs}, like the scores table.
"""

from __future__ import annotations

from leaderboards.latex import escape

_WORD = {"better": "better", "worse": "worse", "equivalent": "equiv.", "within width": "within", "open": "open"}


def _num(text: str) -> str:
    """A signed number as LaTeX sets it: a real minus sign ($-$), a plus in math too."""
    return text.replace("-", "$-$").replace("+", "$+$")


def cell_tex(cell: dict) -> str:
    """Two stacked lines in a tabular (core LaTeX): verdict and difference; interval and n."""
    if cell["status"] is None:
        return "--"
    word = _WORD.get(cell["status"], "undec.")
    top = rf"\textbf{{{word}}}" + (f" {_num(cell['estimate'])}" if cell.get("estimate") else "")
    bottom = (f"{_num(cell['interval'])} " if cell.get("interval") else "") + "$n$" + escape(cell["n"][1:])
    return rf"\begin{{tabular}}[t]{{@{{}}r@{{}}}}{top}\\{{\scriptsize {bottom}}}\end{{tabular}}"


def _text(line: str) -> str:
    """A report line as caption text: escaped, its separators and ± in LaTeX's own forms."""
    return escape(line).replace(" · ", "; ").replace("±", r"$\pm$")


def _caption(sec: dict) -> str:
    what = "paired difference (this run minus the other, in points)" if sec["paired"] else "score"
    parts = [
        rf"Sequential evaluation of {escape(sec['run'])}: {_text(sec['lines'][0].removeprefix('sequential: '))}",
        "Rule: " + _text(sec["lines"][1].removeprefix("rule: ")),
        (
            f"Cells: the verdict and the {what}, its anytime-valid interval and n = samples drawn / the fixed "
            "protocol's (per task for an average); -- = no cell"
        ),
    ]
    if sec["stops"]:
        parts.append(_text(sec["stops"][0].upper() + sec["stops"][1:]))
    return ". ".join(parts) + "."


def _table(sec: dict, index: int) -> list[str]:
    width = max(len(g["lengths"]) for g in sec["suites"])
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\footnotesize",
        r"\setlength{\tabcolsep}{4pt}",
        rf"\begin{{tabular}}{{l{'r' * width}}}",
        r"\toprule",
    ]
    for k, grid in enumerate(sec["suites"]):
        if k:
            lines.append(r"\midrule")
        pad = " & " * (width - len(grid["lengths"]))
        head = [escape(grid["label"])] + [escape(L) for L in grid["lengths"]]
        lines += [" & ".join(head) + pad + r" \\", r"\midrule"]
        for row in grid["rows"]:
            if row["average"]:
                lines.append(r"\cmidrule(lr){1-" + str(width + 1) + "}")
            lines.append(" & ".join([escape(row["label"])] + [cell_tex(c) for c in row["cells"]]) + pad + r" \\")
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{_caption(sec)}}}",
        rf"\label{{tab:sequential-{index}}}",
        r"\end{table}",
    ]
    return lines


def sequential_latex(board: dict) -> str:
    """The tables of every sequential run ("" when there is none), each ending in a newline. A block
    whose cells match none of the run's suites has no grid, hence no table."""
    out = []
    for i, sec in enumerate(board.get("sequential") or []):
        if not sec["suites"]:
            continue
        out += ["", f"% Sequential verdicts of {escape(sec['run'])} (harness eval --against / --until-width)."]
        out += _table(sec, i + 1)
    return "\n".join(out) + "\n" if out else ""
