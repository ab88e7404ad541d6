"""The demo's evaluation while it trains: one `harness eval --follow` child per run
(harness/commands/_follow_child.py), started before the run trains, so each checkpoint is evaluated as
training writes it and the curve is printed as it grows ("[follow] full/ckpt-160 ...").

The follower gets the flags the demo's plain evaluation of the run took (harness.demo.subcommands
`_eval_argv`), less the checkpoint selection (it follows the run's own checkpoints, which are the last
--keep-last: training writes no others), so its records and results.json are those of that evaluation.
While one run trains, the follower of the run before it evaluates beside it; FOLLOWER_THREADS keeps the
two from fighting over the cores (measured in docs/demo.md, "Time"). A follower that fails leaves the
demo to evaluate that run itself afterwards, as it did before followers.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from harness.demo.config import DemoConfig
from harness.demo.subcommands import _eval_argv

# Threads of each follower's evaluation (HARNESS_THREADS): the demo model is small enough that one
# thread loses little, and the training beside it keeps the other core.
FOLLOWER_THREADS = 1


def follow_flags(cfg: DemoConfig, tasks: list[str], mode: str, results: Path, max_len: int) -> str:
    """The `harness eval` flags of the run's evaluation, without its checkpoint selection."""
    argv = _eval_argv(cfg, tasks, "-", mode, results, max_len, None)[1:]  # drop "eval"
    at = argv.index("--ckpts")
    del argv[at : at + 2]
    return shlex.join([*argv, "--follow-poll", "1"])


def start_follower(cfg: DemoConfig, tasks: list[str], mode: str, run_dir: Path, results: Path, max_len: int):
    """The follower of one run, started (it waits for the run's first checkpoint)."""
    from harness.commands._follow_child import FollowerChild

    child = FollowerChild.from_flags(str(run_dir), follow_flags(cfg, tasks, mode, results, max_len))
    child.extra_env = {"HARNESS_THREADS": str(FOLLOWER_THREADS)}
    child.start()
    return child


def finish_followers(followers: dict, evaluate_alone) -> None:
    """Wait for each follower to evaluate its run's last checkpoints; a run whose follower failed is
    evaluated by `evaluate_alone(mode)` instead."""
    for mode, child in followers.items():
        child.finish()
        code = child.proc.returncode if child.proc is not None else None
        if code != 0:
            print(f"  the follower of {mode} ended with code {code}: evaluating {mode} now", flush=True)
            evaluate_alone(mode)
