"""Checkpoint scores beside the loss: a follower's rows in the training run's logs.

    from training.score_log import ScoreLog
    log = ScoreLog("runs/anchor")
    log.sync(rows)        # rows: harness.pipeline.run_verdicts.log_row of each evaluated checkpoint
    log.close()

`harness eval --follow RUN` (harness/commands/_follow.py) calls `sync` after each checkpoint with the
row of every checkpoint on its curve. A row is {"step", "eval_checkpoint", "eval_fingerprint",
"eval/<suite>/<length>", "eval/<suite>/avg", "eval/<suite>/effective_length", "eval/degenerate/<kind>",
"eval/train_tokens"} at the checkpoint's step (docs/training-logs.md). `sync` appends to RUN/log.jsonl
the rows it lacks (by step and fingerprint; one write each, O_APPEND, so the trainer's own appends are
never interleaved), and sends the same rows to the dashboards the run logs to: TensorBoard when
RUN/tensorboard/ exists (its own event files under RUN/tensorboard/eval/, one TensorBoard run beside the
training's), W&B when RUN/wandb/ exists and wandb is installed.

log.jsonl is the record of what was logged: a trainer resumed from an earlier state drops the rows
after it (training.logging.JsonlSink), and the next `sync` writes them again. Dashboards get a row when
log.jsonl gets it, dashboards first, so a follower killed in between may show a point twice in
TensorBoard (at the same step, with the same value) but never loses one. A dashboard or log that
cannot be written is one warning, and the follower goes on evaluating.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from training.logging import LOG_NAME, TENSORBOARD_DIR, WANDB_DIR, read_log, scalars

EVAL_TENSORBOARD = "eval"  # RUN/tensorboard/eval/: the follower's TensorBoard run


class ScoreLog:
    """Writes a follower's checkpoint rows into a training run's logs (see the module docstring)."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._tb: Any = None
        self._wandb: Any = None
        self._failed: set[str] = set()

    def _warn(self, what: str, exc: BaseException) -> None:
        if what not in self._failed:
            self._failed.add(what)
            print(f"warning: cannot log checkpoint scores to {what} ({exc}); evaluation goes on", file=sys.stderr)

    def _logged(self) -> set[tuple] | None:
        """(step, fingerprint) of the rows log.jsonl holds; None when it cannot be read (then nothing is
        written: appending without knowing what is there would repeat every row)."""
        try:
            rows = read_log(self.run_dir / LOG_NAME)
        except (OSError, ValueError) as exc:
            self._warn(str(self.run_dir / LOG_NAME), exc)
            return None
        return {(r.get("step"), r.get("eval_fingerprint")) for r in rows if "eval_fingerprint" in r}

    def sync(self, rows: list[dict]) -> int:
        """Log the rows log.jsonl lacks; returns how many were written."""
        if not self.run_dir.is_dir() or str(self.run_dir / LOG_NAME) in self._failed:
            return 0
        have = self._logged()
        if have is None:
            return 0
        written = 0
        for row in sorted(rows, key=lambda r: r["step"]):
            if (row["step"], row["eval_fingerprint"]) in have:
                continue
            self._dashboards(row)
            if not self._append(row):
                break
            written += 1
        return written

    def _append(self, row: dict) -> bool:
        path = self.run_dir / LOG_NAME
        data = (json.dumps(row, allow_nan=False) + "\n").encode()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            self._warn(str(path), exc)
            return False
        return True

    def _dashboards(self, row: dict) -> None:
        if (self.run_dir / TENSORBOARD_DIR).is_dir() and "tensorboard" not in self._failed:
            try:
                self._tensorboard(row)
            except Exception as exc:  # noqa: BLE001 - a dashboard's failure never stops the evaluation
                self._warn("tensorboard", exc)
        if (self.run_dir / WANDB_DIR).is_dir() and "wandb" not in self._failed:
            try:
                self._weights_and_biases(row)
            except Exception as exc:  # noqa: BLE001 - as above (wandb raises many kinds)
                self._warn("wandb", exc)

    def _tensorboard(self, row: dict) -> None:
        if self._tb is None:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.run_dir / TENSORBOARD_DIR / EVAL_TENSORBOARD))
        for tag, value in scalars(row).items():
            self._tb.add_scalar(tag, value, global_step=row["step"])
        self._tb.flush()

    def _weights_and_biases(self, row: dict) -> None:
        if self._wandb is None:
            import importlib.util

            if importlib.util.find_spec("wandb") is None:
                raise ModuleNotFoundError("wandb is not installed here (pip install wandb)")
            from training.logging import WandbSink

            self._wandb = WandbSink(self.run_dir, start_step=0, config={"follower": True})
        self._wandb.write(row)

    def close(self) -> None:
        for sink in (self._tb, self._wandb):
            if sink is not None:
                try:
                    sink.close()
                except Exception as exc:  # noqa: BLE001 - closing a dashboard only warns
                    self._warn("a dashboard", exc)
        self._tb = self._wandb = None
