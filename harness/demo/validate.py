"""Every input of `harness demo` checked before any work: the numbers, the modes, the tasks and
lengths, the base model, --data, --out, and every train and eval command the demo will run (a
rejected demo writes nothing). Each problem is one UserError naming the flag and the fix."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.errors import UserError
from harness.core.validate import require_above, require_at_least, require_at_most
from harness.demo.config import DemoConfig
from harness.demo.model import _check_model
from harness.demo.subcommands import _eval_argv, _minutes_for, _train_argv


def validate(cfg: DemoConfig) -> tuple[list[int], list[str]]:
    """Check every input before any work; returns (lengths, task names). Raises UserError."""
    from harness.core.lengths import parse_lengths
    from harness.core.paths import check_out

    _check_numbers(cfg)
    _check_modes(cfg)
    lengths = parse_lengths(cfg.lengths)
    tasks = _task_names(cfg)
    _check_model(cfg.model)
    if cfg.data:
        _check_data(cfg.data)
    out = check_out(cfg.out)
    _check_stage_args(cfg, tasks, out)
    return lengths, tasks


def _check_numbers(cfg: DemoConfig) -> None:
    """Every number in its range, and enough checkpoints saved for --keep-last to average."""
    require_at_least(
        (
            ("--window", cfg.window, 16),
            ("--steps", cfg.steps, 1),
            ("--save-every", cfg.save_every, 1),
            ("--keep-last", cfg.keep_last, 1),
            ("--batch-size", cfg.batch_size, 1),
            ("--samples", cfg.samples, 1),
            ("--corpus-docs", cfg.corpus_docs, 1),
            ("--eval-batch-size", cfg.eval_batch_size, 1),
            ("--warmup", cfg.warmup, 0),
            ("--rope-samples", cfg.rope_samples, 0),
            ("--rope-len", cfg.rope_len, 2),
        )
    )
    require_above((("--train-minutes", cfg.train_minutes, 0.0),))
    if not 0 <= cfg.long_share <= 1:
        raise UserError(f"--long-share {cfg.long_share:g} is outside [0, 1]: pass a share of documents, e.g. 0.35")
    from harness.core.validate import MAX_COUNT, MAX_TOKENS

    require_at_most(
        (
            ("--window", cfg.window, MAX_TOKENS),
            ("--samples", cfg.samples, MAX_COUNT),
            ("--corpus-docs", cfg.corpus_docs, MAX_COUNT),
            ("--batch-size", cfg.batch_size, MAX_COUNT),
            ("--eval-batch-size", cfg.eval_batch_size, MAX_COUNT),
        )
    )
    saves = cfg.steps // cfg.save_every
    if saves < cfg.keep_last:
        raise UserError(
            f"--steps {cfg.steps} with --save-every {cfg.save_every} saves {saves} checkpoint(s), fewer than "
            f"--keep-last {cfg.keep_last} to average over: raise --steps to {cfg.keep_last * cfg.save_every} "
            f"or lower --save-every or --keep-last"
        )


def _check_modes(cfg: DemoConfig) -> None:
    if not cfg.modes:
        raise UserError("--modes is empty: pass e.g. full,anchor")
    from training.modes import MODES

    bad = [m for m in cfg.modes if m not in MODES]
    if bad:
        raise UserError(f"unknown --modes {', '.join(bad)}: choose from {', '.join(MODES)}")
    if len(set(cfg.modes)) != len(cfg.modes):
        raise UserError(f"--modes {','.join(cfg.modes)} repeats a mode: list each once")


def _task_names(cfg: DemoConfig) -> list[str]:
    """--tasks as task names: the listed tasks, or the tasks of the one suite it names."""
    from tasks.registry import resolve_tasks

    if not cfg.tasks:
        raise UserError("--tasks is empty: pass task names (e.g. niah_single_1,vt) or one suite name (e.g. ruler)")
    if len(cfg.tasks) == 1 and cfg.tasks[0] in _suite_names():
        return resolve_tasks(cfg.tasks[0], None, None)
    return resolve_tasks(None, cfg.tasks, None)


def _check_data(data: str) -> None:
    """--data: files that exist (or hub dataset names, owner/name), none of them a FIFO or device."""
    missing = [p for p in data.split(",") if p.strip() and not Path(p.strip()).exists() and p.count("/") != 1]
    if missing:
        raise UserError(
            f"--data {missing[0]} does not exist: pass jsonl/parquet files, or leave --data out to generate the demo corpus"
        )
    from harness.core.paths import file_kind

    for p in (Path(p.strip()) for p in data.split(",") if p.strip()):
        kind = file_kind(p.stat().st_mode) if p.exists() else None
        if kind and kind != "a directory":  # a FIFO would hang the training run half way
            raise UserError(f"--data {p} is {kind}: pass jsonl/parquet files or a folder of them")


def _parsed(argv: list[str], flag: str) -> argparse.Namespace:
    """argv parsed by the harness parser; its error (printed by argparse) as a UserError naming flag."""
    import contextlib
    import io

    from harness.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return build_parser().parse_args(argv)
    except SystemExit:
        message = err.getvalue().strip().removeprefix("error: ")
        raise UserError(f"{flag}: {message}") from None


def _check_stage_args(cfg: DemoConfig, tasks: list[str], out: Path) -> None:
    """Every train and eval command the demo will run, parsed and checked now: a bad --train-arg or
    --eval-arg fails before anything is trained (a rejected command changes nothing)."""
    data = cfg.data or str(out / "data" / "corpus.jsonl")
    for i, mode in enumerate(cfg.modes):
        minutes = _minutes_for(cfg, i)
        _check_train(_parsed(_train_argv(cfg, mode, data, out / "runs" / mode, None, minutes), "--train-arg"))
        _check_eval(
            _parsed(
                _eval_argv(cfg, tasks, f"{out}/runs/{mode}/ckpt-*", mode, out / "results" / mode, 1, 1), "--eval-arg"
            )
        )
    if cfg.base:
        _check_eval(_parsed(_eval_argv(cfg, tasks, cfg.model, "base", out / "results" / "base", 1, None), "--eval-arg"))


def _check_train(args: argparse.Namespace) -> None:
    """What `harness train` checks before it reads the model: the job, --log-to's sinks (a missing
    package, an unknown name) and a follower's flags (issue 49: --log-to=bogus was met only by the
    second mode's training, after the first mode's checkpoints were written)."""
    from harness.commands._follow_child import follower_for
    from harness.commands.train import job_from_args
    from training.logging import parse_log_to

    try:
        parse_log_to(args.log_to)
        follower_for(args, job_from_args(args).out)
    except UserError as exc:
        raise UserError(f"--train-arg: {exc}") from None


def _check_eval(args: argparse.Namespace) -> None:
    """What `harness eval` checks before it reads a model: the flags (check_args), the sequential
    rule, then what planning checks first (tasks, --exclude, --suite, --lengths, --max-new-tokens,
    --system-prompt without --chat: planning.check_flags). Before (issue 49), these were met only
    by the eval after training, with the checkpoints written."""
    from harness.commands._sequential_options import sequential_rule
    from harness.commands.eval import check_args, config_from_args
    from harness.pipeline.planning import check_flags

    check_args(args)
    try:
        sequential_rule(args)
        check_flags(config_from_args(args))
    except UserError as exc:
        raise UserError(f"--eval-arg: {exc}") from None


def _suite_names() -> set[str]:
    from tasks.registry import all_suites

    return set(all_suites())
