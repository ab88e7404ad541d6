"""A re-run with nothing to compute: `harness eval` on a complete store, wall time and imports.

    OMP_NUM_THREADS=1 python benchmarks/rerun_noop.py                      # embedded tiny Llama
    python benchmarks/rerun_noop.py --ckpts smollm2-135m-instruct --tasks niah_single_1 --samples 5

The store is filled once (not timed); then the same command runs again in fresh processes, which
must decide from the store, without importing torch or transformers, that nothing is missing, and
print the stored table. Baseline, in the same script: `harness --help` in a fresh process (the
interpreter and the CLI's own start-up). Prints the median wall time of each, their ratio, whether
torch/transformers were imported (`python -X importtime`), and the bytes the re-run appended (0).
Target: the re-run under 1 s on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall, done.stderr


def _imported(importtime_stderr: str, module: str) -> bool:
    return any(line.rstrip().endswith(f"| {module}") for line in importtime_stderr.splitlines())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpts", help="what to evaluate (default: an embedded tiny Llama built in a temp dir)")
    ap.add_argument("--tasks", default="vt,niah_single_1")
    ap.add_argument("--lengths", default="1k")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    # As a user's shell runs it: cached bytecode. With PYTHONDONTWRITEBYTECODE set (some sandboxes
    # set it) every run compiles the ~370 modules it imports again, about 0.4 s of each re-run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        ckpts = args.ckpts
        if ckpts is None:
            sys.path.insert(0, str(ROOT))
            from harness.models.embedded import build_tiny_llama, build_tokenizer

            ckpts = str(build_tiny_llama(Path(tmp) / "tiny", build_tokenizer(Path(tmp) / "tok")))
        out = Path(tmp) / "out"
        py = [sys.executable]
        command = ["-m", "harness", "eval", "--ckpts", ckpts, "--tasks", args.tasks, "--lengths", args.lengths]
        command += ["--samples", str(args.samples), "--out", str(out), "--no-progress"]
        _run(py + command, env)  # fills the store (not timed)
        size = (out / "samples.jsonl").stat().st_size

        help_walls = [_run(py + ["-m", "harness", "--help"], env)[0] for _ in range(args.repeats)]
        rerun_walls = [_run(py + command, env)[0] for _ in range(args.repeats)]
        _, importtime = _run(py + ["-X", "importtime"] + command, env)
        appended = (out / "samples.jsonl").stat().st_size - size

    base, rerun = statistics.median(help_walls), statistics.median(rerun_walls)
    print(f"{'what':<36}{'median wall (s)':>16}")
    print(f"{'harness --help (baseline)':<36}{base:>16.3f}")
    print(f"{'eval re-run, nothing to compute':<36}{rerun:>16.3f}")
    print(f"ratio re-run / baseline: {rerun / base:.2f}")
    for module in ("torch", "transformers"):
        print(f"{module} imported by the re-run: {'yes' if _imported(importtime, module) else 'no'}")
    print(f"bytes appended to samples.jsonl by the re-runs: {appended}")


if __name__ == "__main__":
    main()
