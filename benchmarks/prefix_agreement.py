"""How often the prefix engine's greedy predictions equal transformers generate's, per task and length.

    python benchmarks/prefix_agreement.py --model /work/models/smollm2-135m-instruct --dtype bfloat16 \\
        --tasks niah_single_1,niah_multikey_1 --lengths 1k,2k,4k --samples 25

The engine (harness/models/runners/prefix.py: fixed 256-token prefill grid on CPU, prefix reuse on) against
the plain path a user would write: transformers generate on one unpadded row per prompt with SDPA
(the reference `model.generate` call), and, with --padded-batch N, generate on left-padded batches of N
prompts (the runner before issue 28). Reuse on/off is bit-identical by construction (tested in
tests/eval_run/test_prefix_reuse.py), so it is not compared here. In float32 every prediction should
agree; in bfloat16 the grid and the attention merge round differently from one whole-prompt pass,
so a prediction whose top two logits are within rounding can flip: the rate says how often.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def plain(model, tokenizer, stops, pad, ids_list, max_new, rows: int) -> list[list[int]]:
    import torch

    out = []
    for s in range(0, len(ids_list), rows):
        part = ids_list[s : s + rows]
        width = max(map(len, part))
        x = torch.full((len(part), width), pad, dtype=torch.long)
        mask = torch.zeros_like(x)
        for r, ids in enumerate(part):
            x[r, width - len(ids) :] = torch.tensor(ids)
            mask[r, width - len(ids) :] = 1
        with torch.inference_mode():
            gen = model.generate(
                input_ids=x,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=max_new,
                eos_token_id=list(stops) or None,
                pad_token_id=pad,
                temperature=None,
                top_p=None,
                top_k=None,
            )
        for row in gen[:, width:].tolist():
            end = next((k for k, t in enumerate(row) if t in stops), len(row))  # the runner's stop ids
            out.append(row[:end])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tasks", default="niah_single_1,niah_multikey_1")
    ap.add_argument("--lengths", default="1k,2k,4k")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--padded-batch", type=int, default=0, help="also compare left-padded batches of N")
    ap.add_argument("--threads", type=int)
    ap.add_argument(
        "--kernels",
        default="",
        help="the decoding rows' attention kernels to run the engine with, comma-separated "
        "(decode.KERNELS; default: the engine's own); each gets its own agreement column",
    )
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from harness.core.lengths import format_length, parse_lengths
    from harness.models.runners.base import GenerationRequest, RunnerSettings
    from harness.models.runners.common import prompt_ids
    from harness.models.runners.hf import HFRunner
    from tasks.generate import generate_samples
    from tasks.registry import get_task, split_csv

    runner = HFRunner(args.model, RunnerSettings(backend="hf", dtype=args.dtype))
    tok, model = runner.tokenizer, runner.model
    grid = runner.engine.chunk if runner.engine else f"none ({runner.unsupported})"
    kernels = split_csv(args.kernels) or [runner.engine.kernel if runner.engine else "none"]
    print(f"model {args.model} · {args.dtype} · threads {torch.get_num_threads()} · grid {grid}")
    if len(kernels) > 1:
        print(f"engine columns, in order: {', '.join(kernels)} (the decoding rows' attention)")
    print(f"{'task':<16} {'len':>4} {'n':>3} {'same as 1-row generate':>22} {'score eng/plain':>15}" + (
        f" {'same as padded':>14}" if args.padded_batch else ""
    ))  # fmt: skip
    agree = dict.fromkeys(kernels, 0)
    n_total = 0
    for L in parse_lengths(args.lengths):
        for name in split_csv(args.tasks):
            task = get_task(name)
            samples = generate_samples(task, L, range(args.samples), tok)
            reqs = [GenerationRequest(s.prompt, s.max_new_tokens) for s in samples]
            outs, t_eng = {}, {}
            for kernel in kernels:
                if runner.engine is not None:
                    runner.engine.kernel = kernel
                t = time.perf_counter()
                outs[kernel] = runner.generate(reqs)
                t_eng[kernel] = time.perf_counter() - t
            got = outs[kernels[0]]
            ids = [prompt_ids(tok, r.prompt) for r in reqs]
            max_new = samples[0].max_new_tokens
            t = time.perf_counter()
            ref = [
                tok.decode(x, skip_special_tokens=True)
                for x in plain(model, tok, runner.stop_ids, runner.pad_id, ids, max_new, 1)
            ]
            t_ref = time.perf_counter() - t
            same = {k: sum(a == b for a, b in zip(outs[k], ref)) for k in kernels}
            s_eng = "/".join(f"{sum(float(task.score(p, s)) for p, s in zip(outs[k], samples)):.1f}" for k in kernels)
            s_ref = sum(float(task.score(str(p), s)) for p, s in zip(ref, samples))
            same_text = " ".join(f"{same[k]}/{len(reqs)}" for k in kernels)
            line = f"{name:<16} {format_length(L):>4} {len(reqs):>3} {same_text:>22} {s_eng:>7}/{s_ref:<7.1f}"
            if args.padded_batch:
                pad = [
                    tok.decode(x, skip_special_tokens=True)
                    for x in plain(model, tok, runner.stop_ids, runner.pad_id, ids, max_new, args.padded_batch)
                ]
                line += f" {sum(a == b for a, b in zip(got, pad)):>10}/{len(reqs):<3}"
            engine_s = "/".join(f"{t_eng[k]:.0f}" for k in kernels)
            print(line + f"   (engine {engine_s} s, 1-row generate {t_ref:.0f} s)", flush=True)
            agree = {k: agree[k] + same[k] for k in kernels}
            n_total += len(reqs)
    for k in kernels:
        label = f" ({k})" if len(kernels) > 1 else ""
        print(f"agreement{label}: {agree[k]}/{n_total} = {100 * agree[k] / max(1, n_total):.1f}%")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
