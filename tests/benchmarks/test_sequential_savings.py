"""benchmarks/sequential_savings.py's own pieces: what counts as a contradiction of the fixed run, and
the wall times a --sequential-only run takes from the run that made the fixed folders."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import sequential_savings as savings


def test_a_verdict_contradicts_only_what_the_fixed_interval_decides():
    assert savings.contradicts("better", -4.0, -1.0, 5.0)  # the fixed run says worse
    assert not savings.contradicts("better", -1.0, 4.0, 5.0)  # the fixed run is undecided
    assert savings.contradicts("worse", 1.0, 4.0, 5.0)
    assert not savings.contradicts("worse", -9.0, -6.0, 5.0)
    # equivalent within 5 contradicts a fixed interval wholly outside +-5, not one that reaches inside
    assert savings.contradicts("equivalent", 6.0, 9.0, 5.0) and savings.contradicts("equivalent", -9.0, -5.0, 5.0)
    assert not savings.contradicts("equivalent", 4.0, 9.0, 5.0)
    assert not savings.contradicts("undecided", 20.0, 30.0, 5.0)


def test_sequential_only_takes_the_fixed_times_of_the_earlier_run(tmp_path):
    assert savings._saved_times(tmp_path, "fixed ") == {}  # no earlier run
    (tmp_path / "savings.json").write_text("{not json")
    assert savings._saved_times(tmp_path, "fixed ") == {}
    times = {"fixed A": 231.2, "fixed B": 164, "sequential A+B": 173.0, "fixed C": "?"}
    (tmp_path / "savings.json").write_text(json.dumps({"times": times}))
    assert savings._saved_times(tmp_path, "fixed ") == {"fixed A": 231.2, "fixed B": 164.0}
