"""The embedded default of `harness eval --embedded`: tiny checkpoints built here, no hub needed.

    harness eval --embedded                 # builds runs/embedded/ckpt-10..50 if absent, then evaluates
    harness eval --embedded --samples 10    # any flag overrides the defaults below

Five random 2-layer Llamas (hidden 64, head_dim 32; seeds = steps 10, 20, ..., 50) with the
embedded BPE tokenizer make a ckpt-<step> series like a training run's last five saves, so the
whole flow -- selection, sample generation, runner, store, averaged table -- runs end to end on
a CPU in about a minute. Random weights score near zero: the point is the flow, not the numbers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

STEPS = (10, 20, 30, 40, 50)
# RULER tasks that need no external data (no essays, SQuAD or HotpotQA).
TASKS = ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "cwe", "fwe"]
LENGTHS = "1k,2k"
SAMPLES = 4
ROOT = Path("runs") / "embedded"


def ensure_checkpoints(root: str | Path = ROOT, steps=STEPS) -> str:
    """Build the missing ckpt-<step> dirs under root; returns the --ckpts spec selecting them."""
    from harness.models.embedded import build_tiny_llama, default_tokenizer_dir

    root = Path(root)
    missing = [s for s in steps if not (root / f"ckpt-{s}" / "config.json").exists()]
    if missing:
        from transformers.utils import logging as hf_logging

        tok = default_tokenizer_dir()
        hf_logging.disable_progress_bar()  # five "Writing model shards" bars say nothing useful
        try:
            for step in missing:
                final = root / f"ckpt-{step}"
                tmp = root / f".ckpt-{step}.tmp{os.getpid()}"
                build_tiny_llama(tmp, tok, seed=step)
                shutil.rmtree(final, ignore_errors=True)  # a half-built dir from a killed run
                os.replace(tmp, final)  # atomic: a killed build never leaves a half-written ckpt-<step>
        finally:
            hf_logging.enable_progress_bar()
    return f"{root}/ckpt-<{min(steps)}..{max(steps)}>"
