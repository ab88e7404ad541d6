"""What runs a unit of work: load its checkpoint's runner, then generate, score and store its samples.

    from harness.pipeline.engine import JobEngine, run_job
    added = run_job(job)          # load the checkpoint, generate + score the pending samples, append, close
    engine = JobEngine()          # a data-parallel engine: keeps its model between units of one checkpoint
    engine.run(units[0]); engine.run(units[1]); engine.loads  # -> 1

The units are harness.pipeline.jobs's (planned by harness.pipeline.planning); harness.pipeline.evaluate
calls `run_job` per checkpoint, or hands `JobEngine` to harness.pipeline.parallel's workers. Only the
samples the store still lacks are run, and each finished batch is appended at once, so a killed run
loses at most the batch in flight. Each record carries its own evaluation seconds: the runner's
compute for it plus a share of the time spent around the runner (tokenizing, scoring, storing).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.models.runners.base import GenerationRequest
from harness.pipeline.jobs import CheckpointJob, RunnerWork, WorkItem, sample_key, task_settings

if TYPE_CHECKING:
    from harness.models.runners.base import Runner
    from harness.pipeline.store import ResultStore


def run_job(job: CheckpointJob, position: int = 0) -> int:
    """Evaluate one checkpoint's pending work, appending each finished batch; returns records added."""
    from harness.models.runners.registry import get_runner
    from harness.pipeline.store import ResultStore

    store = ResultStore(job.store_path)
    items, runner_work = _pending(job, store)
    if not items and not runner_work:
        return 0
    runner = get_runner(job.settings.backend, job.ckpt.path, job.settings)
    try:
        return evaluate_job(job, runner, store, items, runner_work, position)
    finally:
        runner.close()


class JobEngine:
    """One engine of a data-parallel run: evaluates unit after unit, keeping the loaded model while
    the units are of the same checkpoint (the scheduler in harness.pipeline.parallel sends them so), and
    counting how many times it loads one."""

    def __init__(self) -> None:
        self.loads = 0
        self._runner: Runner | None = None
        self._runner_key: tuple | None = None
        self._stores: dict = {}  # store path -> ResultStore (reads only what was appended since)

    def run(self, job: CheckpointJob, report: Callable[[int], None] | None = None) -> int:
        from harness.models.runners.registry import get_runner
        from harness.pipeline.store import ResultStore

        store = self._stores.get(job.store_path) or self._stores.setdefault(job.store_path, ResultStore(job.store_path))
        items, runner_work = _pending(job, store)
        if not items and not runner_work:
            return 0
        key = (job.ckpt.path, repr(job.settings))
        if key != self._runner_key:
            self.close()  # free the previous model before loading the next
            self._runner = get_runner(job.settings.backend, job.ckpt.path, job.settings)
            self._runner_key = key
            self.loads += 1
        return evaluate_job(job, self._runner, store, items, runner_work, 0, report)

    def close(self) -> None:
        if self._runner is not None:
            runner, self._runner, self._runner_key = self._runner, None, None
            runner.close()


def _pending(job: CheckpointJob, store) -> tuple[list[WorkItem], list[RunnerWork]]:
    """The job's samples not in the store: another worker, a lost worker's earlier attempt or an
    earlier run may have finished some since planning."""
    done = store.done_keys()
    settings = job.record_base["settings"]
    items = [
        it
        for it in job.items
        if sample_key(job.ckpt, it.task, it.sample.length, it.sample.index, job.seed, settings, it.sample.dataset_hash)
        not in done
    ]
    runner_work = []
    for w in job.runner_work:
        todo = [i for i in w.indices if sample_key(job.ckpt, w.task, w.length, i, job.seed, settings) not in done]
        if todo:
            runner_work.append(RunnerWork(w.task, w.length, todo))
    return items, runner_work


def evaluate_job(
    job: CheckpointJob,
    runner,
    store: ResultStore,
    items: list[WorkItem],
    runner_work: list[RunnerWork],
    position: int = 0,
    report: Callable[[int], None] | None = None,
) -> int:
    """Generate + score `items`, let each task of `runner_work` drive the runner; append every
    finished batch to the store (and tell `report` how many samples it held). Returns records added."""
    run = _JobRun(job, runner, store, report, _progress(job, items, runner_work, position))
    # Longest prompts first within each max_new_tokens group: an out-of-memory shows at once,
    # and each batch holds similar lengths (little padding).
    items.sort(key=lambda it: (it.sample.max_new_tokens, -it.num_tokens))
    # (a thinking budget generates again for thoughts it closes: not while a stream is under way)
    if getattr(runner, "generate_each", None) is not None and items and run.budget is None:
        run.streamed(items)
        items = []
    run.batched(items)
    for w in runner_work:
        run.driven(w)
    run.bar.close()
    return run.added


