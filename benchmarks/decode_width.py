"""Decode width: generated tokens/s of the hf runner's fixed-width decoding (harness/models/runners/decode.py)
at widths 1-16, against width 1 (one row at a time, the engine before it) in the same process.

    python benchmarks/decode_width.py --model /work/models/smollm2-135m-instruct --lengths 1k,4k --threads 2

Each width decodes `--steps` tokens for `width` rows, every row continuing from a prompt of the given
length (a real niah_single_1 prompt, prefilled once and copied into each slot). The width is a constant
of the engine (DECODE_ROWS): this is the measurement that chose it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def time_widths(runner, ids: list[int], widths: list[int], steps: int, head_major: bool = True):
    """Yield (width, seconds per decoding step) for each width: `width` rows, each continuing from
    `ids` (prefilled once, the cache copied into every slot), one warm-up step, then `steps` timed.
    Each step ends in the rows' next tokens on the host, so on CUDA the timing includes the kernels.
    `head_major`: the rows' cache layout (False: laid out as the prefix cache, the engine before)."""
    import torch

    from harness.models.runners.decode import DecodeRows
    from harness.models.runners.prefix import PrefixCache

    engine = runner.engine
    assert engine is not None, runner.unsupported
    cache = PrefixCache()
    with engine.model_attention(), torch.inference_mode():
        first = int(engine.prefill(cache, ids, 0).argmax())
    for width in widths:
        rows = DecodeRows(runner.model, width, eos_id=None, head_major=head_major)
        for w in range(width):
            rows.admit(cache, len(ids), first, w)
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
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
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
    print(f"model {args.model}, {args.dtype}, {args.threads} threads, {args.steps} steps per width")
    print("rows' cache: head = head-major (the engine's), seq = as the prefix cache (the engine before)")
    print(f"{'length':>6} {'cache':>5} {'width':>5} {'step ms':>8} {'tok/s':>7} {'vs width 1':>10} {'vs seq':>7}")
    for length in parse_lengths(args.lengths):
        sample = generate_samples(get_task("niah_single_1"), length, [0], runner.tokenizer)[0]
        ids = list(prompt_ids(runner.tokenizer, sample.prompt))
        seq_rate: dict[int, float] = {}
        for layout in ("seq", "head"):
            base = None
            for width, dt in time_widths(runner, ids, widths, args.steps, head_major=layout == "head"):
                rate = width / dt
                base = base or rate
                seq_rate.setdefault(width, rate)
                print(
                    f"{len(ids):>6} {layout:>5} {width:>5} {dt * 1000:>8.1f} {rate:>7.1f} {rate / base:>9.2f}x"
                    f" {rate / seq_rate[width]:>6.2f}x",
                    flush=True,
                )
    runner.close()


if __name__ == "__main__":
    main()
