"""Harness overhead on the transformers runner: `harness eval` wall time vs a bare generate loop.

    OMP_NUM_THREADS=2 python benchmarks/eval_overhead.py                       # embedded tiny Llama
    python benchmarks/eval_overhead.py --model runs/anchor/ckpt-2000 --lengths 4k,8k --samples 32

Both sides run in this process on the same prompts (RULER niah_single_1 samples, generated and
cached before timing), the same model directory, batch size, dtype and device, and both include
loading the model. The bare side is what a hand-written script would do: left-pad each batch
of prompts in the order given, `model.generate` greedily, decode. The harness side is the whole
`run_eval` of one length into a fresh store: planning, store writes, scoring, aggregation and
results.json. Target: overhead <= 10%. Prints samples/s per length for both and the ratio, in
wall time and in process CPU time (steadier when other jobs share the cores).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def bare_loop(model_path: str, prompts: list[str], max_new: int, batch_size: int, dtype: str) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    tok.padding_side = "left"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    kw = {} if dtype == "auto" else {"dtype": getattr(torch, dtype)}
    model = AutoModelForCausalLM.from_pretrained(model_path, attn_implementation="sdpa", **kw).to(device).eval()  # type: ignore[arg-type]  # functools.wraps on .to hides the bound self
    outs = []
    for i in range(0, len(prompts), batch_size):
        enc = tok(prompts[i : i + batch_size], return_tensors="pt", padding=True).to(device)
        with torch.inference_mode():
            gen = model.generate(
                **enc,
                do_sample=False,
                max_new_tokens=max_new,
                pad_token_id=tok.pad_token_id,
                temperature=None,
                top_p=None,
                top_k=None,
            )
        outs += tok.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return outs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="checkpoint dir (default: an embedded tiny Llama built in a temp dir)")
    ap.add_argument("--task", default="niah_single_1")
    ap.add_argument("--lengths", default="1k,2k,4k")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--repeats", type=int, default=3, help="best of N for each side")
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(tempfile.mkdtemp(prefix="eval-overhead-"))
    os.environ.setdefault("HARNESS_CACHE", str(work / "cache"))
    from harness.core.lengths import format_length, parse_lengths
    from harness.models.embedded import build_tiny_llama, default_tokenizer_dir
    from harness.models.sources import model_tokenizer
    from harness.pipeline.evaluate import EvalConfig, run_eval
    from tasks.generate import generate_samples
    from tasks.registry import get_task

    model = args.model or str(build_tiny_llama(work / "run" / "ckpt-1", default_tokenizer_dir()))
    tokenizer = model_tokenizer(model)
    task = get_task(args.task)
    rows = []
    for L in parse_lengths(args.lengths):
        samples = generate_samples(task, L, range(args.samples), tokenizer)  # warm the cache: not timed
        prompts = [s.prompt for s in samples]
        t_bare = t_harness = c_bare = c_harness = float("inf")
        for r in range(args.repeats):
            cfg = EvalConfig(
                ckpts=model,
                tasks=[args.task],
                lengths=str(L),
                samples=args.samples,
                batch_size=args.batch_size,
                dtype=args.dtype,
                out=str(work / f"out-{L}-{r}"),
                progress=False,
            )
            # Alternate which side goes first: a shared machine's load drifts during a run.
            for side in ("bare", "harness") if r % 2 == 0 else ("harness", "bare"):
                t0, c0 = time.perf_counter(), time.process_time()
                if side == "bare":
                    bare_loop(model, prompts, samples[0].max_new_tokens, args.batch_size, args.dtype)
                    t_bare, c_bare = min(t_bare, time.perf_counter() - t0), min(c_bare, time.process_time() - c0)
                else:
                    run_eval(cfg, print_table=False)
                    t_harness, c_harness = (
                        min(t_harness, time.perf_counter() - t0),
                        min(c_harness, time.process_time() - c0),
                    )
        rows.append(
            (format_length(L), args.samples / t_bare, args.samples / t_harness, t_bare, t_harness, c_bare, c_harness)
        )

    print(
        f"\nmodel {model} · task {args.task} · {args.samples} samples · batch {args.batch_size} · best of {args.repeats}"
    )
    print(
        f"{'length':>6}  {'bare s':>7}  {'harness s':>9}  {'bare samp/s':>11}  {'harness samp/s':>14}  "
        f"{'overhead':>8}  {'bare cpu s':>10}  {'harness cpu s':>13}  {'cpu overhead':>12}"
    )
    tot = [0.0] * 4
    for name, sb, sh, b, h, cb, ch in rows:
        tot = [x + y for x, y in zip(tot, (b, h, cb, ch))]
        print(
            f"{name:>6}  {b:7.2f}  {h:9.2f}  {sb:11.2f}  {sh:14.2f}  {100 * (h / b - 1):+7.1f}%  {cb:10.2f}  {ch:13.2f}  "
            f"{100 * (ch / cb - 1):+11.1f}%"
        )
    b, h, cb, ch = tot
    print(
        f"{'all':>6}  {b:7.2f}  {h:9.2f}  {'':>11}  {'':>14}  {100 * (h / b - 1):+7.1f}%  {cb:10.2f}  {ch:13.2f}  "
        f"{100 * (ch / cb - 1):+11.1f}%   target <= +10%"
    )
    print("cpu s = this process's CPU time (all threads): steadier than wall time on a shared machine")


if __name__ == "__main__":
    main()
