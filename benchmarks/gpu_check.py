"""GPU validation (issue 9): the paths CI cannot run, in one script with selectable sections.

    python benchmarks/gpu_check.py                                  # all sections, sizes for the device
    python benchmarks/gpu_check.py --sections kernels,diagnose --small
    python benchmarks/gpu_check.py --model MODEL_DIR --samples SAMPLES_DIR --record

Sections:
- kernels: bf16 logits of every attention kernel (dense, sdpa-doc; varlen and flex on CUDA) for every
  training mode on packed windows, max |error| against the fp32 dense reference on the same weights.
- train: benchmarks/train_step.py (CPU section on CPU, the ~1B Llama 16K-64K section on CUDA).
- runner: the transformers runner (harness/runners/hf.py) in bf16 on pre-generated RULER samples
  (`harness generate ... --out SAMPLES_DIR` on a CPU machine; this script only reads the JSONL),
  samples/s and whether greedy outputs are identical across two runs.
- diagnose: benchmarks/diagnose_rope.py, bf16 vs fp32.
What needs CUDA is skipped on CPU with a line saying so. Prints one table; --record appends it to
benchmarks/RESULTS.md with the date and the device name. Imports are lazy: torch, transformers
and tqdm only (CUDA machines lack datasets, jinja2, lm-eval, wonderwords).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SECTIONS = ("kernels", "train", "runner", "diagnose")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def section_kernels(args, rows: list) -> None:
    import torch
    from train_step import small_llama, windows

    from training.attention import forward_kwargs, gather_logits, prepare_model
    from training.modes import MODES, build_batch

    cuda = _cuda()
    device = torch.device("cuda" if cuda else "cpu")
    # On CPU: flex runs eagerly (uncompiled) and varlen's layout runs through its SDPA emulation.
    kernels = ["sdpa-doc", "varlen", "flex"] if cuda else ["sdpa-doc", "flex", "varlen-cpu-emulation"]
    if not cuda:
        rows.append(("kernels", "varlen (torch varlen_attn), compiled flex", "", "skipped: needs CUDA"))
    L = 4096 if cuda and not args.small else 1024
    vocab = 32000 if cuda and not args.small else 512
    wins = windows(L, 2, vocab)
    shape = (
        {"hidden": 1024, "layers": 4, "heads": 8, "intermediate": 2816}
        if cuda and not args.small
        else {"hidden": 64, "layers": 2, "heads": 2, "intermediate": 172}
    )
    master = small_llama(vocab, **shape, max_pos=L)
    state = {k: v.detach().clone() for k, v in master.state_dict().items()}

    def logits(kernel, dtype, batch):
        model = small_llama(vocab, **shape, max_pos=L)
        model.load_state_dict(state)
        model.to(device, dtype)
        prepare_model(model, kernel)
        with torch.no_grad():
            return gather_logits(model(**forward_kwargs(batch, kernel)).logits, batch, kernel).float()

    for mode in MODES:
        batch = build_batch(wins, mode).to(device)
        ref = logits("dense", torch.float32, batch)  # the fp32 reference every bf16 kernel is held to
        scale = ref.abs().max().item()
        dense_err = None
        for kernel in ["dense", *kernels]:
            err = (logits(kernel, torch.bfloat16, batch) - ref).abs().max().item()
            dense_err = err if dense_err is None else dense_err
            # bf16 rounding alone gives the dense kernel's error; a kernel more than twice as far from
            # the fp32 reference (plus 0.1% of the logit range) computes something else.
            ok = err <= 2 * dense_err + 1e-3 * max(scale, 1.0)
            rows.append(("kernels", f"{mode} {kernel} bf16 vs fp32 dense, L={L}", f"{err:.3e}", "ok" if ok else "FAIL"))


def section_train(args, rows: list) -> None:
    import train_step

    cuda = _cuda()
    ns = argparse.Namespace(
        lengths=[1024] if args.small else [4096, 8192],
        cuda_lengths=[16384, 32768, 65536],
        steps=1 if args.small else 2,
        threads=0,
    )
    if not cuda:
        rows.append(("train", "~1B Llama 16K-64K, varlen, bf16", "", "skipped: needs CUDA"))
    out = train_step.run_cuda(ns) if cuda else train_step.run_cpu(ns)
    for r in out:
        rows.append(
            (
                "train",
                f"L={r['window']} full / anchor s/step",
                f"{r['full']:.3f} / {r['anchor']:.3f} (x{r['ratio']:.2f}, pairs {100 * r['pairs']:.1f}%)",
                train_step.target_verdict(r) or "measured",
            )
        )


def _read_samples(directory: Path, per_file: int) -> list[dict]:
    files = sorted(directory.rglob("*.jsonl"))
    out = []
    for f in files:
        with f.open() as fh:
            for n, line in enumerate(fh):
                if n >= per_file:
                    break
                out.append(json.loads(line))
    return out


def section_runner(args, rows: list) -> None:
    from harness.runners.base import GenerationRequest, RunnerSettings
    from harness.runners.hf import HFRunner

    if not args.model or not args.samples:
        rows.append(
            ("runner", "hf bf16 on RULER samples", "", "skipped: give --model and --samples (see benchmarks/README.md)")
        )
        return
    samples = _read_samples(Path(args.samples), args.per_file)
    if not samples:
        rows.append(("runner", f"no *.jsonl under {args.samples}", "", "FAIL"))
        return
    reqs = [GenerationRequest(s["input"] + s.get("answer_prefix", ""), int(s["max_new_tokens"])) for s in samples]
    runner = HFRunner(args.model, RunnerSettings(backend="hf", dtype="bfloat16", batch_size=args.batch_size))
    try:
        outs, times = [], []
        for _ in range(2):
            t = time.perf_counter()
            outs.append(runner.generate(reqs))
            times.append(time.perf_counter() - t)
    finally:
        runner.close()
    lengths = sorted({int(s["length"]) for s in samples})
    same = outs[0] == outs[1]
    rows.append(
        (
            "runner",
            f"hf bf16, {len(reqs)} samples, lengths {lengths}",
            f"{len(reqs) / min(times):.2f} samples/s",
            "ok" if same else "FAIL",
        )
    )
    rows.append(("runner", "greedy outputs identical across 2 runs", str(same), "ok" if same else "FAIL"))


def section_diagnose(args, rows: list) -> None:
    import diagnose_rope

    cuda = _cuda()
    argv = ["--dtypes", "bf16,fp32", "--num-samples", "1" if args.small else "2"]
    if args.small:
        argv += ["--size", "small", "--seq-len", "128"]
    if not cuda:
        rows.append(("diagnose", "large model at 4K on GPU", "", "skipped: needs CUDA (CPU runs the small model)"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rope.json"
        diagnose_rope.main(argv + ["--out", str(out)])
        res = json.loads(out.read_text())
    for dtype, t in res["timing"].items():
        rows.append(
            (
                "diagnose",
                f"{res['size']} L={res['seq_len']} {dtype}",
                f"{t['diagnostic_s']:.1f}s ({t['passes']} passes)",
                "ok",
            )
        )


def device_name() -> str:
    import platform

    import torch

    return (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else f"CPU ({platform.processor() or platform.machine()})"
    )


def table(rows: list) -> str:
    w = [max(len(str(r[i])) for r in rows + [("section", "check", "value", "status")]) for i in range(4)]
    lines = [" | ".join(h.ljust(w[i]) for i, h in enumerate(("section", "check", "value", "status")))]
    lines += [" | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    lines = ["| " + ln + " |" for ln in lines]
    lines.insert(1, "|" + "|".join("-" * (x + 2) for x in w) + "|")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="GPU validation checks (see the module docstring)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {','.join(SECTIONS)}")
    ap.add_argument("--small", action="store_true", help="smallest sizes (CPU smoke run)")
    ap.add_argument("--model", help="model directory for the runner section")
    ap.add_argument("--samples", help="directory of pre-generated samples (harness generate --out)")
    ap.add_argument("--per-file", type=int, default=4, help="samples read per (task, length) file")
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--record", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        from harness.errors import UserError

        raise UserError(f"unknown section(s) {', '.join(bad)}: choose from {', '.join(SECTIONS)}")
    rows: list = []
    fns = {"kernels": section_kernels, "train": section_train, "runner": section_runner, "diagnose": section_diagnose}
    for s in sections:
        print(f"== {s}", flush=True)
        fns[s](args, rows)
    for r in rows:
        if r[3].startswith("skipped"):
            print(f"section {r[0]}: {r[1]} {r[3]}")
    text = table(rows)
    print(text)
    if args.record:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        cmd = "python benchmarks/gpu_check.py " + " ".join(argv if argv is not None else sys.argv[1:])
        with (ROOT / "benchmarks" / "RESULTS.md").open("a") as fh:
            fh.write(f"\n## {stamp}, {device_name()}\n\n`{cmd}`\n\n{text}\n")
    return 1 if any(r[3] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
