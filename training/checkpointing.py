"""Evaluable checkpoints (<run>/ckpt-<step>/) and resumable training state (<run>/state/).

A checkpoint is a `save_pretrained` directory with the tokenizer and `harness_training.json`
beside config.json (docs/contracts.md), so `harness eval --ckpts run/ckpt-<1960..2000>` loads it
as it is. Only the last K of every S steps are written (`checkpoint_steps`), each exactly once, by
one process.

Every directory (checkpoint or state) is written the same way, so that a process killed at any
moment never leaves a half-written or half-deleted one under its final name:
  1. write everything into <run>/.tmp-<name>/, an in-progress marker first, a completion marker
     (harness.models.checkpoints.COMPLETE_FILE: the files it holds) last, then the in-progress marker removed;
  2. rename an existing <name> aside to .old-<name>;
  3. rename .tmp-<name> to <name>;
  4. delete .old-<name>.
`recover` (run at the start of every run) finishes or undoes a replacement that was interrupted
between 2 and 4 and deletes leftover temporary directories. `harness eval` skips directories that
are not complete (harness.models.checkpoints.incomplete_reason).

The full state (model, optimizer, scheduler, RNG streams, data position, step) lives under
<run>/state/step-<N>/state.pt; <run>/state/latest names the newest complete one. The two newest
are kept: an unreadable newest state (e.g. a truncated copy) falls back to the previous one.

A run folder may come from someone else, so its state is read with torch.load(weights_only=True):
tensors, numbers, strings, tuples, lists and dicts only, no unpickled Python objects (whose loading
could run any code). The RNG streams are stored in those types (numpy's as a tensor, see
training.rng_streams). A state.pt that needs more (a planted payload, or numpy arrays as versions before
state format 2 wrote) is refused with one line before anything of it runs, never skipped over to
an older state.

A full disk while writing ends the run with one line naming the directory and the space it
needs; the temporary directory is removed and everything finished before is kept.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.core.errors import UserError
from harness.core.pickled import refusal, refused_objects
from harness.models.checkpoints import COMPLETE_FILE, IN_PROGRESS_FILE
from training.rng_streams import rng_state, set_rng_state

SCHEMA_VERSION = 1
META_NAME = "harness_training.json"
CKPT_RE = re.compile(r"^ckpt-(\d+)$")
STATE_DIR = "state"
STATE_RE = re.compile(r"^step-(\d+)$")
STATES_KEPT = 2
TMP_PREFIX = ".tmp-"
OLD_PREFIX = ".old-"
_DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_NEARLY_FULL = 1 << 20  # bytes: below this after a failed write, the disk is what failed


def checkpoint_steps(steps: int, save_every: int, keep_last: int | None) -> list[int]:
    """Steps that get a ckpt-<step>: multiples of save_every (and the last step), the last K of them."""
    marks = list(range(save_every, steps + 1, save_every))
    if not marks or marks[-1] != steps:
        marks.append(steps)
    return marks if keep_last is None else marks[-keep_last:]


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every ckpt-<step> directory, by step."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if p.is_dir() and (m := CKPT_RE.match(p.name))]
    return sorted(found)


# ---------------------------------------------------------------- atomic directories


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _free_bytes(path: Path) -> int:
    for p in (path, *path.parents):
        if p.exists():
            return shutil.disk_usage(p).free
    return 0


def _is_disk_full(exc: BaseException, where: Path) -> bool:
    """ENOSPC/EDQUOT anywhere in the exception chain, or (torch.save, safetensors and tokenizers
    report a failed write as RuntimeError, SafetensorError or a bare Exception, without an errno)
    any failure that leaves the disk with almost no free space."""
    e: BaseException | None = exc
    while e is not None:
        if isinstance(e, OSError) and e.errno in _DISK_FULL_ERRNOS:
            return True
        e = e.__cause__ or e.__context__
    return _free_bytes(where) < _NEARLY_FULL


def disk_full_error(final: Path, needed: int, free: int) -> UserError:
    return UserError(
        f"disk full writing {final}: it needs at least {_human(needed)} free there, {_human(free)} is free; "
        f"free some space (or pass another --out) and re-run the same command to resume (finished checkpoints are kept)"
    )


def _fsync_tree(root: Path) -> None:
    """Make the files durable before the rename publishes them (a rename can outlive unflushed data)."""
    for dirpath, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _fsync_dir(root)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mark_complete(tmp: Path, step: int) -> None:
    """The completion marker lists the directory's files; written after all of them."""
    files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file() and p.name != IN_PROGRESS_FILE}
    (tmp / COMPLETE_FILE).write_text(json.dumps({"schema_version": 1, "step": step, "files": files}, indent=1) + "\n")
    (tmp / IN_PROGRESS_FILE).unlink()


