"""`--data-parallel N`: work units spread over N engines, on this machine or on a Ray cluster.

    from harness.pipeline.parallel import run_units
    stats = run_units(JobEngine, units, n=2)                       # N local worker processes
    stats = run_units(JobEngine, units, n=8, ray_address="auto")   # N Ray actors, on any node

A unit is a whole checkpoint's pending work, or (sharded, harness.pipeline.jobs.split_job) one sample
range of one (checkpoint, task, length). Each engine is built once per worker by the
`make_engine` callable (harness.pipeline.engine.JobEngine), keeps its loaded model between units, and the
driver sends it units of the checkpoint it already holds while there are any (checkpoint
affinity); an engine without such work takes the checkpoint that the fewest engines hold and that
has the most samples left. `RunStats.loads` counts the model loads a run performed.

All engines append to the same store, whose lock and per-key dedup make that safe (no sample lost
or duplicated). A worker that dies (killed, out of memory, node lost) has its unit sent to another
engine, up to `max_retries` times, and is replaced; what it already appended stays and is not
recomputed. Local workers each get a group of `tensor_parallel_size` GPUs (CUDA_VISIBLE_DEVICES
set before the worker imports torch), or a share of the CPU cores. Ray engines are actors with
num_gpus = tensor_parallel_size (when the cluster has GPUs), so Ray places them on any node; the
store must then be on a filesystem every node mounts: each engine checks it (reads a probe file the
driver wrote) before any work starts.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.core.errors import MissingExtra, UserError

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess
    from multiprocessing.queues import Queue

MAX_RETRIES = 2  # a unit whose worker died is sent again at most this many times
POLL_S = 0.2  # how often the driver looks for finished units, dead workers and progress


class Unit(Protocol):
    """What the driver needs of a work unit (harness.pipeline.jobs.CheckpointJob is one)."""

    @property
    def affinity(self) -> str: ...

    @property
    def size(self) -> int: ...


@dataclass
class RunStats:
    added: int = 0  # records appended by the engines
    loads: int = 0  # model loads, summed over every engine (a replaced engine counts its own)
    engines: int = 0
    units: int = 0
    retried: int = 0  # units sent again after their worker died


def _visible_devices() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        return []


def device_groups(n: int, tp: int) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES per worker: n groups of tp GPUs, or None each on a CPU machine."""
    devices = _visible_devices()
    if not devices:
        return [None] * n
    if len(devices) < n * tp:
        raise UserError(
            f"--data-parallel {n} x --tensor-parallel-size {tp} needs {n * tp} GPUs, {len(devices)} visible: "
            "lower --data-parallel or --tensor-parallel-size"
        )
    return [",".join(devices[i * tp : (i + 1) * tp]) for i in range(n)]


# --------------------------------------------------------------------------------------------
# scheduling: checkpoint affinity
# --------------------------------------------------------------------------------------------
class AffinityScheduler:
    """Hands out units so that each engine loads a checkpoint as rarely as possible.

    A unit needs `.affinity` (which model it runs: the checkpoint path) and `.size` (samples)."""

    def __init__(self, units: list) -> None:
        self.queues: dict[str, list] = {}
        for u in units:
            self.queues.setdefault(u.affinity, []).append(u)
        self.holders: dict[int, str | None] = {}  # engine -> the checkpoint it has loaded

    def pending(self) -> bool:
        return any(self.queues.values())

    def next(self, engine: int):
        """The next unit for `engine`, or None when nothing is left."""
        held = self.holders.get(engine)
        if held is not None and self.queues.get(held):
            return self.queues[held].pop(0)
        left = {k: q for k, q in self.queues.items() if q}
        if not left:
            return None
        holders = list(self.holders.values())
        # Fewest engines on it first (spreads checkpoints before sharing one), then most samples left.
        best = min(left, key=lambda k: (holders.count(k), -sum(u.size for u in left[k])))
        self.holders[engine] = best
        return self.queues[best].pop(0)

    def put_back(self, unit) -> None:
        """A lost worker's unit: first in line again for the next engine of its checkpoint."""
        self.queues.setdefault(unit.affinity, []).insert(0, unit)

    def forget(self, engine: int) -> None:
        """A dead engine holds nothing (its replacement starts empty)."""
        self.holders.pop(engine, None)


