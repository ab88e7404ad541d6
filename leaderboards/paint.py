"""Cell colours of the leaderboard table and the best-in-column mark.

from leaderboards.paint import paint
paint(rows, columns, "cells")                  # a light-to-blue scale per column, best marked
paint(rows, columns, "delta", diverging=True)  # orange below the baseline, blue above
"""

from __future__ import annotations

from leaderboards.labels import lower_is_better


def color(t: float) -> str:
    """Sequential light→blue scale; dark text stays readable at both ends."""
    lo, hi = (247, 251, 255), (107, 174, 214)
    return "rgb({},{},{})".format(*(round(a + (b - a) * t) for a, b in zip(lo, hi)))


def _diverging(d: float, scale: float) -> str:
    t = min(1.0, abs(d) / scale) if scale > 0 else 0.0
    end = (103, 169, 207) if d > 0 else (239, 138, 98)
    return "rgb({},{},{})".format(*(round(255 + (b - 255) * t) for b in end))


def paint(rows: list[dict], columns: list[dict], cells_key: str, diverging: bool = False) -> None:
    """Per-column colour scale over the rows' values (numbers only); "best" only among comparable rows."""
    for col in columns:
        if not col["numeric"]:
            continue
        vals = [r[cells_key][col["id"]]["value"] for r in rows if r[cells_key][col["id"]]["value"] is not None]
        if not vals:
            continue
        lo, hi = min(vals), max(vals)
        for r in rows:
            cell = r[cells_key][col["id"]]
            if cell["value"] is None:
                continue
            if diverging:
                cell["color"] = _diverging(cell["value"], max(abs(lo), abs(hi)))
            else:
                t = (cell["value"] - lo) / (hi - lo) if hi > lo else 0.5
                cell["color"] = color(1 - t if lower_is_better(col["suite"]) else t)
        # an imported row (another harness, another input protocol) is shown, never crowned best
        comparable = [
            r[cells_key][col["id"]]["value"]
            for r in rows
            if col["suite"] not in r["flag_suites"]
            and not r.get("imported")
            and r[cells_key][col["id"]]["value"] is not None
        ]
        if diverging or len(comparable) < 2 or lower_is_better(col["suite"]):
            continue
        for r in rows:
            cell = r[cells_key][col["id"]]
            cell["best"] = (
                col["suite"] not in r["flag_suites"] and not r.get("imported") and cell["value"] == max(comparable)
            )
