"""How often the rows' batched decoding attention gives the greedy predictions of attending each row alone.

    python benchmarks/decode_agreement.py --model /work/models/smollm2-135m-instruct --dtype bfloat16 \\
        --tasks niah_single_1,niah_multikey_2,vt,fwe --lengths 1k,2k,4k --samples 25

The hf runner decodes its rows in one attention call per layer (`sdpa-padded-512`: keys padded to a
multiple of 512 under a per-row mask, harness/models/runners/decode.py); before issue 37 each row
attended alone (`per-row`). The two sum the same weights in another order, so their logits differ by
rounding, and a greedy prediction can change where its two best tokens are that close. This runs the
same runner (same prefill, same width, same prompts) once per kernel and counts the predictions that
are the same text, and the samples whose score is the same, per task and length; it also sums both
kernels' scores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tasks", default="niah_single_1,niah_multikey_2,vt,fwe")
    ap.add_argument("--lengths", default="1k,2k,4k")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--kernels", default="sdpa-padded-512,per-row", help="the kernel under test, then the reference")
    ap.add_argument("--threads", type=int)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from harness.core.lengths import format_length, parse_lengths
    from harness.models.runners.base import GenerationRequest, RunnerSettings
    from harness.models.runners.hf import HFRunner
    from tasks.generate import generate_samples
    from tasks.registry import get_task, split_csv

    tested, reference = args.kernels.split(",")
    runner = HFRunner(args.model, RunnerSettings(backend="hf", dtype=args.dtype))
    assert runner.engine is not None, runner.unsupported
    print(f"model {args.model} · {args.dtype} · threads {torch.get_num_threads()} · {tested} against {reference}")
    print(
        f"{'task':<16} {'len':>4} {'n':>3} {'same prediction':>15} {'same score':>11} {'score ' + tested + '/' + reference:>25}"
    )
    same_total = score_total = n_total = 0
    for L in parse_lengths(args.lengths):
        for name in split_csv(args.tasks):
            task = get_task(name)
            samples = generate_samples(task, L, range(args.samples), runner.tokenizer)
            reqs = [GenerationRequest(s.prompt, s.max_new_tokens) for s in samples]
            preds, seconds = {}, {}
            for kernel in (tested, reference):
                runner.engine.kernel = kernel
                t = time.perf_counter()
                preds[kernel] = runner.generate(reqs)
                seconds[kernel] = time.perf_counter() - t
            same = sum(a == b for a, b in zip(preds[tested], preds[reference]))
            per_sample = [[float(task.score(p, s)) for p, s in zip(preds[k], samples)] for k in (tested, reference)]
            same_score = sum(a == b for a, b in zip(*per_sample))
            print(
                f"{name:<16} {format_length(L):>4} {len(reqs):>3} {same:>9}/{len(reqs):<5} {same_score:>6}/{len(reqs):<4}"
                f" {sum(per_sample[0]):>14.1f}/{sum(per_sample[1]):<10.1f}"
                f" ({tested} {seconds[tested]:.0f} s, {reference} {seconds[reference]:.0f} s)",
                flush=True,
            )
            same_total, score_total, n_total = same_total + same, score_total + same_score, n_total + len(reqs)
    print(f"same prediction: {same_total}/{n_total} = {100 * same_total / max(1, n_total):.1f}%")
    print(f"same score: {score_total}/{n_total} = {100 * score_total / max(1, n_total):.1f}%")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    runner.close()


if __name__ == "__main__":
    main()