# --------------------------------------------------------------------------------------------
# progress over every engine
# --------------------------------------------------------------------------------------------
class ClusterProgress:
    """One bar for samples done / total, with each engine's throughput (samples/s since its first unit)."""

    def __init__(self, total: int, enabled: bool) -> None:
        from tqdm import tqdm

        # on a terminal only (harness/core/progress.py says why)
        self.bar = tqdm(total=total, desc="samples", unit="sample", disable=None if enabled else True, file=sys.stderr)
        self.done: dict[int, int] = {}
        self.started: dict[int, float] = {}

    def start(self, engine: int) -> None:
        self.started.setdefault(engine, time.monotonic())

    def add(self, engine: int, n: int) -> None:
        self.done[engine] = self.done.get(engine, 0) + n
        now = time.monotonic()
        rates = {e: k / max(1e-9, now - self.started.get(e, now)) for e, k in sorted(self.done.items())}
        self.bar.set_postfix_str(" ".join(f"w{e} {r:.1f}/s" for e, r in rates.items()), refresh=False)
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


# --------------------------------------------------------------------------------------------
# the driver loop, shared by the local and the Ray pool
# --------------------------------------------------------------------------------------------
def _drive(pool, units: list, progress: bool, max_retries: int) -> RunStats:
    """Keep every engine busy with the unit the scheduler picks; replace dead engines and send
    their units again; stop at the first error a unit raises."""
    sched = AffinityScheduler(units)
    bar = ClusterProgress(sum(u.size for u in units), progress)
    stats = RunStats(engines=pool.n, units=len(units))
    busy: dict[int, Unit] = {}  # engine -> unit it runs
    loads: dict[int, int] = {}  # engine -> model loads it reported with its last finished unit
    held: dict[int, str] = {}  # engine -> checkpoint of its last finished unit
    tries: dict[int, int] = {}  # id(unit) -> times sent again
    try:
        while sched.pending() or busy:
            for e in range(pool.n):
                if e not in busy:
                    unit = sched.next(e)
                    if unit is None:
                        break
                    busy[e] = unit
                    bar.start(e)
                    pool.submit(e, unit)
            for event in pool.poll(POLL_S):
                kind, e = event[0], event[1]
                if kind == "progress":
                    bar.add(e, event[2])
                elif kind == "done":
                    held[e] = busy.pop(e).affinity
                    stats.added += event[2]
                    loads[e] = event[3]
                elif kind == "lost":
                    unit = busy.pop(e, None)
                    sched.forget(e)
                    if unit is None:  # died between units: nothing to send again
                        stats.loads += loads.pop(e, 0)
                        held.pop(e, None)
                        pool.replace(e)
                        continue
                    # its reported loads, plus the one its last unit needed if that was another checkpoint
                    stats.loads += loads.pop(e, 0) + (unit.affinity != held.pop(e, None))
                    tries[id(unit)] = tries.get(id(unit), 0) + 1
                    if tries[id(unit)] > max_retries:
                        raise UserError(
                            f"a worker died {tries[id(unit)]} times evaluating {unit.affinity} ({event[2]}): "
                            "check the worker's memory and logs, then re-run the same command to resume"
                        )
                    print(f"worker {e} lost ({event[2]}): its unit goes to another engine", file=sys.stderr)
                    stats.retried += 1
                    sched.put_back(unit)
                    pool.replace(e)
    finally:
        bar.close()
        pool.close()
    stats.loads += sum(loads.values())
    return stats


