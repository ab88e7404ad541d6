"""The diagnostic's eager kernel in query-row blocks against the whole [H, L, L] matrix, on a real model.

    python benchmarks/diagnose_eager_blocks.py --model /work/models/smollm2-135m-instruct --length 8k --dtype bf16

`harness diagnose rope`'s D_logit at one length (two eager forward passes of that length per run, as
Figure 1 right measures it) with training.attention_capture.EAGER_BLOCK_BYTES at its default and set
so large that one block holds every row (the kernel before the blocks), alternating whole/blocks
`--repeats` times in one process so load on shared cores hits both alike. Prints wall, process CPU
(user + system) and peak-RSS growth of each, the ratio whole/blocks, and both D_logit values (equal
to rounding: the blocks change only how BLAS splits the rows).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--length", default="8k")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()

    import torch

    from harness.core.lengths import parse_lengths
    from harness.diagnose.rope import Settings, measure
    from harness.diagnose.text import token_samples
    from training import attention_capture as capture

    (length,) = parse_lengths(args.length)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(args.model)
    samples = token_samples(tok, "essays", 1, length)  # the command's default text, one sample
    settings = Settings(shifts=(0,), seq_len=64, logit_lengths=(length,), sources=False, kernel="eager")
    default = capture.EAGER_BLOCK_BYTES
    print(f"model {args.model}, {args.dtype}, D_logit at T={length}, eager, {torch.get_num_threads()} threads")
    print(f"{'kernel':<8} {'wall s':>8} {'cpu s':>8} {'user s':>8} {'sys s':>8} {'D_logit':>14}")
    seen: dict[str, list] = {"whole": [], "blocks": []}
    for _ in range(args.repeats):
        for name, block in (("whole", 1 << 62), ("blocks", default)):
            capture.EAGER_BLOCK_BYTES = block
            r0, t0 = os.times(), time.perf_counter()
            out = measure(model, samples, settings, args.dtype, progress=False)
            wall, r1 = time.perf_counter() - t0, os.times()
            user, sys_ = r1.user - r0.user, r1.system - r0.system
            d = out["D_logit"]["mean"][0]
            seen[name].append((wall, user + sys_, d))
            print(f"{name:<8} {wall:>8.1f} {user + sys_:>8.1f} {user:>8.1f} {sys_:>8.1f} {d:>14.8g}", flush=True)
    capture.EAGER_BLOCK_BYTES = default
    w = sum(x[0] for x in seen["whole"]) / sum(x[0] for x in seen["blocks"])
    c = sum(x[1] for x in seen["whole"]) / sum(x[1] for x in seen["blocks"])
    rel = abs(seen["whole"][0][2] - seen["blocks"][0][2]) / abs(seen["whole"][0][2])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"whole/blocks: wall {w:.2f}x, cpu {c:.2f}x; D_logit relative difference {rel:.1e}; peak RSS {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
