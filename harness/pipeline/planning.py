"""Planning an evaluation: every check and every sample, up to the first model load.

    from harness.pipeline.planning import plan_eval
    plan = plan_eval(cfg)   # UserError on any bad input, before a model is loaded
    plan.jobs               # one CheckpointJob per checkpoint with samples the store lacks
    plan.planned_keys       # the store keys of every sample of the plan (results.json reads these)

Order, so every user mistake surfaces before any work: the flags (harness/pipeline/eval_config.py);
the model sources (same tokenizer, each checked); the tasks (missing data -> "unavailable", listed,
never scored 0); the run's name and --out; every length against the tightest context; then the
store is opened (an unreadable one is an error), every sample is built (harness/pipeline/sample_plan.py)
and each checkpoint's work is what the store lacks under its record settings
(harness/pipeline/run_settings.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import TaskUnavailable, UserError
from harness.models.runners.base import RunnerSettings
from harness.pipeline.eval_config import PROTOCOLS, EvalConfig, check_numbers, check_options
from harness.pipeline.jobs import CheckpointJob, RunnerWork, WorkItem, sample_key
from harness.pipeline.run_settings import checkpoint_settings
from harness.pipeline.sample_plan import SamplePlan, check_lengths, plan_samples
from harness.pipeline.store import discard_empty_store
from tasks.base import DEFAULT_LENGTHS

if TYPE_CHECKING:
    from harness.pipeline.reasoning import Options
    from harness.pipeline.store import ResultStore


@dataclass
class Plan:
    """A checked evaluation: what it covers, each checkpoint's settings and work, what it reports."""

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
    extra_provenance: dict = field(default_factory=dict)  # reasoning controls, endpoint, chat template
    sources: list = field(default_factory=list)  # the model sources (harness/models/sources/), one per checkpoint
    record_settings: dict[str, dict] = field(default_factory=dict)  # checkpoint fingerprint -> record settings
    # this plan created <out>/samples.jsonl (None: it was there); True: <out> as well (discard_empty_store)
    fresh_store: bool | None = None
    # task name -> the lengths it runs at (Task.task_lengths), computed once when the plan is made
    task_lengths: dict[str, list[int]] = field(default_factory=dict)
    # (task, length) -> the samples a plain run takes there (cfg.selection chooses within them)
    pools: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass
class _Scope:
    """What the run covers, checked before the store is opened: its models, tasks, lengths and outputs."""

    options: Options
    sources: list  # the model sources still there, sharing one tokenizer
    suite_label: str
    suite_tasks: list[str]
    tasks: list  # the tasks every source can run
    unavailable: dict[str, str]  # task -> why it cannot run
    lengths: list[int]  # --lengths, or the default grid
    tokenizer: Any
    tokenizer_fp: str
    judges: list[dict]  # the judge settings of judged tasks
    name: str
    out: Path
    contexts: dict[str, int]  # checkpoint fingerprint -> context used
    min_ctx: int
    tightest: Any  # the model source with the smallest context
    task_lens: dict[str, list[int]]  # task name -> the lengths it runs at
    truncation_budget: int


def plan_eval(cfg: EvalConfig) -> Plan:
    """Everything up to the first model load; raises UserError on any bad input. The model sources
    (harness/models/sources/: folders, GGUF files, served endpoints) answer everything that depends on the
    kind of model, so planning is the same for every kind."""
    from harness.pipeline.store import ResultStore

    scope = _scope(cfg)
    out = scope.out
    # Opened after the cheap checks (a rejected command leaves --out untouched), before any
    # work: a foreign or corrupt store is a StoreError here.
    fresh_out, fresh_store = not out.exists(), not (out / "samples.jsonl").exists()
    store = ResultStore(out / "samples.jsonl")
    try:
        return _plan_work(cfg, scope, store, fresh_out if fresh_store else None)
    except BaseException:
        if fresh_store:
            discard_empty_store(out, fresh_out)
        raise


