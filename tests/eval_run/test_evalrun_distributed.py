"""Data-parallel evaluation finer than a checkpoint, locally and on a real (local) Ray cluster:
records identical to a serial run, each engine loading a checkpoint once, lost workers replaced."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_evalrun_resume_parallel import _count_records, _store, _suites

from harness.cli import main

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def _argv(root, out, *extra, ckpts="<10..30>", samples=3, tasks="toy_words,toy_digits"):
    return [
        "eval",
        "--ckpts",
        f"{root}/ckpt-{ckpts}",
        "--tasks",
        tasks,
        "--lengths",
        "1k",
        "--samples",
        str(samples),
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def _loads(stderr: str) -> int:
    m = re.search(r"model loads: (\d+) \((\d+) engines", stderr)
    assert m, stderr
    return int(m.group(1))


@pytest.fixture(scope="module")
def serial(ckpt_series, tmp_path_factory):
    """The reference: one process, no sharding, 3 checkpoints x 2 tasks x 6 samples."""
    out = tmp_path_factory.mktemp("serial")
    assert main(_argv(ckpt_series, out, "--batch-size", "2", samples=6)) == 0
    return _store(out)[1], _suites(out)


# ---------------------------------------------------------------------------------------------
# units and scheduling (no processes)
# ---------------------------------------------------------------------------------------------
def _job(path: str, n: int):
    from harness.models.runners.base import RunnerSettings
    from harness.pipeline.jobs import CheckpointJob, RunnerWork, WorkItem

    task = SimpleNamespace(name="t")
    items = [WorkItem(task, SimpleNamespace(length=1024, index=i), "", 1) for i in range(n)]
    other = SimpleNamespace(name="u")
    ckpt = SimpleNamespace(path=path)
    return CheckpointJob(ckpt, items, [RunnerWork(other, 0, list(range(n)))], RunnerSettings("hf"), {}, "s", 0)


def test_split_job_covers_every_sample_once_in_ranges():
    from harness.pipeline.jobs import split_job

    for n, parts in [(7, 3), (2, 5), (6, 2), (1, 1)]:
        units = split_job(_job("a", n), parts)
        gen = [[it.sample.index for it in u.items] for u in units if u.items]
        ll = [u.runner_work[0].indices for u in units if u.runner_work]
        for ranges in (gen, ll):
            assert sorted(i for r in ranges for i in r) == list(range(n))
            assert all(r == list(range(r[0], r[0] + len(r))) for r in ranges)  # contiguous
            assert len(ranges) == min(n, parts) and max(map(len, ranges)) - min(map(len, ranges)) <= 1
        assert all(
            u.affinity == "a" and u.size == len(u.items) + sum(len(w.indices) for w in u.runner_work) for u in units
        )


def _simulate(units, engines: int, speeds: list[float]) -> tuple[dict, list]:
    """Event simulation of engines pulling units from the scheduler; returns (checkpoints each
    engine loaded, in order; the units in the order they ran)."""
    from harness.pipeline.parallel import AffinityScheduler

    sched = AffinityScheduler(units)
    held: dict[int, str | None] = {e: None for e in range(engines)}
    clock = {e: 0.0 for e in range(engines)}
    loads: dict[int, list] = {e: [] for e in range(engines)}
    ran = []
    while True:
        e = min(clock, key=lambda k: clock[k])
        unit = sched.next(e)
        if unit is None:
            del clock[e]
            if not clock:
                return loads, ran
            continue
        if unit.affinity != held[e]:
            loads[e].append(unit.affinity)
        held[e] = unit.affinity
        ran.append(unit)
        clock[e] += unit.size / speeds[e]


def test_affinity_scheduler_loads_each_checkpoint_rarely():
    from harness.pipeline.jobs import split_job

    jobs = [_job(p, 8) for p in "abc"]
    for engines, speeds in [(2, [1.0, 1.0]), (2, [1.0, 3.0]), (4, [1.0, 2.0, 1.0, 5.0])]:
        units = [u for j in jobs for u in split_job(j, engines)]
        loads, ran = _simulate(units, engines, speeds)
        assert sorted(map(id, ran)) == sorted(map(id, units))  # every unit once
        # an engine keeps its checkpoint while it has work: it never loads one twice
        assert all(len(set(ckpts)) == len(ckpts) for ckpts in loads.values())
        total = sum(map(len, loads.values()))
        assert 3 <= total and (engines > 3 or total <= 3 + engines - 1)
        # the engines spread over the checkpoints before sharing one
        assert {ckpts[0] for ckpts in loads.values()} == set("abc"[:engines])


# ---------------------------------------------------------------------------------------------
# local process pool
# ---------------------------------------------------------------------------------------------
def test_sharded_local_workers_equal_serial(ckpt_series, serial, tmp_path, capsys):
    """3 checkpoints, 2 engines, --shard-samples: same records, and loads <= checkpoints + engines - 1."""
    out = tmp_path / "sharded"
    assert main(_argv(ckpt_series, out, "--batch-size", "2", "--data-parallel", "2", "--shard-samples", samples=6)) == 0
    loads = _loads(capsys.readouterr().err)
    assert 3 <= loads <= 4
    _, got = _store(out)
    assert got == serial[0]
    assert _suites(out) == serial[1]


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


@pytest.mark.slow
def test_local_worker_killed_mid_unit_is_replaced(ckpt_series, serial, tmp_path):
    """kill -9 one local worker process mid-run: its unit goes to another worker, same records."""
    out = tmp_path / "killed"
    argv = _argv(ckpt_series, out, "--batch-size", "1", "--data-parallel", "2", "--shard-samples", samples=6)
    proc = subprocess.Popen(_cli(*argv), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + 300
    while killed is None and proc.poll() is None and time.time() < deadline:
        n = _count_records(out / "samples.jsonl")
        workers = [p for p in _children(proc.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        if n >= 2 and workers:
            os.kill(workers[-1], signal.SIGKILL)
            killed = workers[-1]
        time.sleep(0.02)
    _, stderr = proc.communicate(timeout=600)
    assert killed is not None, "the run ended before a worker could be killed"
    assert proc.returncode == 0, stderr[-3000:]
    assert "sent again after a lost worker" in stderr
    _, got = _store(out)
    assert got == serial[0]
    assert _suites(out) == serial[1]


# ---------------------------------------------------------------------------------------------
# Ray (a local cluster started by the command itself: --ray-address local)
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def ray():
    return pytest.importorskip("ray")  # a third-party extra (pip install 'ray[default]'; in the dev extra)


def _cli(*argv) -> list[str]:
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import toytasks; from harness.cli import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, *argv]


def _env() -> dict:
    # Ray's workers import the toy tasks (units carry them) and the harness from this checkout.
    path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.mark.slow
def test_ray_two_engines_equal_serial(ray, ckpt_series, serial, tmp_path):
    out = tmp_path / "ray"
    argv = _argv(ckpt_series, out, "--batch-size", "2", "--data-parallel", "2", "--ray-address", "local", samples=6)
    proc = subprocess.run(_cli(*argv), check=False, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 3 <= _loads(proc.stderr) <= 4
    _, got = _store(out)
    assert got == serial[0]
    assert _suites(out) == serial[1]
    assert "toy_words" in proc.stdout  # the final table, as in a serial run


def _engine_pids() -> list[int]:
    """Ray actor processes running a unit (Ray titles them `ray::HarnessEngine.run`)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().startswith(b"ray::HarnessEngine.run"):
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