def _progress(job: CheckpointJob, items: list[WorkItem], runner_work: list[RunnerWork], position: int):
    """The job's bar: one step per sample, labelled with its checkpoint."""
    from tqdm import tqdm

    return tqdm(
        total=len(items) + sum(len(w.indices) for w in runner_work),
        desc=f"ckpt {job.ckpt.step}" if job.ckpt.step is not None else Path(job.ckpt.path).name,
        unit="sample",
        position=position,
        leave=True,
        disable=None if job.progress else True,  # on a terminal only (harness/core/progress.py says why)
        file=sys.stderr,
    )


class _JobRun:
    """One job's evaluation under way: its runner, store and bar, and how many records it has added
    so far (what a run that stops early names, _stored_line)."""

    def __init__(self, job: CheckpointJob, runner, store: ResultStore, report: Callable[[int], None] | None, bar):
        self.job, self.runner, self.store, self.report, self.bar = job, runner, store, report, bar
        self.added = 0
        self.budget = _thinking_budget(job, runner)

    def streamed(self, items: list[WorkItem]) -> None:
        """A runner that orders the work itself (shared prefixes together) gets a whole (task,
        length) at once -- prompts of different tasks share nothing -- and hands back each sample
        as it finishes; every --batch-size of them is stored."""
        groups: dict[tuple, list[WorkItem]] = {}
        for it in items:
            groups.setdefault((it.task.name, it.sample.length), []).append(it)
        pending: list[tuple[WorkItem, str, float, dict | None]] = []
        # Time spent outside the runner (scoring, storing) since the last store: shared among the
        # records stored next. Inside it, each sample's own seconds are the runner's; a sample may
        # finish several stores after its prefill ran, so wall time between stores is not its own.
        outside = 0.0
        for group in groups.values():
            for i, raw, seconds in self.runner.generate_each([self.request(it) for it in group]):
                t_in = time.perf_counter()
                pending.append((group[i], raw, seconds, getattr(self.runner, "sample_stats", {}).get(i)))
                if len(pending) >= max(1, self.job.settings.batch_size):
                    records = _stream_records(self.records_of, pending)
                    _share(records, [p[2] for p in pending], outside + time.perf_counter() - t_in)
                    t_store = time.perf_counter()
                    self.stored(records)
                    pending, outside = [], time.perf_counter() - t_store  # storing: the next records' share
                else:
                    outside += time.perf_counter() - t_in
        if pending:
            records = _stream_records(self.records_of, pending)
            _share(records, [p[2] for p in pending], outside)
            self.stored(records)

    def batched(self, items: list[WorkItem]) -> None:
        """`items` a batch at a time (all at once to a runner that takes them so, vLLM)."""
        from harness.models.runners.endpoint import EndpointError

        chunk = len(items) if self.runner.submit_all else self.job.settings.batch_size
        for start in range(0, len(items), max(1, chunk)):
            part = items[start : start + chunk]
            t_batch = time.perf_counter()
            try:
                raws = self.runner.generate([self.request(it) for it in part])
            except EndpointError as exc:  # the server went away: say what is safe
                raise EndpointError(f"{exc}; {_stored_line(self.store, self.added)}") from None
            stats = dict(getattr(self.runner, "sample_stats", None) or {})  # (before a thinking budget's 2nd call)
            records = self.records_of(part, raws, stats)
            for i, rec in enumerate(records):
                if i in stats:
                    rec["compute"] = stats[i]
            _timed(records, t_batch)
            self.stored(records)

    def driven(self, w: RunnerWork) -> None:
        """A task that drives the runner itself (loglikelihood, perplexity) over one (task, length)."""
        from harness.models.runners.endpoint import EndpointError

        job, t_batch = self.job, time.perf_counter()
        try:
            out = w.task.evaluate_with_runner(
                self.runner, w.length, w.indices, job.seed, self.runner.tokenizer, progress=job.progress
            )
        except EndpointError as exc:
            raise EndpointError(f"{exc}; {_stored_line(self.store, self.added)}") from None
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
        _timed(records, t_batch)
        self.stored(records)

    def request(self, it: WorkItem) -> GenerationRequest:
        """What the runner is asked for `it`: its answer request, with room to think under a budget."""
        answer = self.answer_request(it)
        return answer if self.budget is None else self.budget.request(answer)

    def answer_request(self, it: WorkItem) -> GenerationRequest:
        from harness.pipeline.reasoning import chat_messages, sample_chat, sample_system_prompt

        settings = self.job.settings
        return GenerationRequest(
            it.prompt,
            it.sample.max_new_tokens,
            tuple(it.sample.metadata.get("stop", ())),
            chat_messages(it.sample, sample_system_prompt(it.sample, settings))
            if sample_chat(it.sample, settings)
            else None,
            # token stops and a minimum length (LongBench pred.py's samsum; tasks/longbench/tasks.py)
            stop_tokens=tuple(it.sample.metadata.get("stop_tokens", ())),
            min_new_tokens=int(it.sample.metadata.get("min_new_tokens", 0)),
        )

    def records_of(self, part: list[WorkItem], raws: list[str], stats: dict | None = None) -> list[dict]:
        """The records of generated outputs: each scored (after a two-step task's second turn).
        `stats`: the runner's token facts by position in `part` (whether an output ran to its budget)."""
        from harness.models.runners.endpoint import EndpointError
        from harness.pipeline.reasoning import strip_thinking
        from harness.pipeline.thinking import prompt_opens_thought

        job = self.job
        facts: list[dict] = [{} for _ in part]
        try:
            if self.budget is not None:
                done = self.budget.finish(
                    self.runner,
                    [self.answer_request(it) for it in part],
                    raws,
                    [prompt_opens_thought(it.prompt) for it in part],
                )
                preds, raws, facts = [d.prediction for d in done], [d.raw for d in done], [d.facts for d in done]
            else:
                preds = [strip_thinking(p) for p in raws] if job.strip_thinking else raws
            preds, raws, firsts = _follow_ups(job, self.runner, part, preds, raws, self.budget, facts)
        except EndpointError as exc:
            raise EndpointError(f"{exc}; {_stored_line(self.store, self.added)}") from None
        return [
            _record(
                job,
                it.task,
                it.sample.length,
                it.sample.index,
                pred,
                self.score(it, pred, raw, (stats or {}).get(k), facts[k]),
                it.num_tokens,
                it.sample.dataset_hash,
                {
                    **it.sample.metadata,
                    "references": list(it.sample.references),
                    # what a prediction that ran to the limit reached (harness/core/degenerate.py)
                    "max_new_tokens": it.sample.max_new_tokens,
                    # a prediction the reference's scorer skips (HELMET's ALCE: an empty ASQA answer)
                    **({"unscored": why} if (why := _unscored(it.task, pred, it.sample)) else {}),
                    **({"raw_prediction": raw} if raw != pred else {}),
                    **({"first_output": firsts[k]} if k in firsts else {}),
                    **facts[k],  # a thinking budget's account (harness/pipeline/thinking.py)
                },
            )
            for k, (it, pred, raw) in enumerate(zip(part, preds, raws))
        ]

    def score(self, it: WorkItem, pred: str, raw: str, stats: dict | None, facts: dict) -> float:
        """The task's score of `pred`; a task that grades a cut answer apart (Task.score_cut: AA-LCR
        grades it before its judge) is told whether the output ran to its budget, by the rule the
        degenerate counts use (harness.core.degenerate.at_max)."""
        grade = getattr(it.task, "score_cut", None)
        if grade is None:
            return it.task.score(pred, it.sample)
        from harness.core.degenerate import at_max

        meta = {"max_new_tokens": it.sample.max_new_tokens, "raw_prediction": raw, **facts}
        probe = {"prediction": pred, "compute": stats, "metadata": meta}
        return grade(pred, it.sample, at_max(probe, getattr(self.runner, "tokenizer", None)))

    def stored(self, records: list[dict]) -> None:
        """Append `records` (one batch) to the store; count them and move the bar."""
        self.added += self.store.append(records)
        self.bar.update(len(records))
        if self.report:
            self.report(len(records))


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
    from harness.core.identity import settings_id

    assert 0.0 <= score <= 1.0, f"{task.name} scored {score}, outside [0, 1]"
    settings = planned = task_settings(job.record_base["settings"], task)
    if isinstance(metadata.get("truncation"), dict):  # LongBench: the one recorded exception to "never truncate"
        settings = {**planned, "truncation": metadata["truncation"].get("rule", "middle")}
        # a field changed here must be prediction-neutral, or the record's key would not be the planned one
        assert settings_id(settings) == settings_id(planned), "record settings changed after planning"
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