def _scope(cfg: EvalConfig) -> _Scope:
    """Every check that needs neither the store nor a sample: the flags, the models, the tasks,
    the outputs, and each task's lengths against the tightest context."""
    from harness.models.runners.common import threads_from_env
    from harness.models.tokenization import tokenizer_fingerprint
    from harness.pipeline.pruned import contexts_of, first_tokenizer

    check_numbers(cfg)
    threads_from_env()  # a HARNESS_THREADS the workers could not use: an error now, before any work
    requested = _requested_lengths(cfg)
    options = check_options(cfg)
    sources = _checked_sources(cfg)
    label, full, tasks, unavailable = _resolve_tasks(cfg)
    for task in tasks:  # a released set whose rows are kept by prompt + answer keeps those the run's budget fits
        task.set_answer_budget(options.tokens_for(task.name, task.max_new_tokens))
    # Torch-free where exact (a run with nothing left to compute never imports transformers); a
    # chat template needs the transformers tokenizer
    sources, tokenizer = first_tokenizer(sources, cfg.ckpts, light=not cfg.chat_template)
    tok_fp = tokenizer_fingerprint(tokenizer)
    for src in sources:
        tasks = src.filter_tasks(tasks, unavailable, tokenizer)
    _require_tasks(tasks, unavailable)
    judges = [t.judge_settings() for t in tasks if hasattr(t, "judge_settings")]
    _check_max_new_tokens(options, tasks)
    name, out = _outputs(cfg, [src.checkpoint for src in sources])
    # (the tokenizer and tasks took a while: a checkpoint pruned meanwhile is skipped, not a bad config)
    sources, contexts = contexts_of(sources, cfg.ckpts, cfg.max_model_len)
    min_ctx = min(contexts.values())
    tightest = next(s for s in sources if contexts[s.checkpoint.fingerprint] == min_ctx)
    # Each task's lengths (RULER-style: the requested ones; a fixed dataset: its truncation budget or
    # its reference's own grid; loglikelihood suites: 0), once: planning, checks and reports read them.
    task_lens = {t.name: t.task_lengths(requested, min_ctx, cfg.max_length) for t in tasks}
    truncation_budget = check_lengths(cfg, task_lens, tasks, min_ctx, tightest.checkpoint, tightest.context_fix)
    lengths = requested if requested is not None else list(DEFAULT_LENGTHS)
    return _Scope(
        options=options,
        sources=sources,
        suite_label=label,
        suite_tasks=full,
        tasks=tasks,
        unavailable=unavailable,
        lengths=lengths,
        tokenizer=tokenizer,
        tokenizer_fp=tok_fp,
        judges=judges,
        name=name,
        out=out,
        contexts=contexts,
        min_ctx=min_ctx,
        tightest=tightest,
        task_lens=task_lens,
        truncation_budget=truncation_budget,
    )


def _plan_work(cfg: EvalConfig, scope: _Scope, store: ResultStore, fresh_store: bool | None) -> Plan:
    """Every sample, each checkpoint's settings, and the jobs of the samples the store lacks."""
    from harness.pipeline.reasoning import chat_template_hash

    done = store.done_keys()
    fix = scope.tightest.context_fix
    samples = plan_samples(
        cfg, scope.tasks, scope.task_lens, scope.tokenizer, scope.min_ctx, scope.tightest.checkpoint, scope.options, fix
    )
    tasks = _drop_unavailable(scope.tasks, scope.unavailable, samples.unavailable_lengths, scope.task_lens)
    chat_hash = chat_template_hash(scope.tokenizer) if cfg.chat_template else None
    runner_settings, record_settings = checkpoint_settings(
        cfg, scope.sources, scope.options, scope.tokenizer, scope.tokenizer_fp, chat_hash, scope.contexts
    )
    ckpts = [src.checkpoint for src in scope.sources]
    record_base = {"run": scope.name, "suite": scope.suite_label, "seed": cfg.seed}
    jobs = _build_jobs(cfg, ckpts, samples, done, runner_settings, record_settings, record_base, str(store.path))
    return Plan(
        cfg,
        ckpts,
        scope.name,
        scope.out,
        scope.suite_label,
        scope.suite_tasks,
        tasks,
        scope.unavailable,
        scope.lengths,
        scope.tokenizer_fp,
        jobs,
        _planned_keys(cfg, ckpts, samples, record_settings),
        samples.dataset_hashes,
        scope.contexts,
        sorted({L for t in tasks for L in scope.task_lens[t.name]}),
        scope.truncation_budget,
        samples.unavailable_lengths,
        _extra_provenance(cfg, scope, tasks, chat_hash),
        scope.sources,
        record_settings,
        fresh_store=fresh_store,
        task_lengths=scope.task_lens,
        pools=samples.pools,
    )


