"""Utilisation of the transformers runner: prompt and generated tokens/s and achieved FLOP/s against
the machine's measured matmul peak, per task and length, with shared-prefix reuse on and off.

    OMP_NUM_THREADS=2 python benchmarks/eval_throughput.py                   # embedded tiny Llama, quick
    python benchmarks/eval_throughput.py --model /work/models/smollm2-135m-instruct --lengths 1k,2k,4k \\
        --dtypes bfloat16,float32 --samples 8 --threads 2

Per (task, length, dtype) the same prompts (RULER samples, generated and tokenized before timing)
run through HFRunner.generate_each twice in this process, reuse on and off, alternating which goes
first. Printed per row: wall and CPU seconds, prompt tokens/s (all prompt tokens over the prefill
time, so reuse raises it) and generated tokens/s (over the decoding time), achieved GFLOP/s (the
FLOPs actually computed over the run's wall time) and its share of the peak, the share of prompt
tokens reused, the share that is a prefix of another prompt of the cell token by token (`shared`:
the most any prefix reuse could skip; the engine's grid reuses whole chunks only), the prefill
seconds, and the time ratios reuse on / off, whole and prefill alone (target for niah tasks at 4K:
whole <= 0.6). The reused tokens are each prompt's beginning, the cheapest to compute (a token's
attention grows with its position), so prefill time falls by less than the share reused.

FLOPs come from the model's shape (benchmarks/utilisation.py says how). The peak is a large
torch.matmul in each dtype timed in this process with the same threads. CPU seconds (all threads of
this process) are steadier than wall seconds when other jobs share the cores; the load average is
printed with the table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.ruler import RULER_TASKS  # after the sys.path line above

sys.path.insert(0, str(Path(__file__).resolve().parent))
from utilisation import Shape, matmul_peak

# RULER's tasks that need no downloaded QA data (qa_1/qa_2 read SQuAD and HotpotQA)
RULER_OFFLINE = ",".join(t for t in RULER_TASKS if not t.startswith("qa_"))


def shared_tokens(prompts: list[list[int]]) -> int:
    """Prompt tokens that are a prefix of another prompt of the cell, token by token (no grid): the
    most that any prefix reuse could skip. In lexicographic order a prompt's longest common prefix
    with any other prompt is the one with a neighbour; the first prompt of a chain is computed whole."""
    from harness.models.runners.prefix import reuse_plan

    _, reused = reuse_plan(prompts, chunk=1, reuse=True)
    return sum(reused)


def run_cell(runner, reqs, shape: Shape) -> dict:
    t, c = time.perf_counter(), time.process_time()
    texts, stats = {}, {}
    for i, text, _ in runner.generate_each(reqs):
        texts[i] = text
        stats[i] = dict(runner.sample_stats[i])
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    prompt = sum(s["prompt_tokens"] for s in stats.values())
    reused = sum(s["reused_tokens"] for s in stats.values())
    new = sum(s["new_tokens"] for s in stats.values())
    prefill = sum(s.get("prefill_seconds", 0.0) for s in stats.values())
    flops = sum(shape.sample(s["prompt_tokens"], s["reused_tokens"], s["new_tokens"]) for s in stats.values())
    return {
        "texts": [texts[i] for i in range(len(reqs))],
        "wall": wall,
        "cpu": cpu,
        "prompt": prompt,
        "reused": reused,
        "new": new,
        "prefill": prefill,
        "decode": max(1e-9, wall - prefill),
        "flops": flops,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="checkpoint dir (default: an embedded tiny Llama built in a temp dir)")
    ap.add_argument("--tasks", default=RULER_OFFLINE)
    ap.add_argument("--lengths", default="1k,2k,4k")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    ap.add_argument("--no-off", action="store_true", help="reuse on only (no on/off comparison)")
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="eval-throughput-"))
    os.environ.setdefault("HARNESS_CACHE", str(work / "cache"))
    from harness.core.lengths import format_length, parse_lengths
    from harness.models.embedded import build_tiny_llama, default_tokenizer_dir
    from harness.models.runners.base import GenerationRequest, RunnerSettings
    from harness.models.runners.common import prompt_ids
    from harness.models.runners.hf import HFRunner
    from harness.models.sources import model_tokenizer
    from tasks.generate import generate_samples
    from tasks.registry import get_task, split_csv

    model = args.model or str(build_tiny_llama(work / "run" / "ckpt-1", default_tokenizer_dir()))
    tokenizer = model_tokenizer(model)
    dtypes = split_csv(args.dtypes)
    peaks = {d: matmul_peak(getattr(torch, d)) for d in dtypes}
    print(f"model {model} · threads {torch.get_num_threads()} · {args.samples} samples per cell", flush=True)
    print("matmul peak (2048^3, best of ~2 s): " + ", ".join(f"{d} {p:.1f} GFLOP/s" for d, p in peaks.items()))
    header = (
        f"{'task':<16} {'len':>4} {'dtype':>8} {'reuse':>5} {'wall s':>7} {'cpu s':>7} {'prompt tok/s':>12} "
        f"{'gen tok/s':>9} {'GFLOP/s':>8} {'% peak':>6} {'reused':>6} {'shared':>6} {'prefill s':>9} "
        f"{'on/off':>6} {'pf on/off':>9}"
    )
    print(header, flush=True)
    totals: dict[tuple, list[float]] = {}
    for dtype in dtypes:
        runners = {
            reuse: HFRunner(model, RunnerSettings(backend="hf", dtype=dtype, prefix_reuse=reuse))
            for reuse in ((True,) if args.no_off else (True, False))
        }
        shape = Shape(runners[True].model)
        for L in parse_lengths(args.lengths):
            for name in split_csv(args.tasks):
                samples = generate_samples(get_task(name), L, range(args.samples), tokenizer)
                reqs = [GenerationRequest(s.prompt, s.max_new_tokens) for s in samples]
                t = time.perf_counter()
                ids = [prompt_ids(runners[True].tokenizer, r.prompt) for r in reqs]
                tokenize = time.perf_counter() - t
                # Alternate which side goes first: a shared machine's load drifts during a run.
                sides = sorted(runners, reverse=len(totals) % 2 == 0)
                cells = {reuse: run_cell(runners[reuse], reqs, shape) for reuse in sides}
                if len(cells) == 2:
                    assert cells[True]["texts"] == cells[False]["texts"], f"{name} {L}: reuse changed an output"
                shared = shared_tokens(ids)
                for reuse, c in sorted(cells.items(), reverse=True):
                    acc = totals.setdefault((dtype, L, reuse), [0.0, 0.0, 0.0])
                    acc[0] += c["wall"]
                    acc[1] += c["cpu"]
                    acc[2] += c["prefill"]
                    both = len(cells) == 2 and reuse
                    ratio = cells[True]["wall"] / cells[False]["wall"] if both else float("nan")
                    pf_ratio = cells[True]["prefill"] / cells[False]["prefill"] if both else float("nan")
                    gflops = c["flops"] / c["wall"] / 1e9
                    print(
                        f"{name:<16} {format_length(L):>4} {dtype[:8]:>8} {'on' if reuse else 'off':>5} "
                        f"{c['wall']:7.1f} {c['cpu']:7.1f} {c['prompt'] / max(1e-9, c['prefill']):12.0f} "
                        f"{c['new'] / c['decode']:9.1f} {gflops:8.1f} {100 * gflops / peaks[dtype]:5.0f}% "
                        f"{100 * c['reused'] / max(1, c['prompt']):5.0f}% {100 * shared / max(1, c['prompt']):5.0f}% "
                        f"{c['prefill']:9.1f} {ratio:6.2f} {pf_ratio:9.2f}",
                        flush=True,
                    )
                print(f"{'':<16} tokenizing {len(reqs)} prompts: {tokenize:.2f} s", flush=True)
        for runner in runners.values():
            runner.close()
    print("\ntotals (wall s, cpu s, prefill s) per dtype and length:")
    for (dtype, L, reuse), (wall_s, cpu_s, prefill_s) in sorted(totals.items()):
        base = totals.get((dtype, L, False))
        ratio = (
            f"  on/off {wall_s / base[0]:.2f} (cpu {cpu_s / base[1]:.2f}, prefill {prefill_s / base[2]:.2f})"
            if reuse and base
            else ""
        )
        print(
            f"  {dtype:>8} {format_length(L):>4} reuse {'on' if reuse else 'off':>3}: "
            f"{wall_s:8.1f} {cpu_s:8.1f} {prefill_s:8.1f}{ratio}"
        )
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
