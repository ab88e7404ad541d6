"""`harness eval --follow RUN`: evaluate a training run's checkpoints as training writes them.

    from harness.pipeline.follow import FollowOptions, follow
    summary = follow(cfg, FollowOptions("runs/anchor"))    # cfg: an EvalConfig without checkpoints

The loop, until the run has ended (harness.models.run_end: training writes an end-of-run marker) and
every checkpoint it lists then is evaluated:
  1. list the complete ckpt-<step> folders (their completion marker, harness.models.run_end);
  2. take the oldest one not handled yet and evaluate it together with the evaluated ones still on
     disk: one plan (harness.pipeline.planning) whose work is what the store lacks, so results.json is
     the aggregate of every evaluated checkpoint still there, as a plain `harness eval` of them writes it;
  3. from the store's records, the checkpoint's point on the curve and its paired differences against
     the previous and the first checkpoint (harness.pipeline.run_verdicts), printed and written to
     <out>/follow.json, and the "no gain since step S" line;
  4. hand the update to the caller's hook (the command writes the scores into the training run's logs
     and renders the leaderboard page);
  5. with nothing new, wait --follow-poll seconds and look again.

Concurrency: each evaluation plans and runs under the store's run lock (harness.pipeline.store.run_lock),
planned again inside the lock when the store changed since the first plan, so two followers of one run,
or a follower and a plain `harness eval` on one --out, never compute one sample twice. A checkpoint that
training prunes (--keep-last) before its turn is skipped with one line; one pruned while it is evaluated
keeps its stored records (harness.pipeline.evaluate skips the rest). A follower killed at any moment
loses at most the batch in flight; the same command resumes (the store says what is done).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.core.errors import UserError
from harness.models.run_end import complete_checkpoints, read_run_end, unmarked_checkpoints
from harness.pipeline.eval_config import EvalConfig
from harness.pipeline.run_verdicts import Curve, Point, history, no_gain_line, point_lines

PREFIX = "[follow]"


@dataclass
class FollowOptions:
    """What `--follow` adds to an evaluation."""

    run_dir: str  # the training run folder (harness train --out)
    poll_seconds: float = 5.0  # how often to look for a new checkpoint
    no_gain_after: int = 3  # K of "no gain since step S": the last K checkpoints show no significant gain
    keep_going: Callable[[], bool] = lambda: True  # False: stop (the training run that started us is gone)
    # A trainer's child: an end-of-run marker older than this (time.time()) is the previous run's, which
    # the trainer that started us is about to remove
    marker_after: float | None = None


@dataclass
class FollowUpdate:
    """What the caller's hook gets after each checkpoint."""

    out: Path
    results: dict
    curve: Curve
    point: Point | None  # None: the checkpoint was pruned before any of its samples was stored


@dataclass
class _State:
    """What this follower has done: handled checkpoints (by folder identity), counts, the curve."""

    handled: set[tuple] = field(default_factory=set)
    evaluated: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    computed: int = 0
    out: Path | None = None
    curve: Curve | None = None
    said: set[str] = field(default_factory=set)


def _say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


def _identity(step: int, path: Path) -> tuple | None:
    """A checkpoint folder's identity: a rewritten ckpt-<step> (a new folder renamed in) is a new one."""
    from harness.models.checkpoints import COMPLETE_FILE

    try:
        return (step, path.stat().st_ino, (path / COMPLETE_FILE).stat().st_mtime_ns)
    except FileNotFoundError:
        return None


def follow(
    cfg: EvalConfig,
    opts: FollowOptions,
    *,
    before_first: Callable[[EvalConfig], None] | None = None,
    after_checkpoint: Callable[[FollowUpdate], None] | None = None,
) -> dict:
    """Follow the run until it has ended and everything is evaluated (see the module docstring).
    Returns {"evaluated": [steps], "skipped": [steps], "computed": samples computed here, "out": dir,
    "ended": bool (False: stopped because keep_going said so)}."""
    run = Path(opts.run_dir)
    state = _State()
    while True:
        if not opts.keep_going():
            _say(f"the training run that started this follower is gone; stopping (re-run to resume: {run})")
            return _summary(state, ended=False)
        end = _run_end(run, opts.marker_after)  # before listing: after the marker, the listing is final
        listed = complete_checkpoints(run)
        _note_unmarked(run, state)
        todo = [(s, p) for s, p in listed if (ident := _identity(s, p)) is not None and ident not in state.handled]
        if todo:
            if before_first is not None and not state.evaluated and not state.skipped:
                before_first(replace(cfg, ckpts=str(todo[0][1]), last=None))
            _handle(cfg, opts, state, todo[0], listed, after_checkpoint)
            continue
        if end is not None:
            _say_end(run, end.last_step, state)
            return _summary(state, ended=True)
        _wait_note(run, state)
        time.sleep(opts.poll_seconds)


