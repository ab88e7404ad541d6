"""Evaluable checkpoints (<run>/ckpt-<step>/) and resumable training state (<run>/state/).

A checkpoint is a `save_pretrained` directory with the tokenizer and `harness_training.json`
beside config.json (docs/contracts.md), so `harness eval --ckpts run/ckpt-<1960..2000>` loads it
as it is. Only the last K of every S steps are written (`checkpoint_steps`), each exactly once, by
one process, into a temporary directory renamed into place: a killed writer never leaves a
half-written ckpt-* behind.

The full state (model, optimizer, scheduler, RNG streams, data position, step) lives under
<run>/state/step-<N>/state.pt; <run>/state/latest names the newest complete one. The two newest
are kept, so a crash while writing one still leaves a good one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

SCHEMA_VERSION = 1
META_NAME = "harness_training.json"
CKPT_RE = re.compile(r"^ckpt-(\d+)$")
STATE_DIR = "state"
STATES_KEPT = 2


def checkpoint_steps(steps: int, save_every: int, keep_last: int | None) -> list[int]:
    """Steps that get a ckpt-<step>: multiples of save_every (and the last step), the last K of them."""
    marks = list(range(save_every, steps + 1, save_every))
    if not marks or marks[-1] != steps:
        marks.append(steps)
    return marks if keep_last is None else marks[-keep_last:]


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every ckpt-<step> directory, by step."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if p.is_dir() and (m := CKPT_RE.match(p.name))]
    return sorted(found)


def _replace_dir(tmp: Path, final: Path) -> None:
    if final.exists():  # a re-run overwriting its own step (e.g. resumed before this ckpt's state)
        shutil.rmtree(final)
    os.replace(tmp, final)


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model,
    tokenizer,
    meta: dict,
    *,
    state_dict: dict | None = None,
    dtype: str | None = None,
) -> Path:
    """Write <run>/ckpt-<step>/ (weights, config, tokenizer, harness_training.json) atomically.

    `state_dict` is the full (unsharded) weights when the model is sharded; `meta` must hold
    the contract's keys (see training_meta). `dtype` ("bfloat16") stores the weights in that
    dtype (bf16 runs: half the disk, what evaluation loads anyway); None keeps the fp32 masters.
    """
    run_dir = Path(run_dir)
    final = run_dir / f"ckpt-{step}"
    tmp = run_dir / f".tmp-ckpt-{step}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    # Training runs with use_cache off; evaluation (generation) needs it on.
    use_cache = model.config.use_cache
    model.config.use_cache = True
    if dtype is not None:
        import torch

        target = getattr(torch, dtype)
        state_dict = {
            k: v.to(target) if v.is_floating_point() else v
            for k, v in (state_dict if state_dict is not None else model.state_dict()).items()
        }
    try:
        model.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)
    finally:
        model.config.use_cache = use_cache
    if dtype is not None:  # save_pretrained records the in-memory (fp32) dtype; the files hold `dtype`
        config = json.loads((tmp / "config.json").read_text())
        config["dtype"] = dtype
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(tmp)
    (tmp / META_NAME).write_text(json.dumps({**meta, "step": step}, indent=2) + "\n")
    _replace_dir(tmp, final)
    return final


def prune_checkpoints(run_dir: str | Path, keep_steps: list[int]) -> None:
    """Remove ckpt-* dirs that are not in keep_steps (left by a run with other --steps/--keep-last)."""
    keep = set(keep_steps)
    for step, path in list_checkpoints(run_dir):
        if step not in keep:
            shutil.rmtree(path)


def training_meta(
    *,
    mode: str,
    window: int,
    rope_theta: float | None,
    domain_tags,
    interleave_chunks,
    kernel: str,
    seed: int,
    data: dict,
    job: dict,
) -> dict:
    """harness_training.json without its step (docs/contracts.md); `job` is the whole run config."""
    from harness.provenance import git_hash, package_version

    return {
        "schema_version": SCHEMA_VERSION,
        "mode": mode,
        "window": window,
        "rope_theta": rope_theta,
        "domain_tags": domain_tags,
        "interleave_chunks": interleave_chunks,
        "attention_kernel": kernel,
        "seed": seed,
        "data": data,
        "package_version": package_version(),
        "git_hash": git_hash(),
        "job": job,
    }


# ---------------------------------------------------------------- resumable state


def save_state(run_dir: str | Path, step: int, payload: dict) -> Path:
    """Write <run>/state/step-<step>/state.pt, then point state/latest at it, then drop old ones."""
    import torch

    root = Path(run_dir) / STATE_DIR
    final = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    torch.save({**payload, "step": step}, tmp / "state.pt")
    _replace_dir(tmp, final)
    latest_tmp = root / "latest.tmp"
    latest_tmp.write_text(final.name + "\n")
    os.replace(latest_tmp, root / "latest")
    steps = sorted(int(p.name.split("-")[1]) for p in root.iterdir() if p.is_dir() and re.match(r"^step-\d+$", p.name))
    for old in steps[:-STATES_KEPT]:
        shutil.rmtree(root / f"step-{old}")
    return final


def load_latest_state(run_dir: str | Path) -> dict | None:
    """The newest complete state (as saved), or None when the run has none."""
    import torch

    root = Path(run_dir) / STATE_DIR
    latest = root / "latest"
    if not latest.exists():
        return None
    path = root / latest.read_text().strip() / "state.pt"
    # weights_only=False: the payload holds numpy/python RNG states, written by this code only.
    return torch.load(path, map_location="cpu", weights_only=False)
