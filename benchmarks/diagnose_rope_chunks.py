"""The CPU head-chunking of harness.diagnose.rope against the code before it, on a real model.

    python benchmarks/diagnose_rope_chunks.py --model /work/models/smollm2-135m-instruct --old-rev cdb3d90~1

Loads `harness/diagnose/rope.py` as it was at --old-rev (git show) beside the current module, runs
`measure` of both on the same model, samples and settings, alternating old/new per dtype (so load on
shared cores hits both alike), checks that every number is identical, and prints the process CPU
time and wall time of each with the ratio old/new.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def old_module(rev: str):
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:harness/diagnose/rope.py"], capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "rope_old.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("rope_old", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="save_pretrained folder")
    ap.add_argument("--old-rev", required=True, help="git revision holding the previous rope.py")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--shifts", default="0,100,1000")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    from harness.diagnose import rope as new
    from harness.diagnose.precision import torch_dtype
    from harness.diagnose.text import token_samples
    from harness.models.sources import model_tokenizer

    torch.set_num_threads(args.threads)
    old = old_module(args.old_rev)
    shifts = tuple(int(s) for s in args.shifts.split(","))
    samples = token_samples(model_tokenizer(args.model), "essays", 1, args.seq_len)
    print(f"# {args.model}, L={args.seq_len}, shifts {shifts}, sources on, 1 sample, {args.threads} thread(s)")
    print("dtype  old cpu s  new cpu s  old/new  old wall  new wall  identical")
    same_all = True
    for dtype in args.dtypes.split(","):
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch_dtype(dtype)).eval()
        out = {}
        for name, mod in (("old", old), ("new", new)):
            settings = mod.Settings(shifts=shifts, seq_len=args.seq_len, logit_lengths=(args.seq_len,))
            c0, w0 = time.process_time(), time.perf_counter()
            res = mod.measure(model, samples, settings, dtype, progress=False)
            out[name] = (res, time.process_time() - c0, time.perf_counter() - w0)
        same = out["old"][0] == out["new"][0]
        same_all &= same
        (_, oc, ow), (_, nc, nw) = out["old"], out["new"]
        print(f"{dtype:5}  {oc:9.1f}  {nc:9.1f}  {oc / nc:6.2f}x  {ow:8.1f}  {nw:8.1f}  {same}")
    return 0 if same_all else 1


if __name__ == "__main__":
    sys.exit(main())