def _is_complete(path: Path) -> bool:
    return (path / COMPLETE_FILE).is_file() and not (path / IN_PROGRESS_FILE).exists()


def _replace_dir(tmp: Path, final: Path, *, hook: Callable[[str, Path], None] | None = None) -> None:
    """Publish a complete `tmp` as `final` by renames only: at every instant `final` is either the
    old complete directory, absent (old one aside, new one ready: `recover` finishes the job), or
    the new one. `hook(point, final)` lets tests stop the replacement between the renames."""
    aside = final.parent / (OLD_PREFIX + final.name)
    if aside.exists():  # left by an earlier interrupted replacement whose final dir is back in place
        shutil.rmtree(aside)
    if final.exists():  # a re-run rewriting its own step (e.g. resumed before this ckpt's state)
        os.rename(final, aside)
    if hook:
        hook("aside", final)
    os.rename(tmp, final)
    _fsync_dir(final.parent)
    if hook:
        hook("renamed", final)
    if aside.exists():
        shutil.rmtree(aside)


@contextmanager
def _writing(final: Path, step: int, needed: int) -> Iterator[Path]:
    """Yield a fresh temporary directory for `final`; on success mark it complete and publish it.

    On any failure the temporary directory is removed; a full disk becomes one UserError."""
    tmp = final.parent / (TMP_PREFIX + final.name)
    if tmp.exists():
        shutil.rmtree(tmp)
    free = _free_bytes(final.parent)
    if needed > free:  # the tensors alone do not fit: fail before filling the disk
        raise disk_full_error(final, needed, free)
    published = False
    try:
        tmp.mkdir(parents=True)
        (tmp / IN_PROGRESS_FILE).write_text("written first, removed last: a directory holding it is incomplete\n")
        yield tmp
        _mark_complete(tmp, step)
        _fsync_tree(tmp)
        _replace_dir(tmp, final, hook=_REPLACE_HOOK)
        published = True
    except UserError:
        raise
    except Exception as exc:
        if _is_disk_full(exc, final.parent):
            free = _free_bytes(final.parent)  # at the failure, before the partial copy is removed
            written = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) if tmp.is_dir() else 0
            shutil.rmtree(tmp, ignore_errors=True)
            raise disk_full_error(final, max(needed, written + free + 1), free) from None
        raise
    finally:
        if not published:
            shutil.rmtree(tmp, ignore_errors=True)


_REPLACE_HOOK: Callable[[str, Path], None] | None = None  # tests: called between the renames of _replace_dir


def recover(run_dir: str | Path) -> list[str]:
    """Finish or undo replacements a killed run left half done; delete temporary leftovers.

    For every .old-<name>: when <name> exists the replacement had finished (drop the old one);
    else when .tmp-<name> is complete, publish it (what the killed run was doing); else put the
    old one back. Returns what it did, one line each.
    """
    done = []
    for root in (Path(run_dir), Path(run_dir) / STATE_DIR):
        if not root.is_dir():
            continue
        for aside in sorted(root.glob(OLD_PREFIX + "*")):
            final = root / aside.name[len(OLD_PREFIX) :]
            tmp = root / (TMP_PREFIX + final.name)
            if final.exists():
                shutil.rmtree(aside)
            elif tmp.is_dir() and _is_complete(tmp):
                os.rename(tmp, final)
                shutil.rmtree(aside)
                done.append(f"finished the interrupted replacement of {final}")
            else:
                os.rename(aside, final)
                done.append(f"restored {final} (its replacement was interrupted)")
        for tmp in sorted(root.glob(TMP_PREFIX + "*")):
            if tmp.is_dir():
                shutil.rmtree(tmp)
            else:
                tmp.unlink()
        for stray in ("latest.tmp", "log.tmp"):
            if (root / stray).is_file():
                (root / stray).unlink()
    return done


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same directory, renamed over `path`."""
    tmp = path.with_name(TMP_PREFIX + path.name)
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno in _DISK_FULL_ERRNOS:
            raise disk_full_error(path, len(text.encode()), _free_bytes(path.parent)) from None
        raise


def _tensor_bytes(obj) -> int:
    """Bytes of every tensor in a (nested) state: a lower bound of what saving it writes."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


