"""RoPE precision diagnostic on a random Llama-shaped model: D per shift for bf16 vs fp32 vs fp64.

    python benchmarks/diagnose_rope.py                         # CPU: small Llama (4 layers, hidden 256), L=512
    python benchmarks/diagnose_rope.py --size 7b --seq-len 4096 --num-samples 2 --dtypes bf16,fp32
    python benchmarks/diagnose_rope.py --size auto ...         # CUDA: the largest shape that fits

The model is Llama-shaped with PyTorch's default initialisation (kaiming_uniform_ for linear
layers), as the paper's "random initialization" curve (Figure 1, left, green). The same weights
(drawn once in float32) are run in each dtype on the same random token sequences, which start
with one fixed BOS-like token. Prints, per Δ1: D (Eq. 4) for each dtype and the ratio bf16/fp32,
the error-source breakdown of the lowest dtype, D_logit (Eq. 5) per length, then the time of one
diagnostic pass against a plain forward pass measured in the same process (the baseline).
--out FILE.json keeps every number. Imports are lazy and need only torch + transformers + tqdm.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# name -> (hidden, intermediate, layers, heads, kv_heads); 7b/13b are Llama-2's shapes.
SIZES = {
    "small": (256, 688, 4, 4, 4),
    "1b": (2048, 5504, 22, 16, 16),
    "3b": (3200, 8640, 26, 32, 32),
    "7b": (4096, 11008, 32, 32, 32),
    "13b": (5120, 13824, 40, 40, 40),
}
BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}


def _params(size: str, vocab: int) -> int:
    h, i, layers, heads, kv = SIZES[size]
    d = h // heads
    return 2 * vocab * h + layers * (h * d * (2 * heads + 2 * kv) + 3 * h * i + 2 * h)


def _memory(size: str, vocab: int, dtype: str, seq_len: int, sources: bool) -> int:
    """Rough peak bytes: weights + stored q/k of every layer + one layer's activations and rows."""
    h, i, layers, heads, kv = SIZES[size]
    b = BYTES[dtype]
    stored = layers * (heads + kv) * seq_len * (h // heads) * b * (2 if sources else 1)
    work = seq_len * seq_len * heads * b * 3 + seq_len * i * b * 4 + (1 << 28) * 2
    return _params(size, vocab) * b + stored + work


def build_model(size: str, vocab: int, max_len: int, device):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    h, i, layers, heads, kv = SIZES[size]
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        max_position_embeddings=max(4096, max_len),
        rope_theta=10000.0,  # type: ignore[call-arg]  # legacy kwarg, still accepted; not in 5.x's signature
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config)
        # PyTorch's default init (the paper's random model), not transformers' normal(0, 0.02).
        for m in model.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                m.reset_parameters()
    return model.eval()


def main(argv=None) -> int:
    import torch

    from harness.diagnose.rope import DEFAULT_SHIFTS, Settings, measure

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="auto", choices=["auto", *SIZES])
    p.add_argument("--seq-len", type=int)
    p.add_argument("--num-samples", type=int, default=2)
    p.add_argument("--dtypes", default="bf16,fp32,fp64")
    p.add_argument("--kernel", default="eager", choices=("eager", "sdpa", "varlen"))
    p.add_argument("--logit-lengths", default=None, help="comma list (default 64..seq-len doubling)")
    p.add_argument("--no-sources", action="store_true")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--out", help="write every number to this JSON file")
    args = p.parse_args(argv)

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    seq_len = args.seq_len or (4096 if cuda else 512)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    size = args.size
    total = torch.cuda.get_device_properties(0).total_memory if cuda else 0  # read only on CUDA
    if size == "auto":
        if not cuda:
            size = "small"
        else:  # the largest shape whose bf16 and fp32 runs fit (the curves to record)
            fits = [s for s in SIZES if _memory(s, args.vocab, "fp32", seq_len, not args.no_sources) < 0.85 * total]
            size = fits[-1]
    if cuda:
        dropped = [d for d in dtypes if _memory(size, args.vocab, d, seq_len, not args.no_sources) >= 0.85 * total]
        for d in dropped:
            print(f"# {d} skipped: a {size} model in {d} at L={seq_len} does not fit in {total / 2**30:.0f} GiB")
        dtypes = [d for d in dtypes if d not in dropped]
    logit_lengths = (
        tuple(int(x) for x in args.logit_lengths.split(","))
        if args.logit_lengths
        else tuple(2**k for k in range(6, 32) if 2**k <= seq_len)
    )
    settings = Settings(
        shifts=DEFAULT_SHIFTS,
        seq_len=seq_len,
        logit_lengths=logit_lengths,
        kernel=args.kernel,
        sources=not args.no_sources,
    )
    g = torch.Generator().manual_seed(0)
    samples = [
        [1] + torch.randint(3, args.vocab, (seq_len - 1,), generator=g).tolist() for _ in range(args.num_samples)
    ]

    t0 = time.time()
    master = build_model(size, args.vocab, seq_len, device)
    # One float32 draw, kept on the host; every dtype is a conversion of it.
    master_state = {k: v.to("cpu") for k, v in master.state_dict().items()}
    del master
    if cuda:
        torch.cuda.empty_cache()
    print(
        f"# model {size} {SIZES[size]} vocab {args.vocab}, built in {time.time() - t0:.0f}s on {device}; "
        f"L={seq_len}, {args.num_samples} samples, kernel {args.kernel}"
    )
    runs, timing = {}, {}
    for dtype in dtypes:
        from harness.diagnose.precision import torch_dtype

        model = build_model_from_state(size, args.vocab, seq_len, master_state, torch_dtype(dtype), device)
        ids = torch.tensor([samples[0]], device=device)
        base = model.model
        with torch.no_grad():
            base(input_ids=ids, use_cache=False)  # warm-up
            _sync(cuda)
            t = time.perf_counter()
            base(input_ids=ids, use_cache=False)
            _sync(cuda)
            plain = time.perf_counter() - t
        t = time.perf_counter()
        runs[dtype] = measure(model, samples, settings, dtype, progress=False)
        _sync(cuda)
        elapsed = time.perf_counter() - t
        passes = args.num_samples * (1 + len(settings.shifts) + 2 * len(logit_lengths))
        timing[dtype] = {"plain_forward_s": plain, "diagnostic_s": elapsed, "passes": passes}
        print(f"# {dtype}: {elapsed:.1f}s for {passes} passes; plain forward {plain * 1000:.0f} ms")
        del model
        if cuda:
            torch.cuda.empty_cache()

    _print_tables(runs, timing, settings)
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "size": size,
                    "shape": SIZES[size],
                    "vocab": args.vocab,
                    "device": torch.cuda.get_device_name(0) if cuda else "cpu",
                    "seq_len": seq_len,
                    "num_samples": args.num_samples,
                    "kernel": args.kernel,
                    "runs": runs,
                    "timing": timing,
                },
                indent=1,
            )
        )
    return 0


