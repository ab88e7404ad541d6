"""`harness doctor`: check a model's set-up in seconds before evaluating it (the first thing to run
on a new model). It takes the same flags as `harness eval` and prints one line per check, PASS /
WARN / FAIL / SKIP with the fix, then runs a few canaries for real; it exits 1 on any FAIL.

    harness doctor --ckpts runs/anchor/ckpt-2000 --suite ruler --lengths 4k-128k
    harness doctor --ckpts smollm2-135m-instruct --chat --lengths 1k
    harness doctor --backend openai --base-url http://127.0.0.1:8000/v1 --model NAME --lengths 128k

The checks are listed in docs/doctor.md; the module is harness/pipeline/doctor.py.
"""

from __future__ import annotations

import argparse

HELP = "check a model's set-up (context, RoPE, tokenizer, prompt format, canary generations) before evaluating it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.commands.eval import add_arguments as eval_arguments

    eval_arguments(p)  # the same model, task and length flags as `harness eval`
    p.add_argument(
        "--canaries",
        type=int,
        default=4,
        metavar="N",
        help="niah_single_1 samples to generate at the shortest length, judged by their shape (empty, all the "
        "same, never stopping); 0 runs the cheap checks only (default 4)",
    )


def run(args: argparse.Namespace) -> int:
    from harness.commands.eval import config_from_args
    from harness.core.errors import UserError
    from harness.pipeline.doctor import FAIL, run_checks

    if args.canaries < 0:
        raise UserError(f"--canaries {args.canaries}: pass 0 or a positive number of samples")
    cfg = config_from_args(args)
    _check_usage(cfg)
    checks = run_checks(cfg, canaries=args.canaries)
    for c in checks:
        print(c.line(), flush=True)
    failed = [c.name for c in checks if c.status == FAIL]
    if failed:
        print(f"doctor: {len(failed)} check(s) failed ({', '.join(failed)}): fix them before evaluating")
        return 1
    print(f"doctor: no failures in {len(checks)} checks")
    return 0


def _check_usage(cfg) -> None:
    """The flags' own mistakes (a length outside 250..1m, an unknown task, suite or protocol) are
    usage errors, one line and exit 2 as `harness eval` says them, not a FAIL of the model (exit 1)."""
    from harness.core.errors import UserError
    from harness.core.lengths import parse_lengths
    from harness.pipeline.eval_config import PROTOCOLS
    from tasks.registry import resolve_tasks

    if cfg.lengths:
        parse_lengths(cfg.lengths)
    if cfg.suite or cfg.tasks:
        resolve_tasks(cfg.suite, cfg.tasks or None, cfg.exclude or None)
    elif cfg.exclude:
        raise UserError("--exclude without --suite or --tasks removes nothing: pass the suite it takes tasks from")
    if cfg.protocol not in PROTOCOLS:
        raise UserError(f"unknown protocol {cfg.protocol!r}: choose from {', '.join(PROTOCOLS)}")