# ---------------------------------------------------------------- evaluable checkpoints


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model,
    tokenizer,
    meta: dict,
    *,
    state_dict: dict | None = None,
    dtype: str | None = None,
) -> Path:
    """Write <run>/ckpt-<step>/ (weights, config, tokenizer, harness_training.json) atomically.

    `state_dict` is the full (unsharded) weights when the model is sharded; `meta` must hold
    the contract's keys (see training_meta). `dtype` ("bfloat16") stores the weights in that
    dtype (bf16 runs: half the disk, what evaluation loads anyway); None keeps the fp32 masters.
    """
    run_dir = Path(run_dir)
    final = run_dir / f"ckpt-{step}"
    weights = state_dict if state_dict is not None else model.state_dict()
    if dtype is not None:
        import torch

        target = getattr(torch, dtype)
        weights = {k: v.to(target) if v.is_floating_point() else v for k, v in weights.items()}
    with _writing(final, step, _tensor_bytes(weights)) as tmp:
        # Training runs with use_cache off; evaluation (generation) needs it on.
        use_cache = model.config.use_cache
        model.config.use_cache = True
        try:
            model.save_pretrained(tmp, state_dict=weights, safe_serialization=True)
        finally:
            model.config.use_cache = use_cache
        if dtype is not None:  # save_pretrained records the in-memory (fp32) dtype; the files hold `dtype`
            config = json.loads((tmp / "config.json").read_text())
            config["dtype"] = dtype
            (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        tokenizer.save_pretrained(tmp)
        (tmp / META_NAME).write_text(json.dumps({**meta, "step": step}, indent=2) + "\n")
    return final


def prune_checkpoints(run_dir: str | Path, keep_steps: list[int]) -> None:
    """Remove ckpt-* dirs that are not in keep_steps (left by a run with other --steps/--keep-last)."""
    keep = set(keep_steps)
    for step, path in list_checkpoints(run_dir):
        if step not in keep:
            # Renamed out of the ckpt-* namespace first, so a kill mid-delete leaves no half checkpoint.
            aside = path.parent / (OLD_PREFIX + path.name)
            os.rename(path, aside)
            shutil.rmtree(aside)


def training_meta(
    *,
    mode: str,
    window: int,
    rope_theta: float | None,
    domain_tags,
    interleave_chunks,
    kernel: str,
    seed: int,
    data: dict,
    job: dict,
    tokens_per_step: int | None = None,
) -> dict:
    """harness_training.json without its step (docs/contracts.md); `job` is the whole run config.
    `tokens_per_step` (window x batch x accumulation x data-parallel ranks) puts a checkpoint at
    step x tokens_per_step training tokens (a follower's curve and the leaderboard read it)."""
    from harness.core.provenance import git_hash, package_version

    extra = {} if tokens_per_step is None else {"tokens_per_step": int(tokens_per_step)}
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": mode,
        "window": window,
        "rope_theta": rope_theta,
        "domain_tags": domain_tags,
        "interleave_chunks": interleave_chunks,
        "attention_kernel": kernel,
        "seed": seed,
        "data": data,
        "package_version": package_version(),
        "git_hash": git_hash(),
        "job": job,
        **extra,
    }


# ---------------------------------------------------------------- resumable state


def _kept_states(root: Path) -> list[int]:
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for p in root.iterdir() if p.is_dir() and (m := STATE_RE.match(p.name)))


def save_state(run_dir: str | Path, step: int, payload: dict) -> Path:
    """Write <run>/state/step-<step>/state.pt, then point state/latest at it, then drop old ones."""
    import torch

    root = Path(run_dir) / STATE_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step}"
    with _writing(final, step, _tensor_bytes(payload)) as tmp:
        torch.save({**payload, "step": step, "format": STATE_FORMAT}, tmp / "state.pt")
    write_text_atomic(root / "latest", final.name + "\n")
    for old in _kept_states(root)[:-STATES_KEPT]:
        aside = root / (OLD_PREFIX + f"step-{old}")
        os.rename(root / f"step-{old}", aside)
        shutil.rmtree(aside)
    return final


_UNREADABLE = (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError, KeyError, TypeError)
_STATE_KEYS = ("format", "step", "signature", "model", "optimizer", "scheduler", "rng", "data")
# 2: loads with weights_only=True (numpy's RNG state as a tensor). 1 (no "format" key) pickled numpy arrays.
STATE_FORMAT = 2


