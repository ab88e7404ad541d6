"""A run's warnings about its own records, carried with its row into every export (issue 49).

    from leaderboards.record_marks import record_marks
    record_marks(results)   # ["3 records contradict themselves (a hand-edited store): left out of every average"]

`harness report` and `harness eval` print these above the table (harness/pipeline/table.py) when a
results.json says its store held records that contradict themselves (`inconsistent_records`) or
share an identity with an earlier record but hold another prediction (`conflicting_records`); the
leaderboard puts them in the row's flags (the page's ⚑ and its tooltip, the CSV and JSON Flags)
and names them under the Markdown and LaTeX tables, so a row built on such a store is never shown
as a clean one.
"""

from __future__ import annotations


def record_marks(results: dict) -> list[str]:
    """One line per kind of record problem the run's results.json states; [] when none."""
    marks = []
    bad = results.get("inconsistent_records")
    if isinstance(bad, dict) and bad.get("count"):
        reasons = "; ".join(f"{n} x {why}" for why, n in (bad.get("reasons") or {}).items())
        marks.append(
            f"{bad['count']} record(s) contradict themselves (a hand-edited store), left out of every average"
            + (f": {reasons}" if reasons else "")
        )
    conflicts = results.get("conflicting_records")
    if conflicts:
        marks.append(
            f"{conflicts} record(s) share an identity with an earlier record but hold another prediction or "
            "score (a hand-edited or merged store): the first written of each is used"
        )
    return marks


def merge_record_counts(into: dict, other: dict) -> None:
    """Add other's record problems to into's (one run whose suites came in two results files)."""
    bad = other.get("inconsistent_records")
    if isinstance(bad, dict) and bad.get("count"):
        mine = into.get("inconsistent_records")
        mine = mine if isinstance(mine, dict) else {}
        reasons: dict[str, int] = dict(mine.get("reasons") or {})
        for why, n in (bad.get("reasons") or {}).items():
            reasons[why] = reasons.get(why, 0) + n
        into["inconsistent_records"] = {"count": mine.get("count", 0) + bad["count"], "reasons": reasons}
    if other.get("conflicting_records"):
        into["conflicting_records"] = (into.get("conflicting_records") or 0) + other["conflicting_records"]
