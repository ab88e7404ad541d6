"""Training step time of the demo model in bf16 (autocast, as `harness train --dtype bf16`) vs fp32.

    python benchmarks/demo_dtype.py                      # assets/demo-base, window 2048, 20 steps
    python benchmarks/demo_dtype.py --model /work/models/smollm2-135m-instruct --window 1024 --steps 3

`harness demo` trains in the dtype this measures as affordable on CPU (issue 25). Windows come from
the demo's own corpus at that window (harness.demo's corpus settings, seed 3), packed exactly as in
training. Each timed step is forward + loss + backward + AdamW on the same kernel the CPU path
picks (sdpa-doc). The four (mode, dtype) variants alternate step by step, each with its own copy
of the weights and optimizer, so load from other processes on a shared machine hits them alike and
the bf16/fp32 ratio holds; the table gives median wall seconds per step, the median CPU seconds per
step of this process (all threads), and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _windows(model: str, window: int, count: int, long_share: float):
    from harness.demo.config import DemoConfig
    from harness.demo.data import CORPUS_SEED, corpus_settings, line_tokens
    from harness.models.sources import model_tokenizer
    from training.data import TokenizedDoc, anchor_id
    from training.demo_corpus import documents
    from training.packing import pack

    tok = model_tokenizer(model)
    cfg = DemoConfig(model=model, window=window, long_share=long_share)
    eos = tok.eos_token_id
    docs = (
        TokenizedDoc(tok(d["text"], add_special_tokens=False)["input_ids"] + [eos], None, "demo")
        for d in documents(10**6, seed=CORPUS_SEED, **corpus_settings(cfg, line_tokens(tok)))
    )
    it = pack(docs, window, anchor_id(tok), seed=0)
    return [next(it) for _ in range(count)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="demo model: bf16 vs fp32 training step time (see the docstring)")
    ap.add_argument("--model", default=None, help="model directory (default: the shipped assets/demo-base)")
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per variant (after one warm-up step)")
    ap.add_argument("--long-share", type=float, default=0.35)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's default)")
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    from harness.demo.config import DEFAULT_MODEL
    from training.attention import forward_kwargs, gather_logits, prepare_model
    from training.loop import loss_sum, shifted_targets
    from training.modes import build_batch

    if args.threads:
        torch.set_num_threads(args.threads)
    model_path = args.model or str(DEFAULT_MODEL)
    wins = _windows(model_path, args.window, args.steps + 1, args.long_share)
    variants = [(mode, dtype) for mode in ("full", "anchor") for dtype in ("fp32", "bf16")]
    models, opts = {}, {}
    for v in variants:
        # fp32 master weights in both cases: bf16 is autocast, as training/loop.py does it
        m = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32, local_files_only=True)
        m.config.max_position_embeddings = max(m.config.max_position_embeddings, args.window)
        prepare_model(m, "sdpa-doc")
        m.train()
        models[v] = m
        opts[v] = torch.optim.AdamW(m.parameters(), lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1, foreach=False)
    wall: dict = {v: [] for v in variants}
    cpu: dict = {v: [] for v in variants}
    for i in range(args.steps + 1):
        for v in variants:
            mode, dtype = v
            batch = build_batch([wins[i]], mode)
            t0, c0 = time.perf_counter(), time.process_time()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
                logits = models[v](**forward_kwargs(batch, "sdpa-doc")).logits
            targets = shifted_targets(batch.labels)
            loss = loss_sum(gather_logits(logits, batch, "sdpa-doc"), targets) / max(int((targets != -100).sum()), 1)
            loss.backward()
            opts[v].step()
            opts[v].zero_grad(set_to_none=True)
            if i:  # the first step warms up allocators and kernels
                wall[v].append(time.perf_counter() - t0)
                cpu[v].append(time.process_time() - c0)
    print(
        f"\n{Path(model_path).name}, window {args.window}, batch 1, sdpa-doc, {torch.get_num_threads()} threads, "
        f"median of {args.steps} steps (variants interleaved)"
    )
    print(
        f"{'mode':>7} {'fp32 s/step':>12} {'bf16 s/step':>12} {'bf16/fp32':>10} {'fp32 CPU s':>11} {'bf16 CPU s':>11}"
    )
    for mode in ("full", "anchor"):
        f, b = statistics.median(wall[mode, "fp32"]), statistics.median(wall[mode, "bf16"])
        fc, bc = statistics.median(cpu[mode, "fp32"]), statistics.median(cpu[mode, "bf16"])
        print(f"{mode:>7} {f:>12.3f} {b:>12.3f} {b / f:>10.2f} {fc:>11.3f} {bc:>11.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