def _timed(records: list[dict], since: float, own: list[float] | None = None) -> None:
    """Each record's evaluation seconds; they sum to the wall time since `since`. With `own` (the
    runner's per-sample compute, e.g. its prefill + decoding) each record gets its own plus an equal
    share of the rest (tokenizing, scoring); without, an equal share of the whole."""
    wall = time.perf_counter() - since
    own = own if own is not None and len(own) == len(records) else [0.0] * len(records)
    rest = max(0.0, wall - sum(own)) / max(1, len(records))
    for r, mine in zip(records, own):
        r["eval_seconds"] = round(mine + rest, 6)


def _stream_records(records_of, pending: list) -> list[dict]:
    """Records of samples a streaming runner finished, with each one's token facts (`compute`:
    prompt tokens, tokens reused from a shared prefix, new tokens); `eval_seconds` is set by _share."""
    records = records_of([p[0] for p in pending], [p[1] for p in pending], {k: p[3] for k, p in enumerate(pending)})
    for rec, (_, _, _, stats) in zip(records, pending):
        if stats:
            rec["compute"] = stats
    return records


def _share(records: list[dict], own: list[float], outside: float) -> None:
    """Each record's evaluation seconds: its own (the runner's prefill + decoding share) plus an equal
    share of `outside` (scoring, storing). Over a run they sum to the runner's compute plus the time
    spent outside it, never more than the wall time."""
    rest = max(0.0, outside) / max(1, len(records))
    for r, mine in zip(records, own):
        r["eval_seconds"] = round(mine + rest, 6)


