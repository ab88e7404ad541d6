"""One writer per store: two real `harness eval` processes on one --out compute each sample once.

Each process runs harness.cli.main in a small wrapper that counts the generation requests its
runner receives (appended to a count file) and, for the first process, holds its first batch
until the test opens a gate: so the second process provably starts while the first holds the run
lock, whatever the machine's speed. No timing is asserted; the waits below are guards against a
hung process only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WRAPPER = r"""
import os, sys, time
import harness.models.runners.hf as hf

count_file, gate = sys.argv[1], sys.argv[2]
original = hf.HFRunner.generate_each

def generate_each(self, requests):  # every generation goes through it (HFRunner.generate too)
    with open(count_file, "a") as f:
        f.write(f"{len(requests)}\n")
    while gate != "-" and not os.path.exists(gate):
        time.sleep(0.05)
    yield from original(self, requests)

hf.HFRunner.generate_each = generate_each
from harness.cli import main
sys.exit(main(sys.argv[3:]))
"""
GUARD_S = 600  # a hung process fails the test instead of blocking the suite


@pytest.fixture(scope="module")
def embedded_ckpts(tmp_path_factory):
    from harness.pipeline.embedded_eval import ensure_checkpoints

    root = tmp_path_factory.mktemp("embedded") / "runs"
    return ensure_checkpoints(root, steps=(10, 20))


def _start(tmp_path: Path, name: str, gate: str, ckpts: str, out: Path) -> tuple[subprocess.Popen, Path]:
    count = tmp_path / f"{name}.count"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    # vt: the RULER task with the fewest tokens to generate (30), so the CPU work stays small
    argv = ["eval", "--ckpts", ckpts, "--tasks", "vt", "--lengths", "1k", "--samples", "2"]
    argv += ["--batch-size", "1", "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, str(count), gate, *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, count


def _wait_for(predicate, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + GUARD_S
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"process ended early ({proc.returncode}): {proc.stderr.read()}")
        assert time.monotonic() < deadline, "guard: the process hung"
        time.sleep(0.1)


def _generated(count: Path) -> int:
    return sum(int(x) for x in count.read_text().split()) if count.exists() else 0


def _records(out: Path) -> list[dict]:
    lines = (out / "samples.jsonl").read_text().splitlines()[1:]
    return [json.loads(line) for line in lines]


def test_second_eval_waits_for_the_first_and_computes_only_what_is_missing(tmp_path, embedded_ckpts):
    out, gate = tmp_path / "out", tmp_path / "gate"
    first, first_count = _start(tmp_path, "first", str(gate), embedded_ckpts, out)
    _wait_for(first_count.exists, first)  # the first holds the lock and sits in its first batch
    second, second_count = _start(tmp_path, "second", "-", embedded_ckpts, out)
    line = ""
    while not line.startswith("waiting for"):  # blocks until the second says whom it waits for
        line = second.stderr.readline()
        assert line, f"the second eval ended without waiting ({second.wait(GUARD_S)})"
    assert line.startswith(f"waiting for pid {first.pid} on host "), line
    assert str(out) in line and "only what is still missing" in line
    gate.touch()
    assert first.wait(GUARD_S) == 0, first.stderr.read()
    assert second.wait(GUARD_S) == 0, second.stderr.read()
    records = _records(out)
    planned = 2 * 2  # checkpoints x samples
    assert len(records) == planned
    assert _generated(first_count) == planned  # one run's work ...
    assert _generated(second_count) == 0  # ... and nothing more from the second
    first_results = json.loads((out / "results.json").read_text())
    assert first_results["suites"]["custom"]["evaluated"] == ["vt"]
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path, embedded_ckpts):
    out, gate = tmp_path / "out", tmp_path / "never"
    first, first_count = _start(tmp_path, "first", str(gate), embedded_ckpts, out)
    _wait_for(first_count.exists, first)
    first.send_signal(signal.SIGKILL)
    first.wait(GUARD_S)
    second, second_count = _start(tmp_path, "second", "-", embedded_ckpts, out)
    assert second.wait(GUARD_S) == 0
    assert "waiting for" not in second.stderr.read()  # the kernel dropped the dead holder's flock
    assert len(_records(out)) == 4 and _generated(second_count) == 4


def test_run_lock_does_not_block_the_runs_own_store_writers(tmp_path):
    """The run lock is a separate file: workers appending to the store under its flock go on."""
    from harness.pipeline.store import ResultStore, run_lock

    store = ResultStore(tmp_path / "samples.jsonl")
    rec = {
        "checkpoint": {"fingerprint": "f", "path": "p", "step": 1},
        "task": "t",
        "task_version": "1",
        "length": 1024,
        "index": 0,
        "seed": 42,
        "score": 1.0,
    }
    with run_lock(tmp_path) as waited:
        assert waited is False
        worker = ResultStore(tmp_path / "samples.jsonl")  # a worker of the same run
        assert worker.append([rec]) == 1
    assert len(store.records()) == 1