def _load_state_file(path: Path) -> dict:
    import torch

    try:
        with warnings.catch_warnings():
            # A bare pickle of another protocol makes torch warn before it refuses it: the refusal says it all.
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # Refused, not "unreadable": falling back to an older state would hide a planted file.
        root = path.parent.parent
        fix = (
            f"training state written by harness versions before state format {STATE_FORMAT} holds numpy objects "
            f"like this; if the run is yours, finish it with the version that wrote it, or delete {root} to train "
            "from step 0 (ckpt-* checkpoints are kept); never resume a run folder you do not trust"
        )
        raise refusal(path, refused_objects(path, exc), fix) from None
    if not isinstance(state, dict) or any(k not in state for k in _STATE_KEYS):
        raise ValueError("not a training state (keys missing)")
    if state["format"] != STATE_FORMAT:
        raise ValueError(f"state format {state['format']!r}, this version reads {STATE_FORMAT}")
    seconds = state.get("train_seconds", 0.0)  # absent in states written before --max-minutes
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
        raise ValueError(f"train_seconds {seconds!r} is not a number of seconds")
    return state


def load_latest_state(run_dir: str | Path, *, report: Callable[[str], None] | None = None) -> dict | None:
    """The newest readable state (as saved, plus "path"), or None when the run has none.

    An unreadable newest state (truncated, damaged) falls back to the previous kept one, said
    through `report`; a `latest` that is not a state name, or names a missing one, is a UserError.
    """
    import torch

    root = Path(run_dir) / STATE_DIR
    latest = root / "latest"
    if not latest.exists():
        return None
    kept = _kept_states(root)
    try:
        name = latest.read_bytes().decode("utf-8").strip()
    except (UnicodeDecodeError, OSError):
        name = None
    have = ", ".join(f"step-{s}" for s in kept) or "none"
    fix = f"write the newest kept state's name into it (kept: {have}), or delete {root} to start over"
    if name is None or not STATE_RE.match(name):
        shown = "unreadable bytes" if name is None else repr(name[:40])
        raise UserError(f"{latest} holds {shown}, not a state name like step-200: {fix}")
    if not (root / name / "state.pt").is_file():
        raise UserError(f"{latest} names {name}, but {root / name / 'state.pt'} does not exist: {fix}")
    newest = int(name.split("-")[1])
    candidates = [newest] + [s for s in reversed(kept) if s < newest]
    first_problem = None
    for step in candidates:
        path = root / f"step-{step}" / "state.pt"
        try:
            state = _load_state_file(path)
        except torch.OutOfMemoryError:
            raise
        except _UNREADABLE as exc:
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
            first_problem = first_problem or f"{path} is unreadable ({why})"
            continue
        if step != newest and report is not None:
            report(f"warning: {first_problem}; resuming from the previous kept state {path.parent}")
        state["path"] = str(path.parent)
        return state
    raise UserError(
        f"no readable training state in {root}: {first_problem} and no older state is kept; "
        f"delete {root} to start over (finished checkpoints are kept)"
    )


# ---------------------------------------------------------------- the run's checkpoint manager