def _run_end(run: Path, after: float | None):
    """The run's end-of-run marker, unless it is older than `after` (a previous run's)."""
    from harness.models.run_end import RUN_END_FILE

    end = read_run_end(run)
    if end is not None and after is not None:
        try:
            if os.stat(run / RUN_END_FILE).st_mtime < after:
                return None
        except FileNotFoundError:
            return None
    return end


def _summary(state: _State, ended: bool) -> dict:
    return {
        "evaluated": state.evaluated,
        "skipped": state.skipped,
        "computed": state.computed,
        "out": str(state.out) if state.out else None,
        "ended": ended,
    }


def _note_unmarked(run: Path, state: _State) -> None:
    for p in unmarked_checkpoints(run):
        if str(p) not in state.said:
            state.said.add(str(p))
            print(
                f"warning: {p} has no completion marker (harness_complete.json): --follow evaluates checkpoints "
                "written by harness train; evaluate this one with --ckpts",
                file=sys.stderr,
                flush=True,
            )


def _wait_note(run: Path, state: _State) -> None:
    """Say once that the follower is waiting, and why it has not ended."""
    if "waiting" in state.said:
        return
    state.said.add("waiting")
    where = "for the run folder to appear" if not run.is_dir() else "for the next checkpoint"
    _say(
        f"waiting {where} in {run} (training has not ended: no harness_run_end.json); "
        "Ctrl-C stops, the same command resumes"
    )


def _say_end(run: Path, last_step: int, state: _State) -> None:
    where = f"; results: {state.out / 'results.json'}" if state.out else ""
    skipped = f", skipped {len(state.skipped)} pruned before their turn" if state.skipped else ""
    _say(
        f"{run} ended at step {last_step}: evaluated {len(state.evaluated)} checkpoints "
        f"({state.computed} samples computed by this follower){skipped}{where}"
    )


def _handle(
    cfg: EvalConfig,
    opts: FollowOptions,
    state: _State,
    current: tuple[int, Path],
    listed: list[tuple[int, Path]],
    after_checkpoint: Callable[[FollowUpdate], None] | None,
) -> None:
    """Evaluate one checkpoint (with the evaluated ones still there), then report its point."""
    step, path = current
    ident = _identity(step, path)
    done = [p for s, p in listed if (i := _identity(s, p)) is not None and i in state.handled]
    if ident is None:
        _skip(state, step, path, ident)
        return
    try:
        plan, results, computed = _evaluate(cfg, done + [path], state)
    except UserError:
        if path.is_dir():
            raise
        _skip(state, step, path, ident)  # pruned while the run was planned
        return
    state.handled.add(ident)
    state.computed += computed
    curve, point = _update_curve(cfg, opts, state, plan, path)
    if point is None:  # pruned before any of its samples was stored
        _skip(state, step, path, None)
    else:
        state.evaluated.append(step)
        for line in point_lines(curve, point):
            _say(line)
        verdict = no_gain_line(curve)
        if verdict is not None:
            _say(verdict)
    _write_history(curve, opts, plan)
    if after_checkpoint is not None:
        after_checkpoint(FollowUpdate(plan.out, results, curve, point))


def _skip(state: _State, step: int, path: Path, ident: tuple | None) -> None:
    if ident is not None:
        state.handled.add(ident)
    state.skipped.append(step)
    _say(f"skipped {path.name}: training removed it (--keep-last) before its samples were evaluated")


def _store_size(out: Path | None) -> int | None:
    try:
        return os.stat(out / "samples.jsonl").st_size if out is not None else None
    except FileNotFoundError:
        return None