def build_model_from_state(size, vocab, seq_len, state, dtype, device):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    h, i, layers, heads, kv = SIZES[size]
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        max_position_embeddings=max(4096, seq_len),
        rope_theta=10000.0,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model = model.to_empty(device=device).to(dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    # Buffers (rotary inv_freq) are not in the state dict: recompute them on the device.
    rotary = model.model.rotary_emb
    inv_freq, _ = rotary.compute_default_rope_parameters(config)  # float32 on the CPU; moved below
    rotary.inv_freq = inv_freq.to(device)
    rotary.original_inv_freq = inv_freq.to(device)
    return model.eval()


def _sync(cuda: bool) -> None:
    if cuda:
        import torch

        torch.cuda.synchronize()


def _print_tables(runs, timing, settings) -> None:
    dtypes = list(runs)
    print("\nD(Δ1, Δ2=16) (Eq. 4), mean over samples")
    head = f"{'Δ1':>6} " + " ".join(f"{d:>12}" for d in dtypes)
    ratio = "bf16" in runs and "fp32" in runs
    print(head + (f" {'bf16/fp32':>12}" if ratio else ""))
    for i, shift in enumerate(settings.shifts):
        row = f"{shift:>6} " + " ".join(f"{runs[d]['D']['mean'][i]:>12.4e}" for d in dtypes)
        if ratio:
            b, f = runs["bf16"]["D"]["mean"][i], runs["fp32"]["D"]["mean"][i]
            row += f" {b / f if f else float('nan'):>12.1f}"
        print(row)
    if settings.logit_lengths:
        print("\nD_logit (Eq. 5), Δ1=0, Δ2=16")
        print(f"{'T':>6} " + " ".join(f"{d:>12}" for d in dtypes))
        for i, length in enumerate(settings.logit_lengths):
            print(f"{length:>6} " + " ".join(f"{runs[d]['D_logit']['mean'][i]:>12.4e}" for d in dtypes))
    for d in dtypes:
        src = runs[d].get("sources")
        if not src:
            continue
        names = ["baseline", "angles", "rotated", "product", "all_low", "interaction"]
        print(f"\nerror sources, {d} (low = {src['precisions']['all_low']})")
        print(f"{'Δ1':>6} {'model run':>12} " + " ".join(f"{n:>12}" for n in names))
        for i, shift in enumerate(src["shifts"]):
            print(f"{shift:>6} {runs[d]['D']['mean'][i]:>12.4e} " + " ".join(f"{src[n][i]:>12.4e}" for n in names))
    print("\ntime per diagnostic pass vs a plain forward pass (same process)")
    print(f"{'dtype':>6} {'plain ms':>10} {'pass ms':>10} {'ratio':>8}")
    for d, t in timing.items():
        per = t["diagnostic_s"] / t["passes"]
        print(f"{d:>6} {t['plain_forward_s'] * 1000:>10.1f} {per * 1000:>10.1f} {per / t['plain_forward_s']:>8.1f}")


if __name__ == "__main__":
    sys.exit(main())
