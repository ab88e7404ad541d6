"""The `harness` subcommands the demo runs, in-process: each one's argument list, built from the
DemoConfig, and the call that runs it as the command line would (its UserError propagates)."""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import UserError
from harness.demo.config import DemoConfig


def _cli(argv: list[str]) -> None:
    """Run a harness subcommand in-process (its UserError propagates: one line, exit 2)."""
    from harness.cli import build_parser

    args = build_parser().parse_args(argv)
    rc = int(args._run(args) or 0)
    if rc:
        raise UserError(f"`harness {' '.join(argv)}` exited with {rc}")


def _train_argv(
    cfg: DemoConfig, mode: str, data: str, run_dir: Path, steps: int | None = None, minutes: float | None = None
) -> list[str]:
    argv = [
        "train",
        "--model",
        cfg.model,
        "--data",
        data,
        "--out",
        str(run_dir),
        "--mode",
        mode,
        "--window",
        str(cfg.window),
        "--steps",
        str(cfg.steps if steps is None else steps),
        "--batch-size",
        str(cfg.batch_size),
        "--lr",
        str(cfg.lr),
        "--warmup",
        str(cfg.warmup),
        "--dtype",
        cfg.dtype,
        "--save-every",
        str(cfg.save_every),
        "--keep-last",
        str(cfg.keep_last),
    ]
    if cfg.rope_theta is not None:
        argv += ["--rope-theta", str(cfg.rope_theta)]
    if minutes is not None:
        argv += ["--max-minutes", str(minutes)]
    if not cfg.progress:
        argv.append("--no-progress")
    return argv + list(cfg.train_args)


def _eval_argv(
    cfg: DemoConfig, tasks: list[str], ckpts: str, name: str, out: Path, max_len: int, last: int | None
) -> list[str]:
    argv = [
        "eval",
        "--ckpts",
        ckpts,
        "--tasks",
        ",".join(tasks),
        "--lengths",
        cfg.lengths,
        "--samples",
        str(cfg.samples),
        "--seed",
        str(cfg.seed),
        "--backend",
        cfg.eval_backend,
        "--dtype",
        cfg.eval_dtype,
        "--batch-size",
        str(cfg.eval_batch_size),
        "--max-model-len",
        str(max_len),
        "--name",
        name,
        "--out",
        str(out),
    ]
    if last:
        argv += ["--last", str(last)]
    if not cfg.progress:
        argv.append("--no-progress")
    return argv + list(cfg.eval_args)


def _minutes_for(cfg: DemoConfig, i: int) -> float | None:
    """--train-minutes applies to the first mode only; the others train as many steps as it reached."""
    return cfg.train_minutes if i == 0 else None
