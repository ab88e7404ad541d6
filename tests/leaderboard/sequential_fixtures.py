"""Results with a "sequential" block (harness eval --against / --until-width), for the report tests.

Every verdict appears: the RULER cells cycle through better / worse / equivalent / undecided (pool
used up) / open (stopped between rounds), the averages are better, equivalent and undecided (max
samples), and one task has no cell at one length (shown as "—"). The numbers are hand-picked so
each verdict agrees with its interval and the margin, and the records pass the results schema.
"""

from __future__ import annotations

import json

import pytest

from harness.core.sequential import RULE
from tasks.ruler import RULER_TASKS

from .conftest import XSS, make_run

LENGTHS = [4096, 8192, 16384]
POOL = 500
# (verdict, stopped, estimate, interval, n): one per position in the cycle
KINDS = [
    ("better", "decided", 7.2, [1.1, 13.0], 75),
    ("worse", "decided", -5.5, [-9.0, -2.0], 150),
    ("equivalent", "decided", 0.0, [-3.1, 2.9], 50),
    ("undecided", "pool used up", 1.0, [-2.5, 4.4], 500),
    ("undecided", "open", 2.0, [-8.0, 12.0], 25),
]
AVERAGES = {
    4096: ("better", "decided", 4.0, [0.5, 7.5], 100),
    8192: ("equivalent", "decided", 0.3, [-2.0, 2.6], 125),
    16384: ("undecided", "max samples", -1.0, [-6.0, 4.0], 200),
}
MISSING_CELL = ("vt", 16384)  # no sequential cell there (e.g. no shared samples with the other run)


def entry(kind: tuple, fixed: int = POOL, tasks: list[str] | None = None) -> dict:
    verdict, stopped, est, iv, n = kind
    out = {
        "n": n,
        "seen": n if stopped != "open" else n - 5,
        "pool": POOL,
        "fixed_n": fixed,
        "interval": iv,
        "estimate": est,
        "verdict": verdict,
        "stopped": stopped,
    }
    if tasks:
        out.update(suite="ruler", tasks=tasks)
    return out


def paired_block(against: str = "full") -> dict:
    cells: dict = {}
    for i, task in enumerate(RULER_TASKS):
        for j, L in enumerate(LENGTHS):
            if (task, L) != MISSING_CELL:
                cells.setdefault(task, {})[str(L)] = entry(KINDS[(i + j) % len(KINDS)])
    cells["average"] = {
        str(L): entry(k, fixed=POOL * len(RULER_TASKS), tasks=list(RULER_TASKS)) for L, k in AVERAGES.items()
    }
    total = sum(len(v) for v in cells.values())
    return {
        "mode": "paired",
        "rule": dict(RULE),
        "alpha": 0.05,
        "alpha_per_cell": 0.05 / total,
        "cells_total": total,
        "equivalence_margin": 5.0,
        "width": None,
        "round_size": 25,
        "max_samples": 200,
        "rounds": 20,
        "samples": {"used": 4321, "fixed": POOL * len(RULER_TASKS) * len(LENGTHS)},
        "cells": cells,
        "against": {"name": against, "path": f"results/{against}", "evaluated": True},
    }


def width_block() -> dict:
    cells = {
        "niah_single_1": {"4096": entry(("within width", "decided", 96.0, [91.5, 99.5], 60))},
        "vt": {"4096": entry(("undecided", "pool used up", 52.0, [40.0, 64.0], 500))},
    }
    return {
        "mode": "width",
        "rule": dict(RULE),
        "alpha": 0.05,
        "alpha_per_cell": 0.025,
        "cells_total": 2,
        "equivalence_margin": None,
        "width": 10.0,
        "round_size": 20,
        "max_samples": None,
        "rounds": 25,
        "samples": {"used": 560, "fixed": 1000},
        "cells": cells,
    }


def sequential_runs() -> dict[str, dict]:
    """name -> results: a paired run, a width-mode run, its (plain) other arm, and a paired run whose
    name and other arm's name are markup."""
    paired, _ = make_run("seq-anchor", 11, 92.0, mode="anchor", lengths=LENGTHS, longbench=False, short=False)
    paired["sequential"] = paired_block()
    width, _ = make_run("seq-width", 12, 90.0, mode="anchor", lengths=[4096], longbench=False, short=False)
    width["sequential"] = width_block()
    full, _ = make_run("full", 13, 88.0, mode="full", lengths=LENGTHS, longbench=False, short=False)
    xss, _ = make_run(XSS, 14, 80.0, mode="anchor", lengths=LENGTHS, longbench=False, short=False)
    xss["sequential"] = paired_block(against=XSS)
    return {"seq-anchor": paired, "seq-width": width, "full": full, XSS: xss}


@pytest.fixture(scope="module")
def sequential_dirs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("sequential-results")
    dirs = {}
    for i, (name, data) in enumerate(sequential_runs().items()):
        d = root / f"run{i}"
        d.mkdir()
        (d / "results.json").write_text(json.dumps(data), encoding="utf-8")
        dirs[name] = d
    return dirs


@pytest.fixture(scope="module")
def sequential_board(sequential_dirs):
    from leaderboards.build import build, load_runs

    return build(load_runs(list(sequential_dirs.values())))


@pytest.fixture(scope="module")
def sequential_site(tmp_path_factory, sequential_dirs):
    from harness.cli import main

    out = tmp_path_factory.mktemp("sequential-site")
    assert main(["leaderboard", *map(str, sequential_dirs.values()), "--out", str(out)]) == 0
    return out
