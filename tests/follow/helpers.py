"""Fixtures of the follower tests: the shipped demo model continued for a few steps at a 256-token
window, evaluated on one RULER task at 512 tokens (the model retrieves there, so scores move)."""

from __future__ import annotations

import json
import sys

from harness.demo.config import DEFAULT_MODEL

EVAL_FLAGS = ["--tasks", "niah_single_1", "--lengths", "512", "--samples", "2", "--no-progress"]
# Timing fields of a record: the only ones two evaluations of one sample may differ in.
TIMINGS = ("eval_seconds",)
COMPUTE_TIMINGS = ("prefill_seconds",)


def train_argv(run, corpus, *extra, steps=4, keep_last=3) -> list[str]:
    return [
        "train",
        "--model",
        str(DEFAULT_MODEL),
        "--data",
        str(corpus),
        "--out",
        str(run),
        "--mode",
        "anchor",
        "--window",
        "256",
        "--steps",
        str(steps),
        "--save-every",
        "1",
        "--keep-last",
        str(keep_last),
        "--dtype",
        "fp32",
        "--lr",
        "1e-3",
        "--no-progress",
        *extra,
    ]


def harness_cmd(*argv) -> list[str]:
    return [sys.executable, "-m", "harness", *map(str, argv)]


def records(out) -> list[dict]:
    lines = (out / "samples.jsonl").read_text().splitlines()[1:]
    return [json.loads(x) for x in lines if x.strip()]


def comparable(rec: dict) -> dict:
    """A record without its timings."""
    out = {k: v for k, v in rec.items() if k not in TIMINGS}
    if isinstance(out.get("compute"), dict):
        out["compute"] = {k: v for k, v in out["compute"].items() if k not in COMPUTE_TIMINGS}
    return out


def by_key(recs: list[dict]) -> dict:
    from harness.core.identity import record_key

    keyed = {}
    for r in recs:
        k = record_key(r)
        assert k not in keyed, f"sample stored twice: {k}"
        keyed[k] = comparable(r)
    return keyed
