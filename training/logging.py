"""The run's JSONL log (<run>/log.jsonl) and its progress bar.

One line per optimizer step: {"step", "loss", "loss_tokens", "tokens", "tokens_per_s", "lr",
"grad_norm", "elapsed_s"}. `loss` is the step's loss (token-averaged over every micro-batch and
process), never a single micro-batch's. A resumed run first drops the lines after the step it
resumes from, so the file always reads as one uninterrupted run.

    from training.logging import read_log
    curve = [row["loss"] for row in read_log("runs/anchor/log.jsonl")]
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import TextIO

LOG_NAME = "log.jsonl"


def read_log(path: str | Path) -> list[dict]:
    """Rows of a log; a torn last line (killed writer) is skipped."""
    rows: list[dict] = []
    path = Path(path)
    if not path.exists():
        return rows
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i != len(lines) - 1:
                raise
    return rows


class StepLog:
    """Appends step rows to <run>/log.jsonl and drives a tqdm bar; silent on non-zero ranks.

    The file is opened at the first row, so a run that fails before its first step leaves it as it was.
    """

    def __init__(
        self, run_dir: str | Path, *, total_steps: int, start_step: int, enabled: bool = True, progress: bool = True
    ):
        self.path = Path(run_dir) / LOG_NAME
        self.enabled = enabled
        self._bar = None
        self._file: TextIO | None = None
        if not enabled:
            return
        self._truncate_after(start_step)
        if progress:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, desc="train", unit="step", dynamic_ncols=True)

    def _truncate_after(self, step: int) -> None:
        """Keep rows up to `step` (the resumed state); later ones were never made durable."""
        from training.checkpointing import write_text_atomic

        if not self.path.exists():
            return
        rows = read_log(self.path)
        kept = [r for r in rows if r.get("step", 0) <= step]
        if len(kept) == len(rows) and self.path.read_text().endswith("\n"):
            return  # nothing to drop: leave the file untouched
        write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def write(self, row: dict) -> None:
        if not self.enabled:
            return
        try:
            if self._file is None:
                self._file = open(self.path, "a")  # noqa: SIM115 - kept open for the run, closed in close()
            self._file.write(json.dumps(row) + "\n")
            self._file.flush()
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                from training.checkpointing import _free_bytes, disk_full_error

                raise disk_full_error(self.path, 4096, _free_bytes(self.path.parent)) from None
            raise
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{row['loss']:.4f}", tok_s=f"{row['tokens_per_s']:.0f}", lr=f"{row['lr']:.2e}")

    def close(self) -> None:
        if not self.enabled:
            return
        if self._file is not None:
            try:
                self._file.close()
            except OSError:  # a full disk: the row that failed was reported by write()
                pass
        if self._bar is not None:
            self._bar.close()
