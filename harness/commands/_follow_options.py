"""`harness eval`'s options for following a training run (docs/following.md).

    harness eval --follow runs/anchor --suite ruler --lengths 4k-64k --samples 100
    harness eval --follow runs/anchor --tasks niah_single_1,vt --lengths 1k,2k --leaderboard site/

The loop is harness/pipeline/follow.py; harness/commands/_follow.py runs it for `harness eval`.
"""

from __future__ import annotations

import argparse

from harness.core.errors import UserError

DEFAULT_POLL = 5.0
DEFAULT_NO_GAIN_AFTER = 3


def add_follow_options(g) -> None:
    g.add_argument(
        "--follow",
        metavar="RUN_DIR",
        help="evaluate a training run's checkpoints as training writes them (instead of --ckpts): each complete "
        "ckpt-<step>, oldest first, results.json rewritten after each; ends when the run has ended and every "
        "checkpoint is evaluated; the same command resumes",
    )
    g.add_argument(
        "--leaderboard",
        metavar="DIR",
        help="with --follow: rewrite the leaderboard page in DIR after each checkpoint",
    )
    g.add_argument(
        "--no-gain-after",
        type=int,
        metavar="K",
        help=f"with --follow: say 'no gain since step S' when none of the last K checkpoints is significantly "
        f"above the one before them at any length (default {DEFAULT_NO_GAIN_AFTER}; 0: never)",
    )
    g.add_argument(
        "--follow-poll",
        type=float,
        metavar="S",
        help=f"with --follow: seconds between looks for a new checkpoint (default {DEFAULT_POLL:g})",
    )


# Flags that choose the model some other way: --follow chooses the run's checkpoints itself.
_NOT_WITH_FOLLOW = ("ckpts", "last", "embedded", "model", "base_url", "against", "until_width")


def check_follow_args(args: argparse.Namespace) -> None:
    """One-line errors for --follow's flags, before any work."""
    from harness.core.validate import require_above, require_at_least, require_at_most

    if not args.follow:
        given = [f for f in ("leaderboard", "no_gain_after", "follow_poll") if getattr(args, f, None) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UserError(f"{flag} is for --follow RUN_DIR: add --follow or drop {flag}")
        return
    for dest in _NOT_WITH_FOLLOW:
        if getattr(args, dest, None):
            flag = "--" + dest.replace("_", "-")
            raise UserError(f"--follow picks the run's checkpoints itself: drop {flag}")
    require_at_least((("--no-gain-after", args.no_gain_after, 0),))
    require_above((("--follow-poll", args.follow_poll, 0),))
    require_at_most((("--follow-poll", args.follow_poll, 3600.0), ("--no-gain-after", args.no_gain_after, 10_000)))
