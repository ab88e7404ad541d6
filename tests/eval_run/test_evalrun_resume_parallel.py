"""Resume after a kill, and data-parallel workers: the store ends up exactly as one clean run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main

HERE = Path(__file__).parent


def _argv(root, out, samples, *extra):
    return [
        "eval",
        "--ckpts",
        f"{root}/ckpt-<10..20>",
        "--suite",
        "toy",
        "--lengths",
        "1k",
        "--samples",
        str(samples),
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def _store(out) -> tuple[list[str], dict]:
    text = (Path(out) / "samples.jsonl").read_text()
    lines = text.split("\n")[:-1]  # a killed writer may leave a torn last line: not a record yet
    recs = [json.loads(x) for x in lines[1:]]
    by_key = {
        (r["checkpoint"]["fingerprint"], r["task"], r["task_version"], r["length"], r["index"], r["seed"]): (
            r["prediction"],
            r["score"],
        )
        for r in recs
    }
    assert len(by_key) == len(recs), "a key was stored twice"
    return lines, by_key


def _suites(out) -> dict:
    """results.json's suites without the measured wall time per sample (a timing, not a result)."""

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "seconds_per_sample"}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return strip(json.loads((Path(out) / "results.json").read_text())["suites"])


def _count_records(path: Path) -> int:
    try:
        return max(0, path.read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


@pytest.mark.slow
def test_killed_run_resumes_without_recomputing_or_losing(ckpt_series, tmp_path):
    samples, total = 6, 2 * 2 * 6
    killed = tmp_path / "killed"
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import toytasks; from harness.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *_argv(ckpt_series, killed, samples, "--batch-size", "1")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store = killed / "samples.jsonl"
    deadline = time.time() + 120
    while _count_records(store) < 3 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before_lines, before = _store(killed)
    assert 3 <= len(before) < total, f"the kill should land mid-run ({len(before)} of {total} records)"

    assert main(_argv(ckpt_series, killed, samples, "--batch-size", "1")) == 0
    after_lines, after = _store(killed)
    assert len(after) == total
    assert after_lines[: len(before_lines)] == before_lines  # finished records kept, none rewritten

    clean = tmp_path / "clean"
    assert main(_argv(ckpt_series, clean, samples, "--batch-size", "1")) == 0
    _, reference = _store(clean)
    assert after == reference
    assert _suites(killed) == _suites(clean)


@pytest.mark.slow
def test_data_parallel_two_workers_equal_one(ckpt_series, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    argv = [
        "eval",
        "--ckpts",
        f"{ckpt_series}/ckpt-<10..30>",
        "--tasks",
        "toy_words,toy_digits",
        "--lengths",
        "1k",
        "--samples",
        "3",
        "--no-progress",
    ]
    assert main(argv + ["--out", str(one)]) == 0
    assert main(argv + ["--out", str(two), "--data-parallel", "2"]) == 0
    _, a = _store(one)
    _, b = _store(two)
    assert len(a) == 3 * 2 * 3 and a == b
    assert _suites(one) == _suites(two)


def test_ray_address_without_ray_is_a_clear_error(ckpt_series, tmp_path, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray":
            raise ImportError("no ray")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    assert main(_argv(ckpt_series, tmp_path / "r", 1, "--ray-address", "auto")) == 2
    err = capsys.readouterr().err
    assert "pip install" in err and "ray" in err
