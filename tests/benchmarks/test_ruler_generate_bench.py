"""benchmarks/ruler_generate.py at its smallest: a row per task, landing gaps that obey the length
rule, and the summary line (it is the script docs/limitations.md's generation-speed numbers come from).

    OMP_NUM_THREADS=1 pytest -q tests/benchmarks/test_ruler_generate_bench.py
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(
    r"^(\w+)\s+(\S+)\s+(\d+)\s+([\d.]+)\s+(\d+)/([\d.]+)/(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$"
)


@pytest.mark.slow
def test_smallest_run_prints_a_checked_row_per_task():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "ruler_generate.py"),
            "--samples",
            "3",
            "--lengths",
            "1k",
            "--tasks",
            "niah_multikey_3,fwe",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {m.group(1): m for m in map(ROW.match, proc.stdout.splitlines()) if m}
    assert set(rows) == {"niah_multikey_3", "fwe"}, proc.stdout
    for m in rows.values():
        assert m.group(2) == "1K" and int(m.group(3)) == 3
        gap_min, gap_max = int(m.group(5)), int(m.group(7))
        assert 0 <= gap_min <= gap_max < 200  # never over the budget, and short by at most a unit or so
        assert float(m.group(9)) > 0 and float(m.group(10)) > 0  # generation/tokenization ratios
    assert "worst CPU ratio" not in proc.stdout  # that summary is for runs that include 128K


STARTUP_ROW = re.compile(
    r"^(\w+)\s+(\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(yes|no)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+(yes|NO)$"
)


@pytest.mark.slow
def test_startup_rows_compare_with_the_transformers_path():
    """The start-up row runs `harness generate` both ways: no torch on the default path, same bytes."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ruler_generate.py"), "--only-startup", "--tasks", "vt"]
        + ["--startup-samples", "2", "--startup-length", "1k"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [m for m in map(STARTUP_ROW.match, proc.stdout.splitlines()) if m]
    assert len(rows) == 1, proc.stdout
    m = rows[0]
    assert m.group(1) == "vt" and m.group(2) == "1K" and int(m.group(3)) == 2
    assert m.group(7) == "no" and m.group(12) == "yes"  # torch not imported; byte-identical files
    assert int(m.group(10)) > int(m.group(6))  # the transformers path holds more memory (torch)
    assert "byte-identical 1 of 1" in proc.stdout