def _work(plan) -> int:
    """Samples a plan computes (its jobs: what the store lacks)."""
    return sum(len(j.items) + sum(len(w.indices) for w in j.runner_work) for j in plan.jobs)


def _evaluate(cfg: EvalConfig, paths: list[Path], state: _State):
    """Plan the checkpoints, then, under the store's run lock, plan again if the store changed, run
    the plan and write results.json; returns (plan, results, samples computed)."""
    from harness.core.results_file import write_results
    from harness.pipeline.evaluate import execute
    from harness.pipeline.planning import plan_eval
    from harness.pipeline.results import build_results
    from harness.pipeline.store import discard_empty_store, run_lock

    cfg_i = replace(cfg, ckpts=",".join(str(p) for p in paths), last=None)
    before = _store_size(state.out)
    plan = plan_eval(cfg_i)  # every check first, and --out created for the lock
    state.out = plan.out
    with run_lock(plan.out) as waited:
        if waited or before is None or _store_size(plan.out) != before:
            plan = plan_eval(cfg_i)  # another process stored samples since: compute only what is missing
        computed = _work(plan)
        try:
            execute(plan)  # a checkpoint pruned meanwhile is skipped there, its records kept
        except BaseException:
            if plan.fresh_store is not None:
                discard_empty_store(plan.out, plan.fresh_store, keep_dir=True)
            raise
        results = build_results(plan)
        write_results(plan.out / "results.json", results)
    return plan, results, computed


def _run_records(plan, run_dir: Path) -> tuple[dict[str, tuple[dict, list[dict]]], int | None]:
    """The store's records of the run's checkpoints (pruned ones too) on the samples and settings of
    this plan: fingerprint -> (checkpoint as results.json lists it, records); and the run's tokens per step."""
    from harness.core.identity import record_key
    from harness.pipeline.store import read_store

    wanted = {k[1:] for k in plan.planned_keys}  # the samples and settings, whatever the checkpoint
    current = {c.fingerprint: c.to_dict() for c in plan.ckpts}
    run = os.path.abspath(run_dir)
    latest: dict[str, tuple[int, dict]] = {}  # path -> (position, checkpoint) of its newest records
    grouped: dict[str, list[dict]] = {}
    _, records = read_store(plan.out / "samples.jsonl")
    for i, r in enumerate(records):
        c = r["checkpoint"]
        if c.get("step") is None or os.path.dirname(os.path.abspath(c["path"])) != run:
            continue
        if record_key(r)[1:] not in wanted:
            continue
        grouped.setdefault(c["fingerprint"], []).append(r)
        latest[c["path"]] = (i, c)
    out = {}
    for _, c in latest.values():  # a folder retrained in place: its newest fingerprint only
        fp = c["fingerprint"]
        ckpt = current.get(fp) or {"path": c["path"], "step": c["step"], "fingerprint": fp, "training": None}
        out[fp] = (ckpt, grouped[fp])
    steps = [(c.training or {}).get("tokens_per_step") for c in plan.ckpts]
    tokens = next((t for t in steps if isinstance(t, int) and not isinstance(t, bool) and t > 0), None)
    return out, tokens


def _update_curve(cfg: EvalConfig, opts: FollowOptions, state: _State, plan, path: Path) -> tuple[Curve, Point | None]:
    """Bring the curve up to date with the store; the curve and the point of `path` (None: no records)."""
    from harness.pipeline.aggregate import DEFAULT_THRESHOLD
    from harness.pipeline.results import report_suites

    if state.curve is None:
        threshold = DEFAULT_THRESHOLD if cfg.threshold is None else cfg.threshold
        state.curve = Curve(report_suites(plan), threshold, opts.no_gain_after)
    by_fp, tokens = _run_records(plan, Path(opts.run_dir))
    state.curve.update(by_fp, tokens)
    name = os.path.normpath(str(path))
    point = next((p for p in reversed(state.curve.points) if os.path.normpath(p.path) == name), None)
    return state.curve, point


def _write_history(curve: Curve, opts: FollowOptions, plan) -> None:
    from harness.core.atomic import atomic_write

    present = {c.path for c in plan.ckpts if Path(c.path).is_dir()}
    body = history(curve, opts.run_dir, present)
    atomic_write(plan.out / "follow.json", json.dumps(body, indent=1, allow_nan=False) + "\n")
