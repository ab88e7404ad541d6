"""CSV and Markdown of the leaderboard's sequential section (leaderboards.sequential).

    from leaderboards.sequential_export import sequential_csv, sequential_markdown
    sequential_csv(board)        # one line per cell of every sequential run; "" when there is none
    sequential_markdown(board)   # per run: its rule, then a task x length pipe table; "" when none

`harness leaderboard` writes the CSV as leaderboard-sequential.csv and appends the Markdown to
leaderboard.md; the page offers both in its sequential section. Cells are worded as on the page and
in the terminal table (harness.core.sequential_text); text goes through the same CSV-injection and
Markdown escapes as the other exports.
"""

from __future__ import annotations

from leaderboards.export import _md_escape, csv_field, safe_text

HEADER = [
    "Run",
    "Against",
    "Rule",
    "Suite",
    "Task",
    "Length",
    "Verdict",
    "Estimate",
    "Low",
    "High",
    "N",
    "Fixed N",
    "Pool",
    "Seen",
    "Stopped",
]


def _num(v) -> str:
    return "" if v is None else f"{v:g}"


def csv_rows(board: dict) -> list[list[str]]:
    """The header, then one row per cell: Estimate/Low/High in points (this run minus the other, or
    in width mode the score); N and Fixed N are per task for an average (Task "average")."""
    rows = [list(HEADER)]
    for sec in board.get("sequential") or []:
        for r in sec["records"]:
            per_task = len(r["tasks"]) if r["tasks"] else 1
            text = [sec["run"], sec["against"] or "", sec["mode"], r["suite"], r["task"]]
            rows.append(
                [safe_text(t) for t in text]
                + [str(r["length"]), r["status"], _num(r["estimate"]), _num(r["low"]), _num(r["high"])]
                + [str(r["n"]), _num(r["fixed_n"] / per_task), str(r["pool"]), str(r["seen"]), safe_text(r["stopped"])]
            )
    return rows


def sequential_csv(board: dict) -> str:
    if not board.get("sequential"):
        return ""
    return "".join(",".join(csv_field(v) for v in row) + "\n" for row in csv_rows(board))


def sequential_markdown(board: dict) -> str:
    """A heading line, the rule and a pipe table per suite, for every sequential run."""
    out = []
    for sec in board.get("sequential") or []:
        out.append(f"**Sequential verdicts: {_md_escape(sec['run'])}** ({_md_escape(sec['what'])})\n")
        out.append("  \n".join(_md_escape(line) for line in sec["lines"]) + "\n")
        for grid in sec["suites"]:
            header = ["Task"] + grid["lengths"]
            lines = [
                "| " + " | ".join(_md_escape(h) for h in header) + " |",
                "| " + " | ".join([":--"] + ["--:" for _ in grid["lengths"]]) + " |",
            ]
            for row in grid["rows"]:
                label = f"**{_md_escape(row['label'])}**" if row["average"] else _md_escape(row["label"])
                lines.append("| " + " | ".join([label] + [_md_escape(c["text"]) for c in row["cells"]]) + " |")
            out.append("\n".join(lines) + "\n")
        if sec["stops"]:
            out.append(_md_escape(sec["stops"][0].upper() + sec["stops"][1:]) + ".\n")
    if not out:
        return ""
    note = (
        "Verdicts of a sequential evaluation: the paired difference (this run minus the other, points) or, in "
        "width mode, the score, with its anytime-valid interval; n = samples drawn / the fixed protocol's "
        "(per task for an average).\n"
    )
    return "\n".join(out + [note])
