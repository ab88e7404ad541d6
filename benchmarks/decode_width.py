"""Decode width: generated tokens/s of the hf runner's fixed-width decoding (harness/models/runners/decode.py)
at widths 1-16, against width 1 and against the per-row attention kernel, in the same process.

    python benchmarks/decode_width.py --model /work/models/smollm2-135m-instruct --lengths 1k,4k --threads 2

Each width decodes `--steps` tokens for `width` rows, every row continuing from a prompt of the given
length (a real niah_single_1 prompt, prefilled once and copied into each slot). Each width runs with
each of `--kernels` (decode.KERNELS): the engine's (`sdpa-padded-512`: one attention call per layer
for all rows) and `per-row` (each row attends alone: the engine before issue 37). The width is a
constant of the engine (DECODE_ROWS): this is the measurement that chose it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def time_widths(runner, ids: list[int], widths: list[int], steps: int, kernel: str | None = None):
    """Yield (width, seconds per decoding step) for each width: `width` rows, each continuing from
    `ids` (prefilled once, the cache copied into every slot), one warm-up step, then `steps` timed.
    Each step ends in the rows' next tokens on the host, so on CUDA the timing includes the kernels.
    `kernel`: the rows' attention (decode.KERNELS; default the engine's)."""
    import torch

    from harness.models.runners.common import DECODE_ATTENTION
    from harness.models.runners.decode import DecodeRows
    from harness.models.runners.prefix import PrefixCache

    engine = runner.engine
    assert engine is not None, runner.unsupported
    cache = PrefixCache()
    with engine.model_attention(), torch.inference_mode():
        first = int(engine.prefill(cache, ids, 0).argmax())
    for width in widths:
        rows = DecodeRows(runner.model, width, eos_id=None, kernel=kernel or DECODE_ATTENTION)
        with torch.inference_mode():
            for w in range(width):
                rows.admit(cache, len(ids), first, w, room=steps + 1)
        limits = {w: 10**9 for w in range(width)}
        with engine.model_attention(), torch.inference_mode():
            list(rows.step(limits))  # warm-up
            t = time.perf_counter()
            for _ in range(steps):
                list(rows.step(limits))
            dt = (time.perf_counter() - t) / steps
        del rows
        yield width, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--lengths", default="1k,4k")
    ap.add_argument("--widths", default="1,2,4,8,16")
    ap.add_argument("--kernels", default="per-row,sdpa-padded-512", help="the rows' attention kernels to time")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="time each width this many times, keep the best")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    from harness.core.lengths import parse_lengths
    from harness.models.runners.base import RunnerSettings
    from harness.models.runners.common import prompt_ids
    from harness.models.runners.hf import HFRunner
    from tasks.generate import generate_samples
    from tasks.registry import get_task

    runner = HFRunner(args.model, RunnerSettings(backend="hf", dtype=args.dtype))
    widths = [int(w) for w in args.widths.split(",")]
    kernels = args.kernels.split(",")
    print(
        f"model {args.model}, {args.dtype}, {args.threads} threads, {args.steps} steps per width, best of {args.repeats}"
    )
    print(
        f"{'length':>6} {'kernel':>15} {'width':>5} {'step ms':>8} {'tok/s':>7} {'vs width 1':>10} {'vs ' + kernels[0]:>10}"
    )
    for length in parse_lengths(args.lengths):
        sample = generate_samples(get_task("niah_single_1"), length, [0], runner.tokenizer)[0]
        ids = list(prompt_ids(runner.tokenizer, sample.prompt))
        first_rate: dict[int, float] = {}
        for kernel in kernels:
            best = {width: float("inf") for width in widths}
            for _ in range(args.repeats):  # on a shared machine the best of several is the machine's speed
                for width, dt in time_widths(runner, ids, widths, args.steps, kernel=kernel):
                    best[width] = min(best[width], dt)
            base = None
            for width, dt in best.items():
                rate = width / dt
                base = base or rate
                first_rate.setdefault(width, rate)
                print(
                    f"{len(ids):>6} {kernel:>15} {width:>5} {dt * 1000:>8.1f} {rate:>7.1f} {rate / base:>9.2f}x"
                    f" {rate / first_rate[width]:>9.2f}x",
                    flush=True,
                )
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    runner.close()


if __name__ == "__main__":
    main()
