"""The evaluation loop: checkpoints x tasks x lengths -> per-sample store -> results.json + table.

    from harness.evaluate import EvalConfig, run_eval
    results = run_eval(EvalConfig(ckpts="runs/anchor/ckpt-<1950..2000>", suite="ruler", lengths="4k-128k"))

(`harness eval` is the command-line front; see harness/commands/eval.py.)

Order of work, so every user mistake surfaces before any model is loaded:
  1. plan: select checkpoints (same tokenizer), open the store (an unreadable one is an error),
     resolve tasks (missing data -> "unavailable", listed, never scored 0), build every sample
     with tasks.generate (cached on disk, shared by all checkpoints), and check that every prompt
     plus its tokens to generate fits each checkpoint's context;
  2. run: per checkpoint, the samples whose store key is absent go to the runner (vLLM gets them
     all at once; transformers one batch at a time) and each finished batch is scored and
     appended to the store, so a killed run loses at most the batch in flight and a re-run of the
     same command recomputes nothing finished; `--data-parallel N` hands whole checkpoints to N
     workers (harness/parallel.py);
  3. report: aggregate the store's records of this plan (harness.aggregate), write results.json,
     print the table.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from harness.errors import TaskUnavailable, UserError
from harness.runners.base import GenerationRequest, RunnerSettings
from tasks.lengths import format_length

if TYPE_CHECKING:
    from harness.checkpoints import Checkpoint
    from tasks.base import Sample, Task

DEFAULT_SAMPLES = 500  # RULER's num_samples: the default per length-controlled task and length
DATA_ENV = {
    "essays": "HARNESS_ESSAYS",
    "squad": "HARNESS_SQUAD",
    "hotpotqa": "HARNESS_HOTPOTQA",
    "longbench": "HARNESS_LONGBENCH",
}


@dataclass
class EvalConfig:
    """Everything `harness eval` takes; field names follow the flags."""

    ckpts: str
    lengths: str = "4k-128k"
    suite: str | None = None
    tasks: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    last: int | None = None
    # None (the default): DEFAULT_SAMPLES per length-controlled task and length, every item of the
    # tasks that are not (LongBench, MMLU, HellaSwag); a number caps every task at it.
    samples: int | None = None
    seed: int = 42
    backend: str = "hf"
    dtype: str = "auto"
    batch_size: int = 8
    max_model_len: int | None = None
    max_length: int | None = None  # LongBench truncation budget (prompt + generation); default: the context
    rope_theta: float | None = None
    rope_scaling: dict | None = None
    tensor_parallel_size: int = 1
    data_parallel: int = 1
    ray_address: str | None = None
    name: str | None = None
    out: str | None = None
    threshold: float | None = None
    chat_template: bool = False
    cache_dir: str | None = None
    progress: bool = True


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
    """All pending work of one checkpoint; a data-parallel worker takes whole jobs."""

    ckpt: Checkpoint
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


@dataclass
class Plan:
    cfg: EvalConfig
    ckpts: list
    name: str
    out: Path
    suite_label: str
    suite_tasks: list[str]
    tasks: list  # available Task objects, in suite order
    unavailable: dict[str, str]
    lengths: list[int]
    tokenizer_fp: str
    jobs: list[CheckpointJob]
    planned_keys: set[tuple]
    dataset_hashes: dict[str, str]
    contexts: dict[str, int]  # checkpoint fingerprint -> context used
    all_lengths: list[int]  # lengths of every task, LongBench's truncation budget and 0 included
    truncation_budget: int | None = None  # the length LongBench-style tasks run at (prompt + generation)
    unavailable_lengths: dict[str, dict[str, str]] = field(default_factory=dict)  # task -> {length: reason}


def _task_lengths(task, lengths: list[int], truncation_budget: int) -> list[int]:
    """Lengths a task runs at. RULER-style tasks: the requested lengths. LongBench-style generation
    tasks (fixed data, middle truncation): one length, the whole budget the prompt is cut to
    (pred.py's rule: context minus the task's tokens to generate). Loglikelihood suites: 0."""
    if task.length_controlled:
        return lengths
    return [truncation_budget] if task.kind == "generate" else [0]


def _num_samples(task, length: int, samples: int | None, tokenizer) -> int:
    """How many samples of a task to run at a length. --samples caps every task; without it a
    length-controlled task gets DEFAULT_SAMPLES and a fixed dataset (LongBench, MMLU, HellaSwag) all
    its items. A task whose count depends on the tokenizer (ppl's windows) says so through
    `num_samples_with_tokenizer`, which raises TaskUnavailable when there is none at that length."""
    avail = task.num_samples_available(length)
    counter = getattr(task, "num_samples_with_tokenizer", None)
    if counter is not None:
        avail = counter(length, tokenizer)
    if samples is None:
        want = DEFAULT_SAMPLES if task.length_controlled or avail is None else avail
    else:
        want = samples
    return want if avail is None else min(want, avail)


# --------------------------------------------------------------------------------------------
# 1. plan
# --------------------------------------------------------------------------------------------
def set_data_sources(essays: str | None, squad: str | None, hotpotqa: str | None, longbench: str | None = None) -> None:
    """--essays/--squad/--hotpotqa/--longbench reach the task data loaders through these env vars."""
    for key, value in (("essays", essays), ("squad", squad), ("hotpotqa", hotpotqa), ("longbench", longbench)):
        if value:
            os.environ[DATA_ENV[key]] = str(Path(value).expanduser())


def _chat_prompt(tokenizer, sample) -> str:
    """The task input as the user turn, the answer prefix after the assistant header."""
    if not getattr(tokenizer, "chat_template", None):
        raise UserError("--chat-template given but the tokenizer has no chat template: drop the flag for base models")
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": sample.input}], tokenize=False, add_generation_prompt=True
    )
    return text + sample.answer_prefix


def _record_key(ckpt, task, length: int, index: int, seed: int) -> tuple:
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


def _resolve_tasks(cfg: EvalConfig):
    from tasks.registry import all_suites, get_task, resolve_tasks

    names = resolve_tasks(cfg.suite, cfg.tasks or None, cfg.exclude or None)
    if cfg.suite and not cfg.tasks:
        label, full = cfg.suite, all_suites()[cfg.suite]
    else:
        label, full = cfg.suite or "custom", list(names) + [t for t in cfg.exclude if t not in names]
    tasks, unavailable = [], {}
    for n in names:
        task = get_task(n)
        try:
            task.check_available()
        except TaskUnavailable as exc:
            unavailable[n] = str(exc)
            continue
        tasks.append(task)
    if not tasks:
        raise UserError("no task can run: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))
    return label, full, tasks, unavailable


def plan_eval(cfg: EvalConfig) -> Plan:
    """Everything up to the first model load; raises UserError on any bad input."""
    from harness.checkpoints import check_same_tokenizer, run_name_default, select_checkpoints
    from harness.runners.common import check_tokenizer_present, context_length, prompt_ids
    from harness.store import ResultStore
    from tasks.generate import generate_samples
    from tasks.lengths import parse_lengths
    from tasks.tokenization import load_tokenizer, tokenizer_fingerprint

    if cfg.samples is not None and cfg.samples < 1:
        raise UserError(f"--samples {cfg.samples}: pass a positive number of samples")
    if cfg.batch_size < 1:
        raise UserError(f"--batch-size {cfg.batch_size}: pass a positive batch size")
    if cfg.data_parallel < 1 or cfg.tensor_parallel_size < 1:
        raise UserError("--data-parallel and --tensor-parallel-size must be positive")
    lengths = parse_lengths(cfg.lengths)
    ckpts = select_checkpoints(cfg.ckpts, cfg.last)
    check_same_tokenizer(ckpts)
    for c in ckpts:
        check_tokenizer_present(c.path)
    label, full, tasks, unavailable = _resolve_tasks(cfg)
    name = cfg.name or run_name_default(ckpts)
    out = Path(cfg.out) if cfg.out else Path("results") / name
    store = ResultStore(out / "samples.jsonl")  # foreign / corrupt store: StoreError, before any work
    done = store.done_keys()

    tokenizer = load_tokenizer(ckpts[0].path)
    tok_fp = tokenizer_fingerprint(tokenizer)
    contexts = {c.fingerprint: context_length(c.path, cfg.max_model_len) for c in ckpts}
    min_ctx = min(contexts.values())
    tightest = next(c for c in ckpts if contexts[c.fingerprint] == min_ctx)
    fix = "drop that length from --lengths, or run past the trained length with --max-model-len and --rope-scaling/--rope-theta"
    for L in lengths:
        if L > min_ctx and any(t.length_controlled for t in tasks):
            raise UserError(
                f"length {format_length(L)} ({L} tokens) is beyond the context of {tightest.path} ({min_ctx} tokens): {fix}"
            )

    settings = RunnerSettings(
        backend=cfg.backend,
        dtype=cfg.dtype,
        batch_size=cfg.batch_size,
        max_model_len=cfg.max_model_len,
        rope_theta=cfg.rope_theta,
        rope_scaling=cfg.rope_scaling,
        tensor_parallel_size=cfg.tensor_parallel_size,
        chat_template=cfg.chat_template,
    )
    gen_items: list[tuple] = []  # (task, length, sample, prompt, num_tokens)
    runner_work: list[RunnerWork] = []
    planned: set[tuple] = set()
    hashes: dict[str, str] = {}
    from tqdm import tqdm

    if cfg.max_length is not None and cfg.max_length > min_ctx:
        raise UserError(
            f"--max-length {cfg.max_length} is beyond the context of {tightest.path} ({min_ctx} tokens): {fix}"
        )
    truncation_budget = cfg.max_length or min_ctx
    for task in tasks:
        if not task.length_controlled and task.kind == "generate" and task.max_new_tokens >= truncation_budget:
            # the prompt cap (budget - max_new_tokens) would be <= 0, which middle_truncate reads as "no truncation"
            raise UserError(
                f"--max-length {truncation_budget} leaves no prompt for {task.name}, which generates up to "
                f"{task.max_new_tokens} tokens: pass a --max-length above {task.max_new_tokens} (it is prompt + generation)"
            )
    unavailable_lengths: dict[str, dict[str, str]] = {}
    bar = tqdm(total=len(tasks) * len(lengths), desc="samples", unit="set", disable=not cfg.progress, file=sys.stderr)
    for task in tasks:
        task_lengths = _task_lengths(task, lengths, truncation_budget)
        hashes[task.name] = task.dataset_hash()
        for L in task_lengths:
            try:
                n = _num_samples(task, L, cfg.samples, tokenizer)
            except TaskUnavailable as exc:  # e.g. ppl: no document reaches this length
                unavailable_lengths.setdefault(task.name, {})[str(L)] = str(exc)
                bar.update(1)
                continue
            indices = list(range(n))
            planned.update(_record_key(c, task, L, i, cfg.seed) for c in ckpts for i in indices)
            if task.kind != "generate":
                runner_work.append(RunnerWork(task, L, indices))
                bar.update(1)
                continue
            cache: Path | Literal[False] | None = (
                False if cfg.cache_dir == "none" else (Path(cfg.cache_dir) if cfg.cache_dir else None)
            )
            for s in generate_samples(task, L, indices, tokenizer, seed=cfg.seed, cache_dir=cache):
                if cfg.chat_template:
                    prompt = _chat_prompt(tokenizer, s)
                    num = len(prompt_ids(tokenizer, prompt))
                else:
                    prompt, num = s.prompt, s.num_tokens
                if num + s.max_new_tokens > min_ctx:
                    raise UserError(
                        f"{task.name} at length {format_length(L)}: sample {s.index} needs {num} prompt tokens + "
                        f"{s.max_new_tokens} to generate > context {min_ctx} of {tightest.path}: {fix}"
                    )
                gen_items.append((task, L, s, prompt, num))
            bar.update(1)
    bar.close()
    # A task unavailable at every one of its lengths is unavailable (listed with the reason at its
    # shortest length); one unavailable at some lengths runs at the others and says why not there.
    for name, by_len in list(unavailable_lengths.items()):
        task = next(t for t in tasks if t.name == name)
        if len(by_len) == len(_task_lengths(task, lengths, truncation_budget)):
            unavailable[name] = by_len[min(by_len, key=int)]
            del unavailable_lengths[name]
            tasks = [t for t in tasks if t.name != name]
    if not tasks:
        raise UserError("no task can run: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))

    record_settings = {
        "backend": cfg.backend,
        "dtype": cfg.dtype,
        "batch_size": cfg.batch_size,
        "max_model_len": None,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": cfg.rope_scaling,
        "template": "chat" if cfg.chat_template else "none",
        "truncation": "none",
        "tokenizer": tok_fp,
    }
    plan_lengths = sorted({L for t in tasks for L in _task_lengths(t, lengths, truncation_budget)})
    jobs = []
    for c in ckpts:
        items = [
            WorkItem(t, s, p, n) for t, L, s, p, n in gen_items if _record_key(c, t, L, s.index, cfg.seed) not in done
        ]
        rw = []
        for w in runner_work:
            todo = [i for i in w.indices if _record_key(c, w.task, w.length, i, cfg.seed) not in done]
            if todo:
                rw.append(RunnerWork(w.task, w.length, todo))
        if items or rw:
            base = {
                "run": name,
                "suite": label,
                "seed": cfg.seed,
                "settings": {**record_settings, "max_model_len": contexts[c.fingerprint]},
            }
            jobs.append(CheckpointJob(c, items, rw, settings, base, str(store.path), cfg.seed, cfg.progress))
    return Plan(
        cfg,
        ckpts,
        name,
        out,
        label,
        full,
        tasks,
        unavailable,
        lengths,
        tok_fp,
        jobs,
        planned,
        hashes,
        contexts,
        plan_lengths,
        truncation_budget,
        unavailable_lengths,
    )


# --------------------------------------------------------------------------------------------
# 2. run
# --------------------------------------------------------------------------------------------
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
        it
        for it in job.items
        if _record_key(job.ckpt, it.task, it.sample.length, it.sample.index, job.seed) not in done
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
            tokenizer = runner.tokenizer  # type: ignore[attr-defined]  # until the Runner protocol declares it
            out = w.task.evaluate_with_runner(runner, w.length, w.indices, job.seed, tokenizer, progress=job.progress)
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


# --------------------------------------------------------------------------------------------
# 3. report
# --------------------------------------------------------------------------------------------
def build_results(plan: Plan) -> dict:
    from harness.aggregate import DEFAULT_THRESHOLD, aggregate
    from harness.provenance import provenance
    from harness.store import ResultStore, read_store

    cfg = plan.cfg
    _, records = read_store(plan.out / "samples.jsonl")
    records = [r for r in records if ResultStore.key(r) in plan.planned_keys]
    suites = _report_suites(plan)
    modes = {(c.training or {}).get("mode") for c in plan.ckpts}
    parents = {str(Path(c.path).parent) for c in plan.ckpts}
    run = {
        "name": plan.name,
        "model": parents.pop() if len(parents) == 1 else sorted(parents),
        "mode": modes.pop() if len(modes) == 1 else None,
        "checkpoints": [c.to_dict() for c in plan.ckpts],
    }
    ctxs = set(plan.contexts.values())
    families = {t.family for t in plan.tasks}
    prov = {
        **provenance(),
        "backend": cfg.backend,
        "dtype": cfg.dtype,
        "batch_size": cfg.batch_size,
        "max_model_len": ctxs.pop() if len(ctxs) == 1 else sorted(ctxs),
        "rope_theta": cfg.rope_theta,
        "rope_scaling": cfg.rope_scaling,
        "template": "chat" if cfg.chat_template else "none",
        "truncation": "middle" if "longbench" in families else "none",
        "tokenizer": plan.tokenizer_fp,
        "dataset_hashes": plan.dataset_hashes,
        "seed": cfg.seed,
        "lm_eval_version": _lm_eval_version() if "short" in families else None,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "data_parallel": cfg.data_parallel,
        "samples": cfg.samples,
        "checkpoint_steps": [c.step for c in plan.ckpts],
    }
    if "longbench" in families:
        # LongBench's length: the whole budget of a sample (prompt + generation); each prompt is
        # middle-truncated to max_length minus the task's max new tokens (the prompt cap, which
        # LongBench pred.py's own max_length sets directly).
        prov["max_length"] = plan.truncation_budget
    threshold = DEFAULT_THRESHOLD if cfg.threshold is None else cfg.threshold
    return aggregate(records, suites, run, prov, threshold=threshold)


def _lm_eval_version() -> str | None:
    """The installed lm-eval's version (MMLU and HellaSwag run through it); None when absent."""
    try:
        from tasks.short.lm_adapter import lm_eval_version

        return lm_eval_version()
    except ImportError:  # lm-eval not installed (PackageNotFoundError is an ImportError)
        return None


def _family(task_name: str) -> str:
    from tasks.registry import all_suites

    for fam in ("ruler", "longbench", "short", "icl", "icl-natural", "ppl"):
        if task_name in all_suites().get(fam, ()):
            return fam
    return "other"


def _length_controlled(task, name: str, get_task) -> bool:
    if task is None:
        try:
            task = get_task(name)
        except UserError:  # an --exclude name the registry does not know
            return False
    return bool(task.length_controlled)


def _report_suites(plan: Plan) -> dict:
    """The suites results.json reports. A suite spanning families (e.g. "paper": RULER at 4K-128K,
    LongBench at its truncation budget, MMLU/HellaSwag at no length) is reported as one suite per
    family, so no average mixes RULER lengths with LongBench's budget."""

    from tasks.suites import suite_categories

    excluded = set(plan.cfg.exclude)
    by_family: dict[str, list[str]] = {}
    for t in plan.suite_tasks:
        by_family.setdefault(_family(t), []).append(t)
    if len(by_family) == 1:
        groups = {plan.suite_label: plan.suite_tasks}
    else:
        groups = {fam: names for fam, names in by_family.items()}
    tasks_by_name = {t.name: t for t in plan.tasks}
    from tasks.registry import get_task

    suites = {}
    for label, names in groups.items():
        lengths = sorted(
            {
                L
                for n in names
                if n in tasks_by_name
                for L in _task_lengths(
                    tasks_by_name[n], plan.lengths, plan.cfg.max_length or min(plan.contexts.values())
                )
            }
        )
        cats = suite_categories(label) or (suite_categories("longbench") if label == "longbench" else {})
        entry: dict = {
            "tasks": list(names),
            "excluded": [t for t in names if t in excluded],
            "unavailable": {t: r for t, r in plan.unavailable.items() if t in names},
            "lengths": lengths or plan.lengths,
        }
        cats = {c: [t for t in ts if t in names] for c, ts in cats.items() if any(t in names for t in ts)}
        if cats:
            entry["categories"] = cats
        # LongBench (one length: its truncation budget) and MMLU/HellaSwag (length 0) are not
        # length-controlled: the aggregate gives them no effective length.
        entry["length_controlled"] = any(_length_controlled(tasks_by_name.get(n), n, get_task) for n in names)
        gaps = {t: dict(v) for t, v in plan.unavailable_lengths.items() if t in names}
        if gaps:
            entry["unavailable_lengths"] = gaps
        suites[label] = entry
    return suites


def execute(plan: Plan) -> None:
    if not plan.jobs:
        return
    if plan.cfg.data_parallel > 1 or plan.cfg.ray_address:
        from harness.parallel import run_jobs_parallel

        run_jobs_parallel(plan.jobs, plan.cfg.data_parallel, plan.cfg.tensor_parallel_size, plan.cfg.ray_address)
    else:
        for job in plan.jobs:
            run_job(job)


def run_eval(cfg: EvalConfig, print_table: bool = True) -> dict:
    """Plan, run, aggregate; writes <out>/results.json and returns the results dict."""
    from harness.aggregate import write_results

    plan = plan_eval(cfg)
    execute(plan)
    results = build_results(plan)
    write_results(plan.out / "results.json", results)
    if print_table:
        from harness.table import format_table

        print(format_table(results))
        print(f"results: {plan.out / 'results.json'} (samples: {plan.out / 'samples.jsonl'})")
    return results
