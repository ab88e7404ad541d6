"""Training step time and attention pairs kept: anchor vs full attention, same windows, same model.

    python benchmarks/train_step.py                       # CPU section: 4K/8K/16K, small Llama, sdpa-doc
    python benchmarks/train_step.py --lengths 4096 --steps 2
    python benchmarks/train_step.py --section cuda        # CUDA: 16K-64K, ~1B random Llama, varlen, bf16
    python benchmarks/train_step.py --section cuda-check  # CUDA: bf16 logits of varlen/flex vs dense
    python benchmarks/train_step.py --section probes      # in-loop probes' cost at the demo's window (CPU or CUDA)

Documents: lengths drawn from a lognormal with mean 2000 tokens and sigma 1.0 (SlimPajama-like:
many short documents, a few long ones), random token ids, packed by training.packing exactly as in
training ([anchor] + L-1 tokens, remainders carried over). Both modes run the same windows through
the same kernel (only the mask differs): sdpa-doc on CPU, varlen (anchor-copy layout) on CUDA,
whose "full" mode is one causal sequence per window. A step is forward + loss + backward + AdamW,
as in training/step.py. The table gives the median step time per mode, the anchor/full ratio
(target: <= 0.5 at 16K on CPU and at 64K on CUDA) and the fraction of causal attention pairs the
anchor mask keeps (counted from the segments, checked against the dense mask at 4K).

Section probes: the in-loop probes (training/probes.py) against training steps of the demo's base
model (assets/demo-base) at the demo's window and dtype (2048, bf16 autocast, sdpa-doc on CPU,
varlen on CUDA, anchor mode, batch 1), in one process: rounds of --probe-steps training steps, each
followed by one run of the probes, so load from other processes hits both alike. It prints the
median step and probe times (each probe's share too) and the training time of one --probe-every
interval without and with the probes, and their ratio (target: <= 1.02 at the default interval).

Imports stay lazy and use only torch + transformers (CUDA machines lack datasets, jinja2, lm-eval).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MEAN_DOC_TOKENS = 2000
SIGMA = 1.0


class _Doc:
    def __init__(self, ids):
        self.ids, self.tag_ids, self.source = ids, None, "lognormal"


def windows(window: int, count: int, vocab: int, seed: int = 0):
    """`count` packed windows of lognormal-length documents (mean MEAN_DOC_TOKENS), anchor id 0."""
    import random

    from training.packing import pack

    rng = random.Random(seed)
    mu = math.log(MEAN_DOC_TOKENS) - SIGMA**2 / 2  # lognormal mean = exp(mu + sigma^2 / 2)

    def docs():
        while True:
            n = max(2, int(rng.lognormvariate(mu, SIGMA)))
            yield _Doc([rng.randrange(3, vocab) for _ in range(n - 1)] + [1])  # ends in "EOS" 1

    it = pack(docs(), window, 0, seed=seed)
    return [next(it) for _ in range(count)]


def pairs_kept(batch) -> float:
    """Anchor-mask attention pairs / full causal pairs over the batch, from the kernels' segment plan."""
    from training.attention.segments import pairs_kept as kept

    B, L = batch.input_ids.shape
    return sum(kept(row, "anchor") for row in batch.doc_ids.tolist()) / (B * L * (L + 1) // 2)


def pairs_kept_dense(batch) -> float:
    """The same fraction counted on the dense boolean mask (reference; O(L^2) memory)."""
    from training.attention.dense import dense_mask

    L = batch.input_ids.shape[1]
    return dense_mask(batch.doc_ids, "anchor").sum().item() / (batch.input_ids.shape[0] * L * (L + 1) // 2)


def small_llama(vocab: int, *, hidden: int, layers: int, heads: int, intermediate: int, max_pos: int, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_pos,
        rope_theta=5e6,  # type: ignore[call-arg]  # legacy kwarg, still accepted; not in 5.x's signature
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        tie_word_embeddings=False,
        use_cache=False,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def step_times(models: dict, wins, kernel: str, *, steps: int, dtype, device) -> dict[str, list[float]]:
    """Seconds per training step for each mode's model (warm-up step excluded).

    The modes alternate step by step, so load from other processes on a shared machine hits both
    alike and the ratio stays meaningful.
    """
    import torch

    from training.attention import prepare_model
    from training.modes import build_batch

    opts = {}
    for mode, model in models.items():
        prepare_model(model, kernel)
        opts[mode] = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1, foreach=False)
    times: dict[str, list[float]] = {mode: [] for mode in models}
    for i in range(steps + 1):
        for mode, model in models.items():
            batch = build_batch([wins[i % len(wins)]], mode).to(device)
            seconds = train_step(model, opts[mode], batch, kernel, dtype=dtype, device=device)
            if i:
                times[mode].append(seconds)
    return times


def train_step(model, optimizer, batch, kernel: str, *, dtype, device) -> float:
    """Seconds of one training step on `batch`: forward, token-mean loss, backward, AdamW (training/step.py)."""
    import torch

    from training.attention import forward_kwargs, gather_logits
    from training.loop import loss_sum, shifted_targets

    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        logits = model(**forward_kwargs(batch, kernel)).logits
    targets = shifted_targets(batch.labels)
    loss = loss_sum(gather_logits(logits, batch, kernel), targets) / max(int((targets != -100).sum()), 1)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def _table(rows: list[dict], title: str) -> None:
    print(f"\n{title}")
    print(
        f"{'window':>8} {'full s/step':>12} {'anchor s/step':>14} {'anchor/full':>12} {'pairs kept':>11} {'target':>9}"
    )
    for r in rows:
        print(
            f"{r['window']:>8} {r['full']:>12.3f} {r['anchor']:>14.3f} {r['ratio']:>12.2f} {100 * r['pairs']:>10.1f}% "
            f"{target_verdict(r):>9}"
        )


def target_verdict(r: dict) -> str:
    """'ok <=0.5' / 'FAIL >0.5' on the target row (16K on CPU, 64K on CUDA), else blank."""
    if not r["target"]:
        return ""
    return "ok <=0.5" if r["ratio"] <= 0.5 else "FAIL >0.5"


def run_cpu(args) -> list[dict]:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    # A small vocabulary keeps the LM head from hiding attention, as in a real model at 16K+ tokens.
    vocab = 1024
    rows = []
    for L in args.lengths:
        wins = windows(L, args.steps + 1, vocab)
        from training.modes import build_batch

        pairs = pairs_kept(build_batch(wins, "anchor"))  # over every window the steps use
        if L <= 4096:  # the segment count must equal the dense mask's
            dense = pairs_kept_dense(build_batch(wins, "anchor"))
            assert abs(dense - pairs) < 1e-12, (dense, pairs)
        models = {
            mode: small_llama(vocab, hidden=128, layers=2, heads=2, intermediate=344, max_pos=L)
            for mode in ("full", "anchor")
        }
        times = step_times(models, wins, "sdpa-doc", steps=args.steps, dtype=torch.float32, device=device)
        res = {mode: statistics.median(t) for mode, t in times.items()}
        rows.append({"window": L, **res, "ratio": res["anchor"] / res["full"], "pairs": pairs, "target": L == 16384})
        print(f"  {L}: full {res['full']:.3f}s anchor {res['anchor']:.3f}s", flush=True)
    _table(
        rows,
        f"CPU, Llama hidden 128 x 2 layers, 2 heads of 64, vocab {vocab}, fp32, sdpa-doc, {torch.get_num_threads()} threads, "
        f"batch 1, median of {args.steps} steps, docs lognormal mean {MEAN_DOC_TOKENS} sigma {SIGMA}",
    )
    return rows


def run_cuda(args) -> list[dict]:
    import torch

    if not torch.cuda.is_available():
        print("section cuda: skipped, no CUDA device here (run it on a GPU machine)")
        return []
    device = torch.device("cuda")
    vocab = 32000
    rows = []
    for L in args.cuda_lengths:
        wins = windows(L, args.steps + 1, vocab)
        from training.modes import build_batch

        pairs = pairs_kept(build_batch(wins, "anchor"))
        res = {}
        for mode in ("full", "anchor"):  # one 1B model (+ AdamW state) at a time fits any 80 GB GPU
            # ~1.1B parameters: Llama-style 2048 x 16 layers, 16 heads of 128.
            model = small_llama(vocab, hidden=2048, layers=16, heads=16, intermediate=5632, max_pos=L).to(device)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            torch.cuda.reset_peak_memory_stats()
            res[mode] = statistics.median(
                step_times({mode: model}, wins, "varlen", steps=args.steps, dtype=torch.bfloat16, device=device)[mode]
            )
            res[f"{mode}_peak"] = torch.cuda.max_memory_allocated()  # bytes: weights, AdamW state, activations
            del model
            torch.cuda.empty_cache()
        rows.append({"window": L, **res, "ratio": res["anchor"] / res["full"], "pairs": pairs, "target": L == 65536})
        print(f"  {L}: full {res['full']:.3f}s anchor {res['anchor']:.3f}s", flush=True)
    _table(
        rows,
        f"CUDA {torch.cuda.get_device_name()}, ~1.1B random Llama, bf16 autocast, varlen, grad checkpointing, "
        f"batch 1, median of {args.steps} steps",
    )
    return rows


def run_cuda_check(args) -> None:
    """bf16 logits of the GPU kernels against the dense reference on the same windows (all modes)."""
    import torch

    if not torch.cuda.is_available():
        print("section cuda-check: skipped, no CUDA device here (run it on a GPU machine)")
        return
    from training.attention import forward_kwargs, gather_logits, prepare_model
    from training.modes import MODES, build_batch

    device = torch.device("cuda")
    wins = windows(4096, 2, 32000)
    print(f"\n{'mode':>15} {'kernel':>8} {'max |logit diff| vs dense (bf16)':>34} {'fp32':>10}")
    for mode in MODES:
        batch = build_batch(wins, mode).to(device)
        for dtype in (torch.bfloat16, torch.float32):
            outs = {}
            for kernel in ("dense", "varlen", "flex"):
                model = small_llama(32000, hidden=1024, layers=4, heads=8, intermediate=2816, max_pos=4096).to(
                    device, dtype
                )
                prepare_model(model, kernel)
                with torch.no_grad():
                    outs[kernel] = gather_logits(model(**forward_kwargs(batch, kernel)).logits, batch, kernel).float()
            for kernel in ("varlen", "flex"):
                diff = (outs[kernel] - outs["dense"]).abs().max().item()
                print(
                    f"{mode:>15} {kernel:>8} {diff if dtype == torch.bfloat16 else float('nan'):>34.3e} "
                    f"{diff if dtype == torch.float32 else float('nan'):>10.3e}"
                )


DEMO_BASE = Path(__file__).resolve().parent.parent / "assets" / "demo-base"
PROBE_INTERVALS = (50, 100, 200, 250, 400)  # shown beside the default, to see where 2% falls


def run_probes(args) -> dict:
    """The in-loop probes' cost against training steps, at the demo's window, model and dtype (module docstring)."""
    import tempfile

    import torch

    from harness.demo.config import DemoConfig
    from training.config import DEFAULT_PROBE_EVERY, DataConfig, ModelConfig, ProbeConfig, ScheduleConfig, TrainJob
    from training.distributed import SingleProcess
    from training.loop import make_optimizer
    from training.model_files import load_model, load_tokenizer_for
    from training.modes import build_batch
    from training.probes import open_probes

    if args.threads:
        torch.set_num_threads(args.threads)
    demo = DemoConfig()
    window, every = args.probe_window or demo.window, args.probe_every or DEFAULT_PROBE_EVERY
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kernel = "varlen" if device.type == "cuda" else "sdpa-doc"
    with tempfile.TemporaryDirectory() as out:
        job = TrainJob(
            model=ModelConfig(str(DEMO_BASE), dtype=demo.dtype, kernel=kernel),
            data=DataConfig(["<benchmark windows>"], mode="anchor", window=window, seed=demo.seed),
            out=out,
            schedule=ScheduleConfig(steps=every),
            probes=ProbeConfig(every=every),
        )
        probes = open_probes(job, load_tokenizer_for(job), SingleProcess(device))
        assert probes is not None
        model, _ = load_model(job, device)
        from training.attention import prepare_model

        prepare_model(model, kernel)
        optimizer = make_optimizer(model, job)
        dtype = torch.bfloat16 if demo.dtype == "bf16" else torch.float32
        wins = windows(window, args.probe_rounds * args.probe_steps + 1, model.config.vocab_size)
        model.train()

        def step(i: int) -> float:
            return train_step(
                model, optimizer, build_batch([wins[i]], "anchor").to(device), kernel, dtype=dtype, device=device
            )

        first, steps, runs, parts, in_steps = _time_probes(model, probes, step, args.probe_rounds, args.probe_steps)
    res = {
        "window": window,
        "every": every,
        "step": statistics.median(steps),
        "probe": statistics.median(runs),
        "first": first,
        # A probe run in training steps, each against the steps of its own round (load changes between rounds).
        "probe_steps": statistics.median(in_steps),
        "parts": {k: statistics.median(p[k] for p in parts) for k in parts[0]},
        "needles": len(probes.probe_set.needles),
        "docs": len(probes.probe_set.documents),
        "rope_len": probes.spec.rope_len,
    }
    where = (
        f"CUDA {torch.cuda.get_device_name()}" if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    )
    _probe_table(
        res,
        sorted({*PROBE_INTERVALS, every}),
        f"{where}, {kernel}, {demo.dtype}, {args.probe_rounds} rounds of {args.probe_steps} steps",
    )
    return res


def _time_probes(model, probes, step, rounds: int, per_round: int):
    """(first probe run's seconds, step seconds, probe seconds, per-probe seconds, each probe run in
    steps of its round): a warm-up step and the first probe run (it builds the bf16 copy D runs on),
    then rounds of steps and one probe run."""
    step(0)
    t0 = time.perf_counter()
    probes.run(model)
    first = time.perf_counter() - t0
    steps, runs, parts, in_steps = [], [], [], []
    for r in range(rounds):
        mine = [step(1 + r * per_round + k) for k in range(per_round)]
        t0 = time.perf_counter()
        probes.run(model)
        runs.append(time.perf_counter() - t0)
        parts.append(dict(probes.seconds))
        steps += mine
        in_steps.append(runs[-1] / statistics.mean(mine))  # against the steps just before it: same load
    return first, steps, runs, parts, in_steps


def _probe_table(res: dict, intervals: list[int], where: str) -> None:
    parts = res["parts"]
    print(
        f"\nIn-loop probes at window {res['window']}: demo base model, anchor, batch 1; {where}; "
        f"{res['needles']} needle prompts, {res['docs']} held-out windows, D on {res['rope_len']} tokens"
    )
    print(
        f"median s/step {res['step']:.3f}; median s/probe {res['probe']:.3f} (needle {parts['needle']:.3f}, "
        f"position {parts['position']:.3f}, D {parts['rope']:.3f}); first probe run {res['first']:.3f} (builds the bf16 copy)"
    )
    print(f"a probe run costs {res['probe_steps']:.2f} training steps (median over rounds, each against its own steps)")
    print(f"{'every':>6} {'train s (no probes)':>20} {'train s (probes)':>17} {'ratio':>7} {'target':>9}")
    for n in intervals:
        without = n * res["step"]
        ratio = 1 + res["probe_steps"] / n  # the same as (without + probe) / without at each round's load
        mark = (" ok <=1.02" if ratio <= 1.02 else " FAIL >1.02") + " (default)" if n == res["every"] else ""
        print(f"{n:>6} {without:>20.2f} {without * ratio:>17.2f} {ratio:>7.4f}{mark}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="anchor vs full training step time (see the module docstring)")
    ap.add_argument("--section", choices=("cpu", "cuda", "cuda-check", "probes", "all"), default="cpu")
    ap.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384], help="CPU windows")
    ap.add_argument("--cuda-lengths", type=int, nargs="+", default=[16384, 32768, 65536], help="CUDA windows")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per mode (after one warm-up step)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's default)")
    ap.add_argument("--probe-window", type=int, default=0, help="probes: window (default: the demo's)")
    ap.add_argument("--probe-every", type=int, default=0, help="probes: the interval (default: harness train's)")
    ap.add_argument("--probe-rounds", type=int, default=5, help="probes: rounds of steps + one probe run")
    ap.add_argument("--probe-steps", type=int, default=5, help="probes: training steps per round")
    args = ap.parse_args(argv)
    if args.section in ("cpu", "all"):
        run_cpu(args)
    if args.section in ("cuda", "all"):
        run_cuda(args)
    if args.section in ("cuda-check", "all"):
        run_cuda_check(args)
    if args.section in ("probes", "all"):
        run_probes(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