def check_flags(cfg: EvalConfig) -> None:
    """The checks planning runs first, those that read no model, store or sample: `harness demo`
    runs them on every eval it will run, before it trains anything."""
    check_numbers(cfg)
    check_options(cfg)
    _requested_lengths(cfg)
    _resolve_tasks(cfg)


def _requested_lengths(cfg: EvalConfig) -> list[int] | None:
    """--lengths parsed; None when not given (each task's default)."""
    from harness.core.lengths import parse_lengths

    if cfg.lengths is not None and not cfg.lengths.strip():
        raise UserError("--lengths is empty: pass lengths such as 4k-128k or 1k,4k")
    return parse_lengths(cfg.lengths) if cfg.lengths is not None else None


def _checked_sources(cfg: EvalConfig) -> list:
    """The model sources of --ckpts, sharing one tokenizer, each checked (damaged or inconsistent
    models: an error now, before any work)."""
    from harness.models.sources import resolve_sources
    from harness.models.sources.base import still_there, vanished
    from harness.pipeline.pruned import same_tokenizer

    sources = resolve_sources(cfg)  # each kind checks its own flags; a served model is asked for here
    # A checkpoint a training run prunes meanwhile (--keep-last) is skipped with one line wherever
    # it disappears; the others are evaluated.
    sources = same_tokenizer(sources, cfg.ckpts)  # a folder deleted meanwhile: skipped, not "another tokenizer"
    for src in list(sources):
        try:
            src.check(cfg.backend)
        except UserError:
            if not vanished(src):
                raise
            sources.remove(src)
    return still_there(sources, cfg.ckpts)


def _resolve_tasks(cfg: EvalConfig):
    from tasks.registry import all_suites, get_task, resolve_tasks

    names = resolve_tasks(cfg.suite, cfg.tasks or None, cfg.exclude or None)
    if cfg.protocol not in PROTOCOLS:
        raise UserError(f"unknown protocol {cfg.protocol!r}: choose from {', '.join(PROTOCOLS)}")
    if cfg.suite and not cfg.tasks:
        label, full = cfg.suite, all_suites()[cfg.suite]
    else:
        # --tasks picks the tasks; the records carry --suite's name only when every task is in it
        # (a record of suite X whose task X lacks contradicts itself: harness/pipeline/record_checks.py)
        suite = cfg.suite if cfg.suite in all_suites() else None
        label = suite if suite is not None and set(names) <= set(all_suites()[suite]) else "custom"
        full = list(names) + [t for t in cfg.exclude if t not in names]
    tasks, unavailable = [], {}
    for n in names:
        task = get_task(n)
        task.set_protocol(cfg.protocol)  # before any other call: it shapes the task's data and lengths
        try:
            task.check_available()
        except TaskUnavailable as exc:
            unavailable[n] = str(exc)
            continue
        tasks.append(task)
    _require_tasks(tasks, unavailable)
    return label, full, tasks, unavailable