class CheckpointManager:
    """Owns a run directory's files during training: which steps get a ckpt-<step> (the save
    schedule), writing them, pruning checkpoints outside the schedule, and the resumable state
    (when to save it, saving it, resuming from it).

    `ctx` is the process context (training.distributed.DistContext or SingleProcess):
    collectives run on every rank, files are written by rank 0 only.
    """

    def __init__(self, run_dir: str | Path, job, ctx, *, signature: dict, report: Callable[[str], None] = print):
        self.run_dir = Path(run_dir)
        self.ctx = ctx
        self.is_main = ctx.rank == 0
        self.signature = signature
        self.total_steps = job.schedule.steps
        self.state_every = job.checkpoint.save_state_every
        self._save_every, self._keep_last = job.checkpoint.save_every, job.checkpoint.keep_last
        # A run with --max-minutes cannot know where it will stop: it checkpoints at every multiple of
        # save_every and keeps the newest keep_last on disk as it goes (end_at adds the step it stops at).
        self.timed = job.schedule.max_minutes is not None
        keep = None if self.timed else self._keep_last
        self.ckpt_steps = checkpoint_steps(job.schedule.steps, self._save_every, keep)
        self.weights_dtype = "bfloat16" if job.model.dtype == "bf16" else None
        self.written: list[str] = []
        self._report = report

    def recover(self) -> None:
        if self.is_main:
            for line in recover(self.run_dir):
                self._report(line)
        self.ctx.barrier()  # no rank reads the state while rank 0 may still be renaming it back

    # ---- resume

    def resume(self, model, optimizer, scheduler) -> tuple[int, dict, str | None, float]:
        """Load the newest state into model/optimizer/scheduler/RNG: (step, data position, state dir,
        seconds of training behind it)."""
        warn = (lambda line: print(line, file=sys.stderr)) if self.is_main else None
        state = load_latest_state(self.run_dir, report=warn)
        if state is None:
            return 0, {"epoch": 0, "index": 0}, None, 0.0
        if state["signature"] != self.signature:
            diff = [k for k in state["signature"] if state["signature"][k] != self.signature.get(k)]
            raise UserError(
                f"{self.run_dir} holds a run with other settings ({', '.join(diff)}): "
                "pass a new --out or the original flags"
            )
        self.ctx.load_state(model, optimizer, state)
        scheduler.load_state_dict(state["scheduler"])
        rng = state["rng"]
        set_rng_state(rng[self.ctx.rank] if isinstance(rng, list) else rng)
        return state["step"], state["data"], state["path"], float(state.get("train_seconds", 0.0))

    # ---- saving

    def end_at(self, step: int) -> None:
        """The run ends at `step` instead of at --steps (its time ran out): the save schedule becomes
        the one of a run of `step` steps, so this step gets a checkpoint and the state."""
        self.total_steps = step
        self.ckpt_steps = checkpoint_steps(step, self._save_every, self._keep_last)

    def write_checkpoint(self, step: int, model, tokenizer, meta: dict) -> None:
        """ckpt-<step> (every rank calls it: gathering the weights is a collective under FSDP). A timed
        run then keeps the newest keep_last at or below this step; a ckpt-* above it is left from an
        attempt that ran further before a kill, and is rewritten when this run gets there, or pruned by
        finish() where it stops short of it (it must not count towards keep_last meanwhile)."""
        weights = self.ctx.full_state_dict(model)
        if not self.is_main:
            return
        path = save_checkpoint(self.run_dir, step, model, tokenizer, meta, state_dict=weights, dtype=self.weights_dtype)
        self.written.append(str(path))
        if self.timed and self._keep_last:
            on_disk = [s for s, _ in list_checkpoints(self.run_dir)]
            kept = [s for s in on_disk if s <= step and s in self.ckpt_steps][-self._keep_last :]
            prune_checkpoints(self.run_dir, kept + [s for s in on_disk if s > step])
            self.written = [p for p in self.written if Path(p).is_dir()]

    def on_step(
        self,
        step: int,
        model,
        optimizer,
        scheduler,
        tokenizer,
        meta: dict,
        stream_position: dict,
        train_seconds: float = 0.0,
    ) -> None:
        """After optimizer step `step`: the checkpoint and/or state the schedule asks for.
        `train_seconds` (training time up to this step, over every resume) goes into the state, so a
        resumed --max-minutes run spends only what is left of its budget."""
        if step in self.ckpt_steps:
            self.write_checkpoint(step, model, tokenizer, meta)
        every = self.state_every
        if (every and step % every == 0) or step == self.total_steps:
            payload = {
                "signature": self.signature,
                "scheduler": scheduler.state_dict(),
                "data": stream_position,
                "train_seconds": float(train_seconds),
            }
            rngs = self.ctx.gather_objects(rng_state())
            payload.update(self.ctx.full_train_state(model, optimizer))
            if self.is_main:
                save_state(self.run_dir, step, {**payload, "rng": rngs})
            self.ctx.barrier()

    def mark_end(self, step: int, *, stopped_early: bool) -> None:
        """The run has ended at `step` (after finish()): the end-of-run marker a follower waits for
        (harness.models.run_end), naming the checkpoints kept."""
        from harness.models.run_end import write_run_end

        if self.is_main:
            kept = [s for s, _ in list_checkpoints(self.run_dir)]
            write_run_end(self.run_dir, step, stopped_early=stopped_early, checkpoints=kept)

    def finish(self) -> None:
        """Drop ckpt-* directories outside this run's schedule (left by other --steps/--keep-last)."""
        if self.is_main:
            prune_checkpoints(self.run_dir, [s for s, _ in list_checkpoints(self.run_dir) if s in self.ckpt_steps])
