"""Units of evaluation work and the function that runs one: what a worker (local or Ray) receives.

    from harness.jobs import run_job
    added = run_job(job)    # load the checkpoint, generate + score the pending samples, append to the store

harness.evaluate builds the jobs (plan_eval) and hands `run_job` to harness.parallel, which
therefore needs nothing from harness.evaluate. Everything here is picklable: workers in other
processes or on other Ray nodes receive these objects.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from harness.runners.base import GenerationRequest, RunnerSettings


@dataclass
class WorkItem:
    """One sample to run for one checkpoint (picklable: workers receive these)."""

    task: object  # tasks.base.Task
    sample: object  # tasks.base.Sample
    prompt: str
    num_tokens: int


@dataclass
class RunnerWork:
    """A (task, length) of a non-"generate" task: the task drives the runner itself."""

    task: object
    length: int
    indices: list[int]


@dataclass
class CheckpointJob:
    """All pending work of one checkpoint; a data-parallel worker takes whole jobs."""

    ckpt: object  # harness.checkpoints.Checkpoint
    items: list[WorkItem]
    runner_work: list[RunnerWork]
    settings: RunnerSettings
    record_base: dict  # run, suite, seed, settings: shared fields of every record
    store_path: str
    seed: int
    progress: bool = True

    @property
    def size(self) -> int:
        return len(self.items) + sum(len(w.indices) for w in self.runner_work)


def sample_key(ckpt, task, length: int, index: int, seed: int) -> tuple:
    """The store key of one sample of one checkpoint (harness.store.record_key of its record)."""
    from harness.store import ResultStore

    return ResultStore.key(
        {
            "checkpoint": {"fingerprint": ckpt.fingerprint},
            "task": task.name,
            "task_version": task.version,
            "length": length,
            "index": index,
            "seed": seed,
        }
    )


def _record(
    job: CheckpointJob,
    task,
    length: int,
    index: int,
    prediction: str,
    score: float,
    num_tokens: int | None,
    dataset_hash: str,
    metadata: dict,
) -> dict:
    assert 0.0 <= score <= 1.0, f"{task.name} scored {score}, outside [0, 1]"
    settings = job.record_base["settings"]
    if isinstance(metadata.get("truncation"), dict):  # LongBench: the one recorded exception to "never truncate"
        settings = {**settings, "truncation": metadata["truncation"].get("rule", "middle")}
    return {
        "type": "sample",
        "run": job.record_base["run"],
        "checkpoint": job.ckpt.ref(),
        "suite": job.record_base["suite"],
        "task": task.name,
        "task_version": task.version,
        "length": length,
        "index": index,
        "seed": job.seed,
        "dataset_hash": dataset_hash,
        "prediction": prediction,
        "score": float(score),
        "metric": task.metric,
        "num_tokens": num_tokens,
        "settings": settings,
        "metadata": metadata,
    }


def run_job(job: CheckpointJob, position: int = 0) -> int:
    """Evaluate one checkpoint's pending work, appending each finished batch; returns records added."""
    from tqdm import tqdm

    from harness.runners.registry import get_runner
    from harness.store import ResultStore

    store = ResultStore(job.store_path)
    done = store.done_keys()  # another worker or an earlier run may have finished some since planning
    items = [
        it for it in job.items if sample_key(job.ckpt, it.task, it.sample.length, it.sample.index, job.seed) not in done
    ]
    if not items and not job.runner_work:
        return 0
    label = f"ckpt {job.ckpt.step}" if job.ckpt.step is not None else Path(job.ckpt.path).name
    runner = get_runner(job.settings.backend, job.ckpt.path, job.settings)
    added = 0
    try:
        bar = tqdm(
            total=len(items) + sum(len(w.indices) for w in job.runner_work),
            desc=label,
            unit="sample",
            position=position,
            leave=True,
            disable=not job.progress,
            file=sys.stderr,
        )
        # Longest prompts first within each max_new_tokens group: an out-of-memory shows at once,
        # and each batch holds similar lengths (little padding).
        items.sort(key=lambda it: (it.sample.max_new_tokens, -it.num_tokens))
        chunk = len(items) if getattr(runner, "submit_all", False) else job.settings.batch_size
        for start in range(0, len(items), max(1, chunk)):
            part = items[start : start + chunk]
            preds = runner.generate(
                [
                    GenerationRequest(it.prompt, it.sample.max_new_tokens, tuple(it.sample.metadata.get("stop", ())))
                    for it in part
                ]
            )
            records = [
                _record(
                    job,
                    it.task,
                    it.sample.length,
                    it.sample.index,
                    pred,
                    it.task.score(pred, it.sample),
                    it.num_tokens,
                    it.sample.dataset_hash,
                    {**it.sample.metadata, "references": list(it.sample.references)},
                )
                for it, pred in zip(part, preds)
            ]
            added += store.append(records)
            bar.update(len(part))
        for w in job.runner_work:
            out = w.task.evaluate_with_runner(
                runner, w.length, w.indices, job.seed, runner.tokenizer, progress=job.progress
            )
            records = [
                _record(
                    job,
                    w.task,
                    w.length,
                    r["index"],
                    r["prediction"],
                    r["score"],
                    r.get("num_tokens"),
                    w.task.dataset_hash(),
                    r.get("metadata") or {},
                )
                for r in out
            ]
            added += store.append(records)
            bar.update(len(w.indices))
        bar.close()
    finally:
        runner.close()
    return added