def _require_tasks(tasks: list, unavailable: dict[str, str]) -> None:
    if not tasks:
        raise UserError("no task can run: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))


def _check_max_new_tokens(options: Options, tasks: list) -> None:
    """--max-new-tokens names only generation tasks of this run."""
    generated = [x.name for x in tasks if x.kind == "generate"]
    for t in options.max_new_tokens:
        if t != "*" and t not in generated:
            raise UserError(
                f"--max-new-tokens names {t!r}, which is not a generation task of this run: "
                f"choose from {', '.join(generated) or 'none'}"
            )


def _outputs(cfg: EvalConfig, ckpts: list) -> tuple[str, Path]:
    """The run's name and its folder. Outputs stay where the user put them (harness.core.paths): a
    plain run name, results/<name> by default, and results.json a file we may replace, checked
    before anything is computed."""
    from harness.core.paths import check_out, check_output_file, check_run_name, results_dir
    from harness.models.checkpoints import run_name_default

    name = check_run_name(cfg.name) if cfg.name is not None else run_name_default(ckpts)
    out = check_out(cfg.out) if cfg.out is not None else results_dir(name)
    check_output_file(out / "results.json")
    return name, out


def _drop_unavailable(
    tasks: list, unavailable: dict[str, str], unavailable_lengths: dict[str, dict[str, str]], task_lens: dict
) -> list:
    """A task unavailable at every one of its lengths is unavailable (listed with the reason at its
    shortest length); one unavailable at some lengths runs at the others and says why not there."""
    for name_, by_len in list(unavailable_lengths.items()):
        if len(by_len) == len(task_lens[name_]):
            unavailable[name_] = by_len[min(by_len, key=int)]
            del unavailable_lengths[name_]
            tasks = [t for t in tasks if t.name != name_]
    _require_tasks(tasks, unavailable)
    return tasks


def _build_jobs(
    cfg: EvalConfig,
    ckpts: list,
    samples: SamplePlan,
    done: set[tuple],
    settings: dict[str, RunnerSettings],
    record_settings: dict[str, dict],
    record_base: dict,
    store_path: str,
) -> list[CheckpointJob]:
    """One job per checkpoint with work left: the samples whose store key (under that checkpoint's
    record settings) is not in `done`."""
    jobs = []
    for c in ckpts:
        rs = record_settings[c.fingerprint]
        items = [
            WorkItem(t, s, p, n)
            for t, L, s, p, n in samples.gen_items
            if sample_key(c, t, L, s.index, cfg.seed, rs, s.dataset_hash) not in done
        ]
        rw = []
        for w in samples.runner_work:
            todo = [i for i in w.indices if sample_key(c, w.task, w.length, i, cfg.seed, rs) not in done]
            if todo:
                rw.append(RunnerWork(w.task, w.length, todo))
        if items or rw:
            base = {**record_base, "settings": rs}
            jobs.append(
                CheckpointJob(
                    c, items, rw, settings[c.fingerprint], base, store_path, cfg.seed, cfg.progress, cfg.strip_thinking
                )
            )
    return jobs


def _planned_keys(cfg: EvalConfig, ckpts: list, samples: SamplePlan, record_settings: dict[str, dict]) -> set[tuple]:
    """The store key of every sample of the plan, for every checkpoint (done or not). A built
    sample carries its own dataset hash (HELMET's: the config file of its length), which its record
    is stored under; a runner-driven one has the task's."""
    own = {(t.name, L, s.index): s.dataset_hash for t, L, s, _p, _n in samples.gen_items}
    return {
        sample_key(
            c,
            t,
            L,
            i,
            cfg.seed,
            record_settings[c.fingerprint],
            own.get((t.name, L, i), samples.dataset_hashes[t.name]),
        )
        for t, L, indices in samples.groups
        for c in ckpts
        for i in indices
    }


def _extra_provenance(cfg: EvalConfig, scope: _Scope, tasks: list, chat_hash: str | None) -> dict:
    """Provenance only the plan knows: the reasoning controls, the chat template, the protocol,
    each model source's own (a served model's endpoint), the judge."""
    extra: dict = {**scope.options.provenance(), "chat_template": chat_hash}
    if any(t.protocols for t in tasks):  # which inputs the published suites were shown
        extra["protocol"] = cfg.protocol
    for src in scope.sources:
        extra.update(src.provenance())
    if scope.judges:  # one judge per run (the flags): each judged record also names it in settings["judge"]
        extra["judge"] = scope.judges[0]
    return extra
