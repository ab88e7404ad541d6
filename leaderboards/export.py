"""CSV, JSON and Markdown tables of what the leaderboard page shows.

    from leaderboards.export import to_csv, to_json, to_markdown
    to_csv(board)                    # scores view, every row
    to_csv(board, view="delta")      # the delta-vs-baseline view (needs --baseline)

The page embeds `table_data(board)` and its download buttons serialise the rows still visible,
in their current order, with the same header and cell strings as these functions.
"""

from __future__ import annotations

import json
import re

VIEWS = ("scores", "delta")
_FIXED = ["Run", "Model", "Mode", "Checkpoints"]


def _cells_key(view: str) -> str:
    assert view in VIEWS, view
    return "cells" if view == "scores" else "delta"


def _views(board: dict) -> list[str]:
    return ["scores", "delta"] if board.get("baseline") else ["scores"]


def _col_name(col: dict) -> str:
    return f"{col['group']} {col['label']}"


def _num(v) -> str:
    return "" if v is None else f"{v:.2f}"


# A spreadsheet runs a cell starting with one of these as a formula (=HYPERLINK(...), +cmd|...).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# ... also after leading spaces (spreadsheets skip them) and in their full-width forms (＝＋－＠),
# which some spreadsheets read as the ASCII ones. The page's csvField uses the same pattern.
_FORMULA = re.compile(r"^[\t\r]|^[\s\u00a0\u3000\ufeff]*[=+\-@\uff1d\uff0b\uff0d\uff20]")


def safe_text(text: str) -> str:
    """A text cell as OWASP's CSV-injection advice has it: a leading formula character (after any
    spaces, or its full-width form) gets a `'` prefix, so the spreadsheet shows it as text. Only for
    text cells: numbers (a negative delta) are written by _num and stay numbers."""
    return "'" + text if _FORMULA.match(text) else text


def csv_table(board: dict, view: str = "scores") -> dict:
    """Header and one list of strings per row (id kept so the page can filter and reorder)."""
    key = _cells_key(view)
    header = list(_FIXED)
    for col in board["columns"]:
        header.append(safe_text(_col_name(col)))
        if col["numeric"]:
            if view == "scores":
                header.append(safe_text(_col_name(col) + " std"))
            # the page's ± : the 95% interval (bootstrap, or an imported harness's standard error)
            header += [safe_text(_col_name(col) + " 95% low"), safe_text(_col_name(col) + " 95% high")]
    header.append("Flags")
    rows = []
    for row in board["rows"]:
        vals = [safe_text(row[k]) for k in ("run", "model", "mode", "checkpoints")]
        for col in board["columns"]:
            cell = row[key][col["id"]]
            if not col["numeric"]:
                vals.append(safe_text(cell["text"]) if cell["text"] != "—" else "")
            elif view == "delta" and row["is_baseline"]:
                vals.append("base" if cell["value"] is not None else "")
            else:
                vals.append(_num(cell["value"]))
            if col["numeric"] and view == "scores":
                # the spread over checkpoints: none for one checkpoint (an imported run), never "0.00"
                vals.append(_num(cell.get("std")) if (cell.get("n") or 0) > 1 else "")
            if col["numeric"]:
                ci = cell.get("ci") or [None, None]
                vals += [_num(ci[0]), _num(ci[1])]
        vals.append(safe_text("; ".join(row["flags"] if view == "scores" else row["delta_flags"])))
        rows.append({"id": row["id"], "values": vals})
    return {"header": header, "rows": rows}


def json_table(board: dict, view: str = "scores") -> dict:
    key = _cells_key(view)
    keep = ("value", "std", "min", "max", "n", "steps", "num_samples", "ci", "prompt", "text", "reason")
    return {
        "title": board["title"],
        "view": view,
        "baseline": board["baseline"],
        "threshold": board["threshold_text"],
        "columns": [
            {"id": c["id"], "suite": c["suite"], "group": c["group"], "label": c["label"]} for c in board["columns"]
        ],
        "rows": [
            {
                "id": row["id"],
                "run": row["run"],
                "model": row["model"],
                "mode": row["mode"],
                "checkpoints": row["checkpoints"],
                "steps": row["steps"],
                "flags": row["flags"] if view == "scores" else row["delta_flags"],
                "cells": {cid: {k: cell.get(k) for k in keep if k in cell} for cid, cell in row[key].items()},
            }
            for row in board["rows"]
        ],
    }


