"""The run's logs: <run>/log.jsonl (always), TensorBoard and Weights & Biases (--log-to), and the progress bar.

One JSONL line per optimizer step: {"step", "loss", "loss_tokens", "tokens", "tokens_per_s", "lr",
"grad_norm", "elapsed_s", "epoch"}. `loss` is the step's loss (token-averaged over every micro-batch and
process), never a single micro-batch's. A resumed run first drops the lines after the step it
resumes from, so the file always reads as one uninterrupted run.

    from training.logging import read_log
    curve = [row["loss"] for row in read_log("runs/anchor/log.jsonl")]

Sinks (`harness train --log-to tensorboard,wandb`; docs/training-logs.md): each is a `MetricSink`
that receives the same rows. TensorBoard gets one scalar per numeric field, tagged with the field's
name, at global step `step` (event files under <run>/tensorboard/; a resumed run purges the steps
after its resume point, as the JSONL log does). W&B gets the same fields through `wandb.log(step=)`,
in offline mode (files under <run>/wandb/, `wandb sync` uploads them) unless WANDB_MODE says
otherwise or the W&B server is reachable with credentials. Only rank 0 writes any of them.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from harness.core.errors import MissingExtra, UserError

LOG_NAME = "log.jsonl"
TENSORBOARD_DIR = "tensorboard"
WANDB_DIR = "wandb"  # wandb.init(dir=<run>) writes <run>/wandb/offline-run-*/
SINKS = ("jsonl", "tensorboard", "wandb")
# sink -> (module that must be importable, pip command that installs it)
_EXTRAS = {
    # the extras of the same name (pip install -e '.[tensorboard]') install the same packages
    "tensorboard": ("tensorboard", "pip install tensorboard"),
    "wandb": ("wandb", "pip install wandb"),
}


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


def parse_log_to(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """--log-to "tensorboard,wandb" -> ("jsonl", "tensorboard", "wandb"): JSONL always first, no repeats.

    An unknown name or a sink whose package is missing is a UserError (one line, exit 2), raised
    before any model or data is read.
    """
    names = text.split(",") if isinstance(text, str) else list(text or ())
    sinks = ["jsonl"]
    for raw in names:
        name = raw.strip().lower()
        if not name:
            continue
        if name not in SINKS:
            raise UserError(
                f"--log-to {raw.strip()!r} is not a log sink: pass {', '.join(SINKS[1:])} (comma-separated)"
            )
        if name not in sinks:
            sinks.append(name)
    for name in sinks:
        if name in _EXTRAS:
            module, install = _EXTRAS[name]
            if not _installed(module):
                raise MissingExtra(f"--log-to {name}", install)
    return tuple(sinks)


def check_sink_folders(run_dir: str | Path, sinks: Sequence[str]) -> list[Path]:
    """The folders the sinks write under the run (RUN/tensorboard/), checked like --out before any
    model or data is read: a file, a symbolic link that leads nowhere or a read-only folder in its
    place is one line (UserError), not a traceback from inside SummaryWriter after the model loaded."""
    from harness.core.paths import check_out

    return [
        check_out(Path(run_dir) / TENSORBOARD_DIR, "--log-to tensorboard's folder")
        for name in sinks
        if name == "tensorboard"
    ]


def _installed(module: str) -> bool:
    """Importable here, without importing it (wandb takes seconds to import)."""
    return importlib.util.find_spec(module) is not None


def scalars(row: dict) -> dict[str, float]:
    """The row's numeric fields but `step` (None, e.g. grad_norm with clipping off, is left out)."""
    return {
        k: float(v) for k, v in row.items() if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


class MetricSink(Protocol):
    """Where step rows go. `write` gets every row (its "step" is the optimizer step); `close` ends the run."""

    name: str

    def write(self, row: dict) -> None: ...

    def close(self) -> None: ...


class JsonlSink:
    """Appends rows to <run>/log.jsonl; opened at the first row, so a run that fails before its first
    step leaves the file as it was."""

    name = "jsonl"

    def __init__(self, run_dir: str | Path, *, start_step: int):
        self.path = Path(run_dir) / LOG_NAME
        self._file: TextIO | None = None
        self._truncate_after(start_step)

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

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:  # a full disk: the row that failed was reported by write()
                pass


class TensorBoardSink:
    """Scalars in <run>/tensorboard/ (torch.utils.tensorboard; TensorBoard stores them as float32)."""

    name = "tensorboard"

    def __init__(self, run_dir: str | Path, *, start_step: int):
        from torch.utils.tensorboard import SummaryWriter

        from harness.core.atomic import os_error

        self.path = check_sink_folders(run_dir, ("tensorboard",))[0]
        try:
            # purge_step: TensorBoard drops events at or after it written by an earlier (killed) process.
            self._writer = SummaryWriter(log_dir=str(self.path), purge_step=start_step + 1 if start_step > 0 else None)
        except OSError as exc:  # made between the check and here, or a disk that refuses it
            raise os_error(self.path, exc) from None

    def write(self, row: dict) -> None:
        for tag, value in scalars(row).items():
            self._writer.add_scalar(tag, value, global_step=row["step"])
        self._writer.flush()  # a dashboard watching the run sees each step as it ends

    def close(self) -> None:
        self._writer.close()


def _wandb_online_reason() -> str | None:
    """Why W&B runs offline here (None: online). WANDB_MODE, when set, is wandb's own decision."""
    import netrc
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai")
    host, port = url.hostname or "api.wandb.ai", url.port or (80 if url.scheme == "http" else 443)
    if not os.environ.get("WANDB_API_KEY"):
        try:
            auth = netrc.netrc().authenticators(host)
        except (OSError, netrc.NetrcParseError):
            auth = None
        if auth is None:
            return "no W&B credentials (WANDB_API_KEY or `wandb login`)"
    if not (os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")):  # a proxy: let wandb connect
        try:
            socket.create_connection((host, port), timeout=3).close()
        except OSError as exc:
            return f"cannot connect to {host}:{port} ({exc.strerror or type(exc).__name__})"
    return None


class WandbSink:
    """A W&B run per process start (a resumed run is a new W&B run with resumed_from in its config)."""

    name = "wandb"

    def __init__(self, run_dir: str | Path, *, start_step: int, config: dict | None = None):
        import importlib

        wandb: Any = importlib.import_module("wandb")  # an optional extra: no stubs needed for mypy without it
        run_dir = Path(run_dir)
        mode = os.environ.get("WANDB_MODE")
        why = None
        if not mode:
            why = _wandb_online_reason()
            mode = "offline" if why else "online"
        try:
            self._run: Any = wandb.init(
                project=os.environ.get("WANDB_PROJECT") or "longctx-harness",
                name=run_dir.resolve().name,
                dir=str(run_dir),
                mode=mode,
                config={**(config or {}), "resumed_from": start_step},
                settings=wandb.Settings(console="off"),
            )
        except Exception as exc:  # noqa: BLE001 - wandb raises many kinds (a bad key, a server error): one line
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UserError(
                f"--log-to wandb: wandb.init failed ({msg}); set WANDB_MODE=offline to log locally"
            ) from None
        self.offline = mode == "offline"
        self.path = Path(self._run.dir).parent if self.offline else None
        if self.offline:
            print(
                f"W&B: offline ({why or 'WANDB_MODE=offline'}); files in {self.path}, upload with `wandb sync {self.path}`",
                flush=True,
            )

    def write(self, row: dict) -> None:
        self._run.log(scalars(row), step=row["step"])

    def close(self) -> None:
        self._run.finish()


def open_sinks(
    run_dir: str | Path, sinks: Sequence[str], *, start_step: int, config: dict | None = None
) -> list[MetricSink]:
    """The sinks named (parse_log_to's output), JSONL first."""
    opened: list[MetricSink] = []
    try:
        for name in sinks:
            if name == "jsonl":
                opened.append(JsonlSink(run_dir, start_step=start_step))
            elif name == "tensorboard":
                opened.append(TensorBoardSink(run_dir, start_step=start_step))
            elif name == "wandb":
                opened.append(WandbSink(run_dir, start_step=start_step, config=config))
            else:
                raise UserError(f"--log-to {name!r} is not a log sink: pass {', '.join(SINKS[1:])}")
    except BaseException:
        for sink in opened:
            sink.close()
        raise
    return opened


class StepLog:
    """Sends step rows to the run's sinks (JSONL always) and drives a tqdm bar; silent on non-zero ranks.

    A dashboard sink that fails mid-run (a full disk under tensorboard/, a W&B error) is dropped with
    one warning; the run and its JSONL log go on. A JSONL failure stops the run, as before.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        total_steps: int,
        start_step: int,
        enabled: bool = True,
        progress: bool = True,
        sinks: Sequence[str] = ("jsonl",),
        config: dict | None = None,
    ):
        self.path = Path(run_dir) / LOG_NAME
        self.enabled = enabled
        self._bar = None
        self.sinks: list[MetricSink] = []
        if not enabled:
            return
        names = ["jsonl", *(s for s in sinks if s != "jsonl")]
        self.sinks = open_sinks(run_dir, names, start_step=start_step, config=config)
        if progress:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, desc="train", unit="step", dynamic_ncols=True)

    def write(self, row: dict) -> None:
        if not self.enabled:
            return
        for sink in list(self.sinks):
            if sink.name == "jsonl":
                sink.write(row)
                continue
            try:
                sink.write(row)
            except Exception as exc:  # noqa: BLE001 - a dashboard's failure never stops the run
                print(
                    f"warning: --log-to {sink.name} stopped at step {row['step']} ({exc}); log.jsonl goes on",
                    file=sys.stderr,
                )
                self.sinks.remove(sink)
                with contextlib.suppress(Exception):  # already reported above
                    sink.close()
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{row['loss']:.4f}", tok_s=f"{row['tokens_per_s']:.0f}", lr=f"{row['lr']:.2e}")

    def close(self) -> None:
        if not self.enabled:
            return
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # re-raised for log.jsonl; a dashboard only warns
                if sink.name == "jsonl":
                    raise
                print(f"warning: closing the {sink.name} log failed ({exc})", file=sys.stderr)
        if self._bar is not None:
            self._bar.close()
