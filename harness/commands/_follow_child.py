"""`harness train --follow-eval "EVAL FLAGS"`: the follower (`harness eval --follow RUN EVAL FLAGS`) as a
child process of the trainer.

    child = FollowerChild.from_flags(run_dir, '--suite ruler --lengths 4k-64k --samples 100', device="cuda:1")
    child.start()                 # before training; only the process of rank 0 starts one
    ...train...
    child.finish()                # training ended: let it evaluate what is left, then it ends by itself
    child.stop()                  # training failed or was interrupted: SIGTERM, it stops between two writes

The flags are checked before training starts (a typo is one line, exit 2, nothing trained). A follower
that fails never stops training: its exit is one warning line on the terminal and one row in the run's
log.jsonl ({"step", "event": "follower_exited", "code", "message"}), and the same `harness eval --follow`
command restarts it by hand. The child knows its trainer (HARNESS_FOLLOW_PARENT) and stops once it is
gone, so a trainer killed with -9 leaves no follower behind for long; the next `harness train` starts a
new one, and the store's lock keeps the two from computing a sample twice.
`--eval-device cuda:N` shows the follower the trainer's N-th visible GPU only; `cpu` none.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.core.errors import UserError

_DEVICE = re.compile(r"^(cpu|cuda:\d+)$")
# File times come from a coarse kernel clock (a tick behind time.time()): a marker written just after the
# child starts must not look older than it
MTIME_SLACK = 0.1
STOP_WAIT_SECONDS = 60.0  # after SIGTERM, then SIGKILL (the store keeps every finished batch either way)


def _visible_devices(device: str | None) -> str | None:
    """CUDA_VISIBLE_DEVICES for the child (None: inherit the trainer's)."""
    if device is None:
        return None
    if not _DEVICE.match(device):
        raise UserError(f"--eval-device {device!r} is not a device: pass cpu or cuda:N (e.g. cuda:1)")
    if device == "cpu":
        return ""
    index = int(device.split(":")[1])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return str(index)
    ids = [x.strip() for x in visible.split(",") if x.strip()]
    if index >= len(ids):
        raise UserError(
            f"--eval-device {device}: CUDA_VISIBLE_DEVICES={visible} shows {len(ids)} GPU(s); pass cuda:0..{len(ids) - 1}"
        )
    return ids[index]


def eval_argv(run_dir: str, flags: str) -> list[str]:
    """`harness eval --follow RUN FLAGS` as arguments (a progress bar would break the trainer's)."""
    try:
        words = shlex.split(flags)
    except ValueError as exc:
        raise UserError(f'--follow-eval {flags!r} cannot be split into flags ({exc}): quote it like "--suite ruler"')
    argv = ["eval", "--follow", run_dir, *words]
    return argv if "--no-progress" in words else [*argv, "--no-progress"]


def check_eval_flags(argv: list[str]) -> None:
    """The follower's flags as `harness eval` checks them, before any training (one line, exit 2)."""
    from harness.cli import build_parser
    from harness.commands._follow_options import check_follow_args
    from harness.commands.eval import check_args

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = build_parser().parse_args(argv)
    except SystemExit:  # a flag eval does not take: argparse's line, said as this flag's
        why = re.sub(r"^error: [\w ]*?: |; see `.*`$", "", said.getvalue().strip())
        raise UserError(f"--follow-eval: {why} (see `harness eval --help`)") from None
    check_follow_args(args)
    check_args(args)


class FollowerChild:
    """The follower process of one training run (see the module docstring)."""

    def __init__(self, run_dir: str, argv: list[str], visible: str | None):
        self.run_dir = run_dir
        self.argv = argv
        self.visible = visible
        self.proc: subprocess.Popen | None = None
        self.extra_env: dict[str, str] = {}  # more of the child's environment (e.g. HARNESS_THREADS)
        self._stopping = False
        self._watch: threading.Thread | None = None

    @classmethod
    def from_flags(cls, run_dir: str, flags: str, device: str | None = None) -> FollowerChild:
        argv = eval_argv(run_dir, flags)
        visible = _visible_devices(device)
        check_eval_flags(argv)
        return cls(run_dir, argv, visible)

    def command(self) -> str:
        return "harness " + " ".join(shlex.quote(a) for a in self.argv)

    def start(self) -> None:
        from harness.commands._follow import FOLLOW_PARENT_ENV, FOLLOW_SINCE_ENV

        # (an end-of-run marker older than now is the previous run's: this trainer removes it)
        env = {**os.environ, FOLLOW_PARENT_ENV: str(os.getpid()), FOLLOW_SINCE_ENV: repr(time.time() - MTIME_SLACK)}
        if self.visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.visible
        env.update(self.extra_env)
        self.proc = subprocess.Popen([sys.executable, "-m", "harness", *self.argv], env=env, stdin=subprocess.DEVNULL)
        print(f"follower started (pid {self.proc.pid}): {self.command()}", flush=True)
        self._watch = threading.Thread(target=self._wait, name="follower-watch", daemon=True)
        self._watch.start()

    def _wait(self) -> None:
        assert self.proc is not None
        code = self.proc.wait()
        if code != 0 and not self._stopping:
            self._report(code)

    def _report(self, code: int) -> None:
        """One line on the terminal and one row in the run's log.jsonl; training goes on."""
        from training.logging import LOG_NAME, read_log

        log = Path(self.run_dir) / LOG_NAME
        try:
            steps = [r["step"] for r in read_log(log) if "loss" in r]
        except (OSError, ValueError):
            steps = []
        step = steps[-1] if steps else 0
        message = (
            f"the follower exited with code {code} at training step {step}; training goes on; "
            f"restart it by hand: {self.command()}"
        )
        print(f"warning: {message}", file=sys.stderr, flush=True)
        row = {"step": step, "event": "follower_exited", "code": code, "message": message}
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (json.dumps(row) + "\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass  # the terminal line above says it

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def finish(self) -> None:
        """Training has ended: the follower evaluates what is left and ends by itself (Ctrl-C stops it)."""
        if not self.running():
            self._join()
            return
        print(
            f"training done; the follower (pid {self.proc.pid}) evaluates the checkpoints left, then ends "  # type: ignore[union-attr]
            "(Ctrl-C stops it; the same `harness eval --follow` command finishes the job later)",
            flush=True,
        )
        try:
            self._join()
        except KeyboardInterrupt:
            self.stop()
            raise

    def _join(self) -> None:
        if self._watch is not None:
            self._watch.join()

    def stop(self) -> None:
        """SIGTERM (it stops between two writes of the store), SIGKILL if it has not ended in time."""
        if self.proc is None:
            return
        self._stopping = True
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._join()


def add_follow_eval_arguments(g) -> None:
    """`harness train`'s flags for a follower child."""
    g.add_argument(
        "--follow-eval",
        metavar='"EVAL FLAGS"',
        help="evaluate each checkpoint as it is written: starts `harness eval --follow RUN EVAL FLAGS` beside training "
        '(e.g. "--suite ruler --lengths 4k-64k --samples 100"), lets it finish the last checkpoints when training '
        "ends, stops it when training fails; a failing follower never stops training (docs/following.md)",
    )
    g.add_argument(
        "--eval-device",
        metavar="DEVICE",
        help="with --follow-eval: the follower's device, cuda:N (the N-th GPU training sees) or cpu "
        "(default: the same devices, between and beside training's work)",
    )


def follower_for(args, run_dir: str) -> FollowerChild | None:
    """The follower of `harness train --follow-eval`, its flags checked (None without the flag)."""
    if args.follow_eval is None:
        if args.eval_device is not None:
            raise UserError('--eval-device is for --follow-eval: add --follow-eval "EVAL FLAGS" or drop it')
        return None
    return FollowerChild.from_flags(run_dir, args.follow_eval, args.eval_device)
