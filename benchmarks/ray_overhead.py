"""What the distributed engine costs: a 2-engine local Ray run against the serial run on the same units.

    python benchmarks/ray_overhead.py                          # 3 embedded tiny Llamas, vt + fwe, 1k
    python benchmarks/ray_overhead.py --samples 16 --shard     # sample ranges instead of whole checkpoints

Every side evaluates the same plan (same checkpoints, tasks, samples, batch size) into a fresh
store, in this process: serial (`run_job` per checkpoint, what `harness eval` does without
--data-parallel), 2 local worker processes, and 2 Ray engines on a local cluster started here
(`ray.init(address="local")`, 2 CPUs). Ray's start-up (`ray.init` until the cluster answers) is
timed on its own and left out of the Ray row, so the row shows the engine's own overhead; the
`+start-up` column adds it back. Each side's records are checked equal to the serial side's.
On a 2-core machine two engines cannot beat one by much (both share the cores): the ratio shows
the price of processes, model loads and scheduling, not a speed-up; on a GPU cluster each engine
has its own device. Wall times, so run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _records(out: Path) -> dict:
    lines = (out / "samples.jsonl").read_text().splitlines()[1:]
    recs = [json.loads(x) for x in lines]
    keyed = {
        (r["checkpoint"]["fingerprint"], r["task"], r["length"], r["index"]): (r["prediction"], r["score"])
        for r in recs
    }
    assert len(keyed) == len(recs), f"{out}: a key was stored twice"
    return keyed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", type=int, default=3, help="tiny checkpoints to evaluate (default 3)")
    ap.add_argument("--tasks", default="vt,fwe")
    ap.add_argument("--lengths", default="1k")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--shard", action="store_true", help="--shard-samples: sample ranges as units")
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    work = Path(tempfile.mkdtemp(prefix="ray-overhead-"))
    os.environ.setdefault("HARNESS_CACHE", str(work / "cache"))
    # Ray's workers must import this checkout, whatever the current directory.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")])
    )
    from harness.pipeline import embedded_eval
    from harness.pipeline.engine import JobEngine
    from harness.pipeline.evaluate import EvalConfig, plan_eval, run_job, work_units
    from harness.pipeline.parallel import run_units

    steps = tuple(10 * (i + 1) for i in range(args.checkpoints))
    spec = embedded_eval.ensure_checkpoints(work / "run", steps)

    def plan(side: str):
        cfg = EvalConfig(
            ckpts=spec,
            tasks=args.tasks.split(","),
            lengths=args.lengths,
            samples=args.samples,
            batch_size=args.batch_size,
            out=str(work / side),
            progress=False,
            data_parallel=args.engines,
            shard_samples=args.shard,
        )
        p = plan_eval(cfg)  # builds (then caches) the samples: not timed
        return p, work_units(p.jobs, args.engines, args.shard)

    rows: list[tuple[str, float, float | None, int, int]] = []  # name, seconds, start-up seconds, loads, units
    serial_plan, units = plan("serial")
    t0 = time.perf_counter()
    for job in serial_plan.jobs:
        run_job(job)
    t_serial = time.perf_counter() - t0
    reference = _records(serial_plan.out)
    rows.append(("serial", t_serial, None, len(serial_plan.jobs), len(serial_plan.jobs)))

    local_plan, units = plan("local")
    t0 = time.perf_counter()
    stats = run_units(JobEngine, units, args.engines, progress=False)
    rows.append((f"local x{args.engines}", time.perf_counter() - t0, None, stats.loads, stats.units))
    assert _records(local_plan.out) == reference, "local workers' records differ from the serial run's"

    import ray

    ray_plan, units = plan("ray")
    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=args.engines, include_dashboard=False, log_to_driver=False)
    t_start = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        stats = run_units(JobEngine, units, args.engines, ray_address="local", store_dir=ray_plan.out, progress=False)
        t_ray = time.perf_counter() - t0
    finally:
        ray.shutdown()
    rows.append((f"ray x{args.engines}", t_ray, t_start, stats.loads, stats.units))
    assert _records(ray_plan.out) == reference, "Ray engines' records differ from the serial run's"

    n = len(reference)
    print(
        f"\n{args.checkpoints} checkpoints · tasks {args.tasks} · {args.lengths} · {args.samples} samples · "
        f"batch {args.batch_size} · {n} records · units: {'sample ranges' if args.shard else 'auto'} · "
        f"{os.cpu_count()} cores"
    )
    print(
        f"{'side':>9}  {'wall s':>7}  {'samp/s':>7}  {'vs serial':>9}  {'start-up s':>10}  {'+start-up':>9}  {'loads':>5}  {'units':>5}"
    )
    for name, t, start, loads, nunits in rows:
        start_s = f"{start:10.2f}" if start is not None else " " * 10
        with_start = f"{(t + start) / t_serial:8.2f}x" if start is not None else " " * 9
        print(
            f"{name:>9}  {t:7.2f}  {n / t:7.2f}  {t / t_serial:8.2f}x  {start_s}  {with_start}  {loads:5d}  {nunits:5d}"
        )


if __name__ == "__main__":
    main()