# --------------------------------------------------------------------------------------------
# local worker processes
# --------------------------------------------------------------------------------------------
def _local_worker(e: int, group: str | None, threads: int, make_engine: Callable, inbox, outbox) -> None:
    """A local worker: set its devices before torch is imported, then run units until told to stop."""
    if group is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = group
    else:
        os.environ["HARNESS_THREADS"] = str(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    import pickle
    import queue

    parent = os.getppid()
    engine = make_engine()
    try:
        while True:
            try:
                unit = inbox.get(timeout=1.0)
            except queue.Empty:
                if os.getppid() != parent:  # the driver was killed: stop (re-running it resumes)
                    return
                continue
            if unit is None:
                return
            unit = pickle.loads(unit)
            try:
                added = engine.run(unit, report=lambda n: outbox.put(("progress", e, n)))
            except UserError as exc:
                # Subclasses with custom __init__ (MissingExtra) do not survive pickling back.
                outbox.put(("error", e, UserError(str(exc))))
                return
            except BaseException as exc:  # noqa: BLE001 - sent to the driver, which raises it
                outbox.put(("error", e, RuntimeError(f"{type(exc).__name__}: {exc}")))
                return
            outbox.put(("done", e, added, engine.loads))
    finally:
        engine.close()


class LocalPool:
    def __init__(self, make_engine: Callable, n: int, tp: int) -> None:
        import multiprocessing as mp

        self.n = n
        self.make_engine = make_engine
        self.groups = device_groups(n, tp)
        self.threads = max(1, (os.cpu_count() or 1) // n)
        self.ctx = mp.get_context("spawn")  # fork after torch/CUDA init is unsafe; spawn starts clean
        self.outbox = self.ctx.Queue()
        self.procs: dict[int, BaseProcess] = {}
        self.inboxes: dict[int, Queue[Any]] = {}
        self.running: set[int] = set()
        for e in range(n):
            self._start(e)

    def _start(self, e: int) -> None:
        self.inboxes[e] = self.ctx.Queue()
        args = (e, self.groups[e], self.threads, self.make_engine, self.inboxes[e], self.outbox)
        self.procs[e] = self.ctx.Process(target=_local_worker, args=args, daemon=True)
        self.procs[e].start()

    def submit(self, e: int, unit) -> None:
        import pickle

        # Pickled here, not in the queue's feeder thread, where an unpicklable unit would be
        # dropped with a traceback and the driver would wait for it forever.
        payload = pickle.dumps(unit)
        self.running.add(e)
        self.inboxes[e].put(payload)

    def poll(self, timeout: float) -> list[tuple]:
        import queue

        events = []
        try:
            events.append(self.outbox.get(timeout=timeout))
            while True:
                events.append(self.outbox.get_nowait())
        except queue.Empty:
            pass
        for ev in events:
            if ev[0] == "error":
                raise ev[2]
            if ev[0] == "done":
                self.running.discard(ev[1])
        for e, proc in self.procs.items():  # workers that died without a word (killed, out of memory)
            if proc.exitcode is not None and not any(ev[0] == "done" and ev[1] == e for ev in events):
                self.running.discard(e)
                events.append(("lost", e, f"exit code {proc.exitcode}"))
        return events

    def replace(self, e: int) -> None:
        self._start(e)

    def close(self) -> None:
        for e, proc in self.procs.items():
            if proc.exitcode is None:
                self.inboxes[e].put(None)
        for proc in self.procs.values():
            proc.join(timeout=60)
            if proc.exitcode is None:
                proc.kill()


# --------------------------------------------------------------------------------------------
# Ray
# --------------------------------------------------------------------------------------------
class HarnessEngine:
    """A Ray actor around one engine (its process shows as `ray::HarnessEngine...`)."""

    def __init__(self, make_engine: Callable, e: int, board) -> None:
        self.engine = make_engine()
        self.e = e
        self.board = board

    def pid(self) -> int:
        return os.getpid()

    def check_store(self, probe: str, token: str) -> str | None:
        """None when this node sees the driver's store directory (the probe file with its token) and
        may write there; otherwise why not."""
        import socket

        where = f"Ray node {socket.gethostname()}"
        try:
            if Path(probe).read_text() != token:
                return f"{where} sees another file at {probe} (not the driver's filesystem)"
        except OSError as exc:
            return f"{where} cannot read {probe} ({exc.strerror})"
        if not os.access(Path(probe).parent, os.W_OK):
            return f"{where} cannot write to {Path(probe).parent}"
        return None

    def run(self, unit) -> tuple[int, int]:
        added = self.engine.run(unit, report=lambda n: self.board.add.remote(self.e, n))
        return added, self.engine.loads


class ProgressBoard:
    """A Ray actor the engines report finished samples to; the driver drains it."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def add(self, e: int, n: int) -> None:
        self.events.append(("progress", e, n))

    def drain(self) -> list[tuple]:
        out, self.events = self.events, []
        return out


def check_engines_see(ray, actors: list, probe: Path, token: str) -> None:
    """UserError (one line) unless every engine reads `token` from `probe` and may write beside it."""
    answers = ray.get([a.check_store.remote(str(probe), token) for a in actors])
    bad = sorted({a for a in answers if a})
    if bad:
        raise UserError(
            f"the results store must be on a filesystem every Ray node mounts at the same path, but {bad[0]}: "
            "pass an --out on shared storage (NFS, Lustre, ...) mounted at the same path on every node"
        )


class RayPool:
    def __init__(self, ray, make_engine: Callable, n: int, tp: int, store_dir: Path) -> None:
        self.ray = ray
        self.n = n
        self.make_engine = make_engine
        gpus = tp if ray.cluster_resources().get("GPU", 0) > 0 else 0
        # Ray sets CUDA_VISIBLE_DEVICES per actor; max_restarts=0: a dead engine is replaced by the driver,
        # which sends its unit to whichever engine is free.
        self.actor_cls = ray.remote(num_cpus=1, num_gpus=gpus, max_restarts=0)(HarnessEngine)
        self.board = ray.remote(num_cpus=0)(ProgressBoard).remote()
        self.actors: dict[int, Any] = {}  # Ray actor handles (ray is untyped)
        self.refs: dict[object, int] = {}
        for e in range(n):
            self.actors[e] = self.actor_cls.remote(make_engine, e, self.board)
        self._check_store(store_dir)

    def _check_store(self, store_dir: Path) -> None:
        token = uuid.uuid4().hex
        probe = store_dir / f".ray-probe-{token}"
        probe.write_text(token)
        try:
            check_engines_see(self.ray, list(self.actors.values()), probe, token)
        finally:
            probe.unlink(missing_ok=True)

    def submit(self, e: int, unit) -> None:
        self.refs[self.actors[e].run.remote(unit)] = e

    def poll(self, timeout: float) -> list[tuple]:
        ray = self.ray
        ready, _ = ray.wait(list(self.refs), num_returns=len(self.refs), timeout=timeout) if self.refs else ([], [])
        if not self.refs:
            time.sleep(timeout)
        events = list(ray.get(self.board.drain.remote()))
        for ref in ready:
            e = self.refs.pop(ref)
            try:
                added, loads = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                events.append(("lost", e, type(exc).__name__))
                continue
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause
                if isinstance(cause, UserError):
                    raise UserError(str(cause)) from None
                raise
            events.append(("done", e, added, loads))
        return events

    def replace(self, e: int) -> None:
        self.actors[e] = self.actor_cls.remote(self.make_engine, e, self.board)

    def close(self) -> None:
        for a in self.actors.values():
            self.ray.kill(a)
        self.ray.kill(self.board)


def _start_local_ray(ray, n: int, attempts: int = 2) -> None:
    """Ray gives a new node 30 s to register, which a busy machine can miss: one more try then."""
    for attempt in range(attempts):
        try:
            ray.init(address="local", num_cpus=max(n, os.cpu_count() or 1), include_dashboard=False)
            return
        except Exception as exc:  # Ray raises a bare Exception for this
            if "timed out during startup" not in str(exc) or attempt == attempts - 1:
                raise
            ray.shutdown()
            print("the local Ray node did not start in time; trying once more", file=sys.stderr)


def _connect_ray(address: str, n: int):
    """(ray module, whether this call started Ray and must shut it down)."""
    try:
        import ray
    except ImportError:
        raise MissingExtra("--ray-address", "pip install 'ray[default]'") from None
    if ray.is_initialized():  # a caller (a notebook, a test) connected already
        return ray, False
    try:
        if address == "local":  # a throwaway one-machine cluster, e.g. for tests
            _start_local_ray(ray, n)
        else:
            ray.init(address=address)
    except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception when a node does not start
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"cannot start or connect to the Ray cluster at {address} ({first}): start it with "
            "`ray start --head` (and `ray start --address HEAD:6379` on the other nodes) or fix --ray-address"
        ) from None
    return ray, True


def run_units(
    make_engine: Callable,
    units: list,
    n: int,
    tp: int = 1,
    ray_address: str | None = None,
    store_dir: str | Path | None = None,
    progress: bool = True,
    max_retries: int = MAX_RETRIES,
) -> RunStats:
    """Run every unit on min(n, len(units)) engines built by `make_engine()` (local processes, or
    Ray actors with `ray_address`); returns what the engines did."""
    n = max(1, min(n, len(units)))
    if not units:
        return RunStats()
    if not ray_address:
        return _drive(LocalPool(make_engine, n, tp), units, progress, max_retries)
    ray, started = _connect_ray(ray_address, n)
    try:
        # absolute: the engines run in other directories (and on other nodes)
        pool = RayPool(ray, make_engine, n, tp, Path(store_dir or ".").resolve())
        return _drive(pool, units, progress, max_retries)
    finally:
        if started:
            ray.shutdown()
