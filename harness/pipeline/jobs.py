"""Units of evaluation work: what a worker (local or Ray) receives, and the store key of each sample.

    from harness.pipeline.jobs import CheckpointJob, sample_key, split_job
    job = CheckpointJob(ckpt, items, runner_work, settings, record_base, store_path, seed)
    units = split_job(job, 4)     # the same work as up to 4 sample ranges per (task, length)
    key = sample_key(ckpt, task, length, index, seed, record_settings)

harness.pipeline.planning builds the jobs (plan_eval); harness.pipeline.engine runs them (`run_job`
serially, `JobEngine` in harness.pipeline.parallel's workers), which therefore need nothing from
the planning. Everything here is picklable: workers in other processes or on other Ray nodes
receive these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from harness.models.runners.base import RunnerSettings

if TYPE_CHECKING:
    from harness.models.checkpoints import Checkpoint
    from tasks.base import Sample, Task


@dataclass
class WorkItem:
    """One sample to run for one checkpoint (picklable: workers receive these)."""

    task: Task
    sample: Sample
    prompt: str
    num_tokens: int


@dataclass
class RunnerWork:
    """A (task, length) of a non-"generate" task: the task drives the runner itself."""

    task: Task
    length: int
    indices: list[int]


@dataclass
class CheckpointJob:
    """Pending work of one checkpoint: all of it, or (split_job) one sample range of one (task, length)."""

    ckpt: Checkpoint
    items: list[WorkItem]
    runner_work: list[RunnerWork]
    settings: RunnerSettings
    record_base: dict  # run, suite, seed, settings: shared fields of every record
    store_path: str
    seed: int
    progress: bool = True
    strip_thinking: bool = False  # score the answer after </think> (the raw output goes to metadata)

    @property
    def affinity(self) -> str:
        """The model this unit needs: units with the same affinity share a loaded engine."""
        return str(self.ckpt.path)

    @property
    def size(self) -> int:
        return len(self.items) + sum(len(w.indices) for w in self.runner_work)

    @property
    def settings_id(self) -> str:
        """The identity of this job's record settings (part of every record key it writes)."""
        from harness.core.identity import settings_id

        return settings_id(self.record_base["settings"])


def task_settings(settings: dict, task) -> dict:
    """The record settings of one task's records: the run's, plus what the task adds itself (a
    judged task's judge, harness/models/judge.py), so a different judge is a different identity."""
    judge = getattr(task, "judge_settings", None)
    own = {"judge": judge()} if judge is not None else {}
    if task.protocols:  # which inputs the task was shown (reference or exact-length) changes predictions
        own["protocol"] = task.protocol
    return {**settings, **own} if own else settings


def sample_key(
    ckpt, task, length: int, index: int, seed: int, settings: dict, dataset_hash: str | None = None
) -> tuple:
    """The store key of one sample of one checkpoint under the run's record settings `settings`
    (harness.core.identity.record_key of the record it will be, task_settings included); `dataset_hash`:
    the sample's, else the task's data as it is now."""
    from harness.core.identity import record_key

    return record_key(
        {
            "checkpoint": {"fingerprint": ckpt.fingerprint},
            "task": task.name,
            "task_version": task.version,
            "length": length,
            "index": index,
            "seed": seed,
            "settings": task_settings(settings, task),
            "dataset_hash": task.dataset_hash() if dataset_hash is None else dataset_hash,
        }
    )


def split_job(job: CheckpointJob, parts: int) -> list[CheckpointJob]:
    """Work units finer than a checkpoint: each (task, length) of the job cut into up to `parts`
    contiguous sample ranges, one unit per range (so several engines can share one checkpoint).
    Records do not depend on the cut: a unit carries its job's checkpoint, settings and record base."""
    groups: dict[tuple, list[WorkItem]] = {}
    for it in job.items:
        groups.setdefault((it.task.name, it.sample.length), []).append(it)
    units = []
    for items in groups.values():
        items = sorted(items, key=lambda it: it.sample.index)
        for chunk in _ranges(items, parts):
            units.append(replace(job, items=chunk, runner_work=[]))
    for w in job.runner_work:
        for chunk in _ranges(sorted(w.indices), parts):
            units.append(replace(job, items=[], runner_work=[RunnerWork(w.task, w.length, chunk)]))
    return units


def _ranges(seq: list, parts: int) -> list[list]:
    """`seq` cut into min(parts, len(seq)) contiguous pieces whose sizes differ by at most one."""
    k = max(1, min(parts, len(seq)))
    q, r = divmod(len(seq), k)
    out, start = [], 0
    for i in range(k):
        end = start + q + (1 if i < r else 0)
        out.append(seq[start:end])
        start = end
    return [c for c in out if c]
