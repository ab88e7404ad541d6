"""`harness eval --follow RUN_DIR`: the command around harness/pipeline/follow.py's loop.

It checks the flags, runs the doctor's set-up checks on the first checkpoint, and after each checkpoint
writes the scores into the training run's logs (training/score_log.py) and, with --leaderboard DIR,
renders the page. Ctrl-C (exit 130) and SIGTERM (exit 143) stop it cleanly between two writes of the
store; the same command resumes. A follower started by `harness train --follow-eval` (the environment
names its trainer, FOLLOW_PARENT_ENV) also stops once that trainer is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
from collections.abc import Callable

FOLLOW_PARENT_ENV = "HARNESS_FOLLOW_PARENT"
FOLLOW_SINCE_ENV = "HARNESS_FOLLOW_SINCE"


class _Terminated(BaseException):
    """SIGTERM: unwinds the evaluation like Ctrl-C does (the store keeps every finished batch)."""


def _raise_terminated(signum, frame) -> None:
    raise _Terminated()


def _started_at() -> float | None:
    """When the trainer started this follower (its end-of-run marker must be newer)."""
    try:
        return float(os.environ[FOLLOW_SINCE_ENV])
    except (KeyError, ValueError):
        return None


def _keep_going():
    """While the trainer that started this follower lives (when one did)."""
    parent = os.environ.get(FOLLOW_PARENT_ENV, "")
    if not parent.isdigit():
        return lambda: True
    pid = int(parent)
    return lambda: os.getppid() == pid


def _leaderboard(results_dir, board: str, name: str) -> None:
    """Render the page of this run's results.json into `board` (the leaderboard command, quietly)."""
    from harness.cli import build_parser

    argv = ["leaderboard", str(results_dir), "--out", board, "--title", f"{name}: checkpoints as training writes them"]
    args = build_parser().parse_args(argv)
    with contextlib.redirect_stdout(io.StringIO()):
        args._run(args)


def _check_run_folder(run: str) -> None:
    """A follower started by hand follows a run folder that exists (a trainer's child may start first)."""
    from harness.core.errors import UserError

    if os.path.isdir(run) or (FOLLOW_PARENT_ENV in os.environ and not os.path.exists(run)):
        return
    what = "is not a folder" if os.path.exists(run) else "does not exist"
    raise UserError(
        f"--follow {run} {what}: pass the --out folder of a harness train run (to follow a run from its start, "
        'add --follow-eval "EVAL FLAGS" to its harness train command)'
    )


def run_follow(args: argparse.Namespace, config_from_args: Callable) -> int:
    """`harness eval --follow`; `config_from_args` is eval's (passed in: eval imports this module)."""
    from harness.commands._follow_options import DEFAULT_NO_GAIN_AFTER, DEFAULT_POLL, check_follow_args
    from harness.core.paths import check_out
    from harness.pipeline.follow import FollowOptions, FollowUpdate, follow
    from harness.pipeline.run_verdicts import log_row
    from training.score_log import ScoreLog

    check_follow_args(args)
    _check_run_folder(args.follow)
    if args.leaderboard:
        check_out(args.leaderboard)
    args.ckpts = args.follow  # a stand-in: the follower names the checkpoints of each evaluation itself
    cfg = config_from_args(args)
    opts = FollowOptions(
        run_dir=os.path.normpath(args.follow),
        poll_seconds=DEFAULT_POLL if args.follow_poll is None else args.follow_poll,
        no_gain_after=DEFAULT_NO_GAIN_AFTER if args.no_gain_after is None else args.no_gain_after,
        keep_going=_keep_going(),
        marker_after=_started_at(),
    )
    logs = ScoreLog(opts.run_dir)

    def before_first(first_cfg) -> None:
        if not cfg.no_doctor:
            from harness.pipeline.doctor import preflight

            preflight(first_cfg)  # a broken set-up stops here, before a curve of zeros

    def after_checkpoint(update: FollowUpdate) -> None:
        logs.sync([log_row(p) for p in update.curve.points])
        if args.leaderboard:
            _leaderboard(update.out, args.leaderboard, update.results["run"]["name"])

    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        follow(cfg, opts, before_first=before_first, after_checkpoint=after_checkpoint)
    except _Terminated:
        print("follow stopped (SIGTERM): finished results are kept; the same command resumes", file=sys.stderr)
        return 143
    finally:
        signal.signal(signal.SIGTERM, previous)
        logs.close()
    return 0
