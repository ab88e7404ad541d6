"""`--data-parallel N`: whole checkpoints evaluated by N worker processes at once.

Checkpoints are independent, so each worker takes whole checkpoints (the `run` callable, harness.jobs.run_job)
with its own engine on its own group of `tensor_parallel_size` GPUs (CUDA_VISIBLE_DEVICES set
before the worker imports torch); all workers append to the same store, whose lock makes that
safe (no sample lost or duplicated). On a CPU machine the workers split the cores instead.

With `--ray-address ADDR` (and `pip install ray`) the checkpoints become Ray tasks with
num_gpus = tensor_parallel_size, placed on any node of the cluster, as vLLM itself uses Ray; the
store path must then be on a filesystem every node shares.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from harness.errors import MissingExtra, UserError


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


_SLOT: dict = {}


def _init_worker(slots, threads: int) -> None:
    """Runs first in each worker: claim a slot (position + GPU group) before torch is imported."""
    position, group = slots.get()
    _SLOT["position"] = position
    if group is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = group
    else:
        os.environ["HARNESS_THREADS"] = str(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


def _run_in_worker(run: Callable[..., int], job) -> int:
    try:
        return run(job, position=_SLOT.get("position", 0))
    except UserError as exc:
        # Subclasses with custom __init__ (MissingExtra) do not survive pickling back.
        raise UserError(str(exc)) from None


def run_jobs_parallel(run: Callable[..., int], jobs: list, n: int, tp: int = 1, ray_address: str | None = None) -> int:
    """`run(job, position=i)` for every job on n local workers (or on a Ray cluster); returns the sum."""
    if ray_address:
        return _run_ray(run, jobs, tp, ray_address)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    n = max(1, min(n, len(jobs)))
    groups = device_groups(n, tp)
    threads = max(1, (os.cpu_count() or 1) // n)
    ctx = mp.get_context("spawn")  # fork after torch/CUDA init is unsafe; spawn starts clean
    slots = ctx.Manager().Queue()
    for i, g in enumerate(groups):
        slots.put((i, g))
    with ProcessPoolExecutor(
        max_workers=n, mp_context=ctx, initializer=_init_worker, initargs=(slots, threads)
    ) as pool:
        return sum(f.result() for f in [pool.submit(_run_in_worker, run, job) for job in jobs])


def _run_ray(run: Callable[..., int], jobs: list, tp: int, address: str) -> int:
    try:
        import ray
    except ImportError:
        raise MissingExtra("--ray-address", "pip install 'ray[default]'") from None
    try:
        ray.init(address=address, ignore_reinit_error=True)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise UserError(
            f"cannot connect to the Ray cluster at {address} ({exc}): start it with `ray start --head` or fix --ray-address"
        ) from None
    try:
        import torch

        gpus = tp if torch.cuda.is_available() else 0
    except ImportError:
        gpus = 0
    remote = ray.remote(num_gpus=gpus)(_run_in_worker)  # Ray sets CUDA_VISIBLE_DEVICES per task
    return sum(ray.get([remote.remote(run, job) for job in jobs]))
