"""`harness convert`: a GGUF model as a save_pretrained folder (safetensors, config, tokenizer).

    harness convert smollm2-135m-instruct --out models/smollm2-135m-instruct
    harness convert model.Q4_1.gguf --out models/mine --dtype bfloat16

transformers dequantises the GGUF tensors on load; the folder holds those weights (float32 unless
--dtype says otherwise), the config transformers derives from the GGUF metadata and the tokenizer
it converts, plus harness_source.json naming the file and its sha256. The folder is written under
a temporary name beside --out and renamed into place only when complete and valid, so a killed or
failed conversion leaves no --out behind; an existing --out is never touched.
"""

from __future__ import annotations

import argparse

from harness.core.errors import UserError

HELP = "convert a GGUF file (or a packaged model name) into a save_pretrained folder of safetensors"

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="SRC", help="a .gguf file or a packaged model name (e.g. smollm2-135m-instruct)")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write (must not exist yet)")
    p.add_argument(
        "--dtype",
        choices=sorted(_DTYPES),
        default="float32",
        help="dtype of the written weights (default float32: the dequantised values exactly)",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.models.sources import source_for
    from harness.models.sources.gguf import GGUFSource, convert_gguf

    out = Path(args.out)
    if not args.out.strip():
        raise UserError("--out is empty: pass the folder to write")
    if out.exists():
        raise UserError(f"--out {out} already exists: pass a new folder (nothing was written)")
    from harness.core.paths import check_out

    check_out(args.out)  # control characters, a file in the way, a read-only place: before the conversion
    src = source_for(args.source)
    if not isinstance(src, GGUFSource):
        raise UserError(
            f"{args.source} is a {src.kind} model, not a GGUF file: it needs no conversion (pass it as it is)"
        )
    src.check("hf")  # a damaged file or an architecture transformers cannot read: before any work
    written = convert_gguf(src, out, _DTYPES[args.dtype])
    ck = src.checkpoint
    print(f"wrote {written} ({_DTYPES[args.dtype]} safetensors + tokenizer) from {ck.path} (sha256 {ck.sha256})")
    return 0