def table_data(board: dict) -> dict:
    """What the page embeds for its download buttons."""
    return {v: {"csv": csv_table(board, v), "json": json_table(board, v)} for v in _views(board)}


_NEEDS_QUOTES = re.compile(r'[",\r\n]')


def csv_field(text: str) -> str:
    """One RFC 4180 field, quoted when it holds a quote, comma, CR or LF: the page's csvField does
    the same. (Python's csv module leaves a bare CR unquoted when the line ends in LF, and a
    spreadsheet then starts a new row there: "run\r=HYPERLINK(...)" would become a live formula.)"""
    return '"' + text.replace('"', '""') + '"' if _NEEDS_QUOTES.search(text) else text


def to_csv(board: dict, view: str = "scores") -> str:
    t = csv_table(board, view)
    lines = [t["header"]] + [r["values"] for r in t["rows"]]
    return "".join(",".join(csv_field(v) for v in line) + "\n" for line in lines)


def to_json(board: dict, view: str = "scores") -> str:
    return json.dumps(json_table(board, view), indent=2, ensure_ascii=False) + "\n"


# Line breaks of every kind (CR, LF, VT, FF, NEL, U+2028/9) and other control characters: each
# would end or garble a table row.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


# A script URL's scheme: its colon is escaped, so no linkifier (GitHub's, markdown-it's linkify) and
# no renderer that skips backslash escapes finds "javascript:" in leaderboard.md (issue 49).
_SCRIPT_SCHEME = re.compile(r"(?i)(javascript|vbscript|data|file)(\s*):")


def _md_escape(text: str) -> str:
    # Pipes break the table; angle brackets and ampersands would be live HTML where Markdown renders;
    # brackets would make a link ([x](javascript:...)) of a run name. Every escape is CommonMark's
    # backslash escape of ASCII punctuation: the text renders as it was written.
    escaped = (
        text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("[", "\\[")
        .replace("]", "\\]")
    )
    return _CONTROL.sub(" ", _SCRIPT_SCHEME.sub(r"\1\2\\:", escaped))


def to_markdown(board: dict, view: str = "scores") -> str:
    """A pipe table for papers and READMEs: mean ± std, best per column in bold, missing as —."""
    key = _cells_key(view)
    cols = board["columns"]
    header = ["Run", "Mode", "Checkpoints"] + [_col_name(c) for c in cols]
    align = [":--", ":--", ":--"] + ["--:" for _ in cols]
    lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    for row in board["rows"]:
        name = _md_escape(row["run"]) + (" ⚑" if (row["flags"] if view == "scores" else row["delta_flags"]) else "")
        vals = [name, _md_escape(row["mode"]), _md_escape(row["checkpoints"])]
        for c in cols:
            cell = row[key][c["id"]]
            text = cell["text"]
            if c["numeric"] and cell["value"] is not None and cell.get("ci"):
                # what the page's ± says: the half-width of the 95% interval (not a std over one checkpoint)
                text = f"{text} ± {(cell['ci'][1] - cell['ci'][0]) / 2:.1f}"
            if cell.get("best"):
                text = f"**{text}**"
            vals.append(_md_escape(text))
        lines.append("| " + " | ".join(vals) + " |")
    notes = []
    if view == "scores":
        notes.append(
            "Scores ×100, mean over checkpoints ± half-width of the 95% interval (as on the page); "
            "best per column in bold; — = not available."
        )
    else:
        notes.append(
            f"Difference vs baseline run {_md_escape(board['baseline'])} (row minus baseline) "
            "± half-width of its 95% interval."
        )
    if board["threshold_text"]:
        notes.append(f"Effective-length threshold: {_md_escape(board['threshold_text'])}.")
    if any(set(row["flags"]) - set(row.get("record_marks", [])) for row in board["rows"]):
        notes.append("⚑ = evaluated task or length set differs from the other rows.")
    for row in board["rows"]:  # a store's record problems travel with the row (leaderboards.record_marks)
        notes += [f"⚑ {_md_escape(row['run'])}: {_md_escape(mark)}." for mark in row.get("record_marks", [])]
    return "\n".join(lines) + "\n\n" + " ".join(notes) + "\n"
