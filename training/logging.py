"""The run's JSONL log (<run>/log.jsonl) and its progress bar.

One line per optimizer step: {"step", "loss", "loss_tokens", "tokens", "tokens_per_s", "lr",
"grad_norm", "elapsed_s"}. `loss` is the step's loss (token-averaged over every micro-batch and
process), never a single micro-batch's. A resumed run first drops the lines after the step it
resumes from, so the file always reads as one uninterrupted run.

    from training.logging import read_log
    curve = [row["loss"] for row in read_log("runs/anchor/log.jsonl")]
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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
    """Appends step rows to <run>/log.jsonl and drives a tqdm bar; silent on non-zero ranks."""

    def __init__(
        self, run_dir: str | Path, *, total_steps: int, start_step: int, enabled: bool = True, progress: bool = True
    ):
        self.path = Path(run_dir) / LOG_NAME
        self.enabled = enabled
        self._bar = None
        if not enabled:
            return
        self._truncate_after(start_step)
        self._file = open(self.path, "a")  # open for the logger's lifetime, closed by close()  # noqa: SIM115
        if progress:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, desc="train", unit="step", dynamic_ncols=True)

    def _truncate_after(self, step: int) -> None:
        """Keep rows up to `step` (the resumed state); later ones were never made durable."""
        if not self.path.exists():
            return
        kept = [r for r in read_log(self.path) if r.get("step", 0) <= step]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
        os.replace(tmp, self.path)

    def write(self, row: dict) -> None:
        if not self.enabled:
            return
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{row['loss']:.4f}", tok_s=f"{row['tokens_per_s']:.0f}", lr=f"{row['lr']:.2e}")

    def close(self) -> None:
        if not self.enabled:
            return
        self._file.close()
        if self._bar is not None:
            self._bar.close()