def _unscored(task, prediction: str, sample) -> str | None:
    """Why the reference leaves this prediction out of its means (Task.unscored_reason), or None."""
    reason = getattr(task, "unscored_reason", None)
    return reason(prediction, sample) if reason is not None else None


def _follow_ups(
    job: CheckpointJob, runner, part: list[WorkItem], preds: list[str], raws: list[str], budget=None, facts=None
):
    """Second generations of two-step tasks (Task.follow_up, e.g. LongBench v2's chain of thought):
    (answers, raw answers, {position: first output}). One-step tasks keep their outputs. Under a
    thinking budget the second step thinks within it too, and its account replaces the first's in
    `facts` (the answer scored is the second's)."""
    from harness.pipeline.reasoning import chat_messages, chat_prompt, sample_chat, sample_system_prompt, strip_thinking
    from harness.pipeline.thinking import prompt_opens_thought

    second = {k: s for k, it in enumerate(part) if (s := it.task.follow_up(it.sample, preds[k])) is not None}
    if not second:
        return preds, raws, {}
    requests = []
    for s in second.values():
        chat, system = sample_chat(s, job.settings), sample_system_prompt(s, job.settings)
        requests.append(
            GenerationRequest(
                chat_prompt(runner.tokenizer, s, system) if chat else s.prompt,
                s.max_new_tokens,
                tuple(s.metadata.get("stop", ())),
                chat_messages(s, system) if chat else None,
                stop_tokens=tuple(s.metadata.get("stop_tokens", ())),
                min_new_tokens=int(s.metadata.get("min_new_tokens", 0)),
            )
        )
    firsts = {k: raws[k] for k in second}
    preds, raws = list(preds), list(raws)
    if budget is not None:
        outs = runner.generate([budget.request(r) for r in requests])
        done = budget.finish(runner, requests, outs, [prompt_opens_thought(r.prompt) for r in requests])
        for k, d in zip(second, done):
            preds[k], raws[k] = d.prediction, d.raw
            if facts is not None:
                facts[k] = d.facts
        return preds, raws, firsts
    outs = runner.generate(requests)
    for k, out in zip(second, outs):
        raws[k] = out
        preds[k] = strip_thinking(out) if job.strip_thinking else out
    return preds, raws, firsts


def _thinking_budget(job: CheckpointJob, runner):
    """The job's thinking budget (--max-thinking-tokens, in its record settings), or None."""
    from harness.pipeline.thinking import ThinkingBudget

    n = ((job.record_base.get("settings") or {}).get("options") or {}).get("max_thinking_tokens")
    return ThinkingBudget(int(n), runner.tokenizer) if n else None


def _stored_line(store, added: int) -> str:
    """What a run that stops early keeps: the count in the store, and how to go on."""
    return (
        f"{len(store.done_keys())} samples are stored in {store.path} ({added} from this run); "
        "re-run the same command once the server is back to compute only the rest"
    )
