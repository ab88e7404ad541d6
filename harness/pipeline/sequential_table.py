"""The terminal table's part for a sequential evaluation (harness eval --against / --until-width).

    from harness.pipeline.sequential_table import sequential_header, sequential_grid
    lines += sequential_header(results)                  # under the run's header lines
    lines += sequential_grid(results, "ruler", suite)    # under the suite's score grids

The grid has the scores grid's shape (the suite's tasks, then its average; one column per length)
and each cell reads "better +7.2 [+1.1, +13.0] n=75/500", "equiv n=50/500" or
"undecided +1.0 [-2.5, +4.4] n=500/500" (harness.core.sequential_text words every report's cells).
Results without a "sequential" block get no lines.
"""

from __future__ import annotations

from harness.core.sequential_text import (
    against_name,
    cell_text,
    is_paired,
    length_label,
    rule_lines,
    stop_line,
    suite_rows,
)


def sequential_header(results: dict) -> list[str]:
    block = results.get("sequential")
    return rule_lines(block) if block else []


def sequential_grid(results: dict, name: str, suite: dict) -> list[str]:
    """A title line, the grid of verdicts, and a line on the cells that stopped undecided."""
    block = results.get("sequential")
    rows = suite_rows(block, name, suite) if block else []
    if not block or not rows:
        return []
    paired = is_paired(block)
    what = f"this run minus {against_name(block)}, points" if paired else "this run's score"
    title = (
        f"sequential verdicts ({what}; [interval] anytime-valid, {100 * (1 - block['alpha']):.4g}% over all cells at once; "
        "n = samples drawn / the fixed protocol's"
        + (", per task in the average" if any(avg for _, avg, _ in rows) else "")
        + ")"
    )
    header = ["Task"] + [length_label(L) for L in suite.get("lengths") or []]
    body = [[f"Average ({name})" if avg else task] + [cell_text(c, paired) for c in cells] for task, avg, cells in rows]
    footer = 1 if rows[-1][1] else 0
    out = ["", title] + _aligned(header, body, footer)
    stops = stop_line(block)
    return out + ([stops] if stops else [])


def _aligned(header: list[str], rows: list[list[str]], footer: int) -> list[str]:
    """Left-aligned columns (cells are words, not numbers); a rule under the header and above the
    last `footer` rows (the average)."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    body, foot = rows[: len(rows) - footer], rows[len(rows) - footer :]
    return [line(header), rule] + [line(r) for r in body] + ([rule] + [line(r) for r in foot] if foot else [])