@pytest.mark.slow
def test_ray_worker_killed_mid_unit_is_replaced(ray, ckpt_series, serial, tmp_path):
    """kill -9 one engine while it runs a unit: the unit goes to another engine, the store ends with
    exactly the serial run's records (none lost, none twice)."""
    out = tmp_path / "killed"
    argv = _argv(ckpt_series, out, "--batch-size", "1", "--data-parallel", "2", "--ray-address", "local", samples=6)
    proc = subprocess.Popen(_cli(*argv), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + 300
    while killed is None and proc.poll() is None and time.time() < deadline:
        pids = _engine_pids()
        if pids and _count_records(out / "samples.jsonl") >= 2:
            os.kill(pids[0], signal.SIGKILL)
            killed = pids[0]
        time.sleep(0.02)
    _, stderr = proc.communicate(timeout=600)
    assert killed is not None, "the run ended before a worker could be killed"
    assert proc.returncode == 0, stderr[-3000:]
    assert "lost" in stderr and "sent again after a lost worker" in stderr
    _, got = _store(out)  # asserts no key stored twice
    assert got == serial[0]
    assert _suites(out) == serial[1]


@pytest.mark.slow
def test_ray_driver_killed_mid_run_resumes(ray, ckpt_series, serial, tmp_path):
    """kill -9 the driver of a Ray run once records are stored: the same command then computes only
    the rest, and the store ends with exactly the serial run's records."""
    out = tmp_path / "driver"
    argv = _argv(ckpt_series, out, "--batch-size", "1", "--data-parallel", "2", "--ray-address", "local", samples=6)
    proc = subprocess.Popen(_cli(*argv), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while _count_records(out / "samples.jsonl") < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before_lines, before = _store(out)
    assert 2 <= len(before) < len(serial[0]), f"the kill should land mid-run ({len(before)} records)"
    again = subprocess.run(_cli(*argv), check=False, env=_env(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    after_lines, got = _store(out)  # asserts no key stored twice
    assert after_lines[: len(before_lines)] == before_lines  # finished records kept, none rewritten
    assert got == serial[0]
    assert _suites(out) == serial[1]


@pytest.mark.slow
def test_engine_without_the_store_path_is_one_line_error(ray, tmp_path):
    """An engine that cannot read the driver's probe (another node without the shared path) stops
    the run before any work, with one line naming the problem and the fix."""
    from harness.core.errors import UserError
    from harness.pipeline.engine import JobEngine
    from harness.pipeline.parallel import HarnessEngine, ProgressBoard, check_engines_see

    ray.init(num_cpus=1, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": _env()["PYTHONPATH"]}})
    try:
        board = ray.remote(num_cpus=0)(ProgressBoard).remote()
        actor = ray.remote(num_cpus=1)(HarnessEngine).remote(JobEngine, 0, board)
        probe = tmp_path / "probe"
        probe.write_text("token")
        check_engines_see(ray, [actor], probe, "token")  # same filesystem: passes
        for path, token in [(tmp_path / "absent" / "probe", "token"), (probe, "another")]:
            with pytest.raises(UserError) as exc:
                check_engines_see(ray, [actor], path, token)
            msg = str(exc.value)
            assert "\n" not in msg and "every Ray node mounts" in msg and "--out" in msg
    finally:
        ray.shutdown()
