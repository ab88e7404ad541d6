"""The evaluation loop: checkpoints x tasks x lengths -> per-sample store -> results.json + table.

    from harness.pipeline.evaluate import EvalConfig, run_eval
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
     same command recomputes nothing finished; `--data-parallel N` hands work units (whole
     checkpoints, or sample ranges with --shard-samples) to N engines, local or on a Ray cluster
     (harness/pipeline/parallel.py);
  3. report: aggregate the store's records of this plan (harness.pipeline.aggregate), write results.json,
     print the table.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from harness.core.errors import TaskUnavailable, UserError
from harness.core.lengths import format_length
from harness.models.runners.base import RunnerSettings
from harness.models.runners.common import model_stop_ids
from harness.models.runners.registry import backend_record_settings
from harness.pipeline.jobs import CheckpointJob, JobEngine, RunnerWork, WorkItem, run_job, split_job
from harness.pipeline.jobs import sample_key as _record_key
from harness.pipeline.store import discard_empty_store
from tasks.base import DEFAULT_LENGTHS

DEFAULT_SAMPLES = 500  # RULER's num_samples: the default per length-controlled task and length
# Task families whose prompts are middle-truncated to the budget (provenance "truncation", "max_length")
MIDDLE_TRUNCATION_FAMILIES = {"longbench", "longbench-v2", "longbench-v2-cot"}


@dataclass
class EvalConfig:
    """Everything `harness eval` takes; field names follow the flags."""

    ckpts: str
    lengths: str | None = None  # None: each task's default (4k-128k for RULER-style tasks)
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
    shard_samples: bool = False  # split each (checkpoint, task, length) into sample ranges across engines
    device_map: str | None = None  # hf backend: "auto" spreads one model over the worker's visible GPUs
    name: str | None = None
    out: str | None = None
    threshold: float | None = None
    chat_template: bool = False
    cache_dir: str | None = None
    progress: bool = True
    # A served model (--backend openai): the name it is served under and where; prompts are
    # counted with --tokenizer (default: the model name).
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    request_timeout: float = 600.0
    retries: int = 5
    tokenizer: str | None = None
    # Instruct / reasoning controls, every backend (harness/pipeline/reasoning.py).
    no_answer_prefix: bool = False
    max_new_tokens: str | None = None  # "N" or "TASK=N,..."
    system_prompt: str | None = None
    strip_thinking: bool = False
    prefix_reuse: bool = True  # compute shared prompt prefixes once (never changes an output)
    # Input protocol of the families with a published reference (tasks/base.py Task.protocols):
    # "reference" shows the model the reference's own inputs, "exact-length" fills L in its tokens.
    protocol: str = "reference"
    no_doctor: bool = False  # `harness eval --no-doctor`: the set-up checks were skipped (provenance says)


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
    extra_provenance: dict = field(default_factory=dict)  # reasoning controls, endpoint, chat template
    sources: list = field(default_factory=list)  # the model sources (harness/models/sources/), one per checkpoint
    record_settings: dict[str, dict] = field(default_factory=dict)  # checkpoint fingerprint -> record settings
    # this plan created <out>/samples.jsonl (None: it was there); True: <out> as well (discard_empty_store)
    fresh_store: bool | None = None
    # task name -> the lengths it runs at (Task.task_lengths), computed once when the plan is made
    task_lengths: dict[str, list[int]] = field(default_factory=dict)


PROTOCOLS = ("reference", "exact-length")


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
        own = task.default_samples(length)  # a reference's own count (HELMET 100, BABILong's files)
        want = own if own is not None else DEFAULT_SAMPLES if task.length_controlled or avail is None else avail
    else:
        want = samples
    return want if avail is None else min(want, avail)


# --------------------------------------------------------------------------------------------
# 1. plan
# --------------------------------------------------------------------------------------------
def _chat_prompt(tokenizer, sample, system_prompt: str | None = None) -> str:
    """The task input as the user turn, the answer prefix after the assistant header."""
    from harness.pipeline.reasoning import chat_prompt

    return chat_prompt(tokenizer, sample, system_prompt)


def _resolve_tasks(cfg: EvalConfig):
    from tasks.registry import all_suites, get_task, resolve_tasks

    names = resolve_tasks(cfg.suite, cfg.tasks or None, cfg.exclude or None)
    if cfg.protocol not in PROTOCOLS:
        raise UserError(f"unknown protocol {cfg.protocol!r}: choose from {', '.join(PROTOCOLS)}")
    if cfg.suite and not cfg.tasks:
        label, full = cfg.suite, all_suites()[cfg.suite]
    else:
        label, full = cfg.suite or "custom", list(names) + [t for t in cfg.exclude if t not in names]
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
    if not tasks:
        raise UserError("no task can run: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))
    return label, full, tasks, unavailable


_FIX = "drop that length from --lengths, or run past the trained length with --max-model-len and --rope-scaling/--rope-theta"


@dataclass
class SamplePlan:
    """Every sample of the plan, checkpoint-independent (sample planning's result)."""

    gen_items: list[tuple]  # (task, length, sample, prompt, num_tokens) of "generate" tasks
    runner_work: list[RunnerWork]  # (task, length, indices) of tasks that drive the runner
    groups: list[tuple]  # (task, length, indices): every planned (task, length)
    dataset_hashes: dict[str, str]
    unavailable_lengths: dict[str, dict[str, str]]  # task -> {length: reason}


def _check_numbers(cfg: EvalConfig) -> None:
    if cfg.samples is not None and cfg.samples < 1:
        raise UserError(f"--samples {cfg.samples}: pass a positive number of samples")
    if cfg.batch_size < 1:
        raise UserError(f"--batch-size {cfg.batch_size}: pass a positive batch size")
    if cfg.data_parallel < 1 or cfg.tensor_parallel_size < 1:
        raise UserError("--data-parallel and --tensor-parallel-size must be positive")
    if cfg.device_map is not None and cfg.backend != "hf":
        raise UserError("--device-map is for --backend hf: vLLM spreads a model with --tensor-parallel-size")


def _check_lengths(
    cfg: EvalConfig, task_lens: dict[str, list[int]], tasks: list, min_ctx: int, tightest, fix: str = _FIX
) -> int:
    """Every length a length-controlled task runs at fits the tightest context; returns the
    truncation budget of fixed datasets cut to the context (LongBench's exact-length rule)."""
    for task in tasks:
        if not task.length_controlled:
            continue
        for L in task_lens[task.name]:
            if L > min_ctx:
                raise UserError(
                    f"length {format_length(L)} ({L} tokens) is beyond the context of {tightest.path} ({min_ctx} tokens): {fix}"
                )
    if cfg.max_length is not None and cfg.max_length > min_ctx:
        raise UserError(
            f"--max-length {cfg.max_length} is beyond the context of {tightest.path} ({min_ctx} tokens): {fix}"
        )
    truncation_budget = cfg.max_length or min_ctx
    for task in tasks:
        if (
            not task.length_controlled
            and task.kind == "generate"
            and not task.no_context
            # under LongBench's reference protocol --max-length is pred.py's prompt budget alone
            # (Task.task_lengths checks it there)
            and not (task.family == "longbench" and task.protocol == "reference")
            and task.max_new_tokens >= truncation_budget
        ):
            # the prompt cap (budget - max_new_tokens) would be <= 0, which middle_truncate reads as "no truncation"
            raise UserError(
                f"--max-length {truncation_budget} leaves no prompt for {task.name}, which generates up to "
                f"{task.max_new_tokens} tokens: pass a --max-length above {task.max_new_tokens} (it is prompt + generation)"
            )
    return truncation_budget


def _plan_samples(
    cfg: EvalConfig,
    tasks: list,
    task_lens: dict[str, list[int]],
    tokenizer,
    min_ctx: int,
    tightest,
    options,
    fix: str = _FIX,
) -> SamplePlan:
    """Build (or read from the cache) every sample and check that each fits the tightest context."""
    import dataclasses

    from harness.core.progress import progress_bar
    from harness.models.runners.common import prompt_ids
    from harness.pipeline.reasoning import apply_options
    from tasks.generate import generate_samples

    plan = SamplePlan([], [], [], {}, {})
    cache: Path | Literal[False] | None = (
        False if cfg.cache_dir == "none" else (Path(cfg.cache_dir) if cfg.cache_dir else None)
    )
    bar = progress_bar(total=sum(map(len, task_lens.values())), desc="samples", unit="set", enabled=cfg.progress)
    for task in tasks:
        plan.dataset_hashes[task.name] = task.dataset_hash()
        # Under --chat each task says whether its reference wraps its prompts (Task.uses_chat_template),
        # and a reference protocol may bring its own system turn. A chat template's own tokens count
        # inside a length-controlled sample's budget: measured once with the local tokenizer, the
        # sample is fitted to the rest (metadata records both).
        chat = cfg.chat_template and task.uses_chat_template()
        system = _system_prompt(cfg, task) if chat else None
        chat_tokens = _chat_template_tokens(tokenizer, system) if chat else 0
        for L in task_lens[task.name]:
            try:
                n = _num_samples(task, L, cfg.samples, tokenizer)
            except TaskUnavailable as exc:  # e.g. ppl: no document reaches this length
                plan.unavailable_lengths.setdefault(task.name, {})[str(L)] = str(exc)
                bar.update(1)
                continue
            indices = list(range(n))
            plan.groups.append((task, L, indices))
            if task.kind != "generate":
                plan.runner_work.append(RunnerWork(task, L, indices))
                bar.update(1)
                continue
            fits_chat = (task.length_controlled and task.length_is_budget()) or (task.fit_chat_template and L > 0)
            fit = L - chat_tokens if fits_chat and chat_tokens else L
            if fit < 1 and L > 0:  # (L 0: a prompt without context, not fitted)
                raise UserError(
                    f"length {format_length(L)} leaves no room after the chat template's {chat_tokens} tokens: {fix}"
                )
            for s in generate_samples(task, fit, indices, tokenizer, seed=cfg.seed, cache_dir=cache):
                if fit != L:  # keyed and reported at L; fitted to L minus the template's tokens
                    s = dataclasses.replace(
                        s, length=L, metadata={**s.metadata, "fitted_length": fit, "chat_template_tokens": chat_tokens}
                    )
                s = apply_options(s, options, lambda text: len(prompt_ids(tokenizer, text)))
                if chat and not task.chat_answer_prefix() and s.answer_prefix:  # the reference's chat turn
                    s = s.without_answer_prefix(len(prompt_ids(tokenizer, s.input)))
                if cfg.chat_template:  # the runner reads the per-sample decision (harness.pipeline.reasoning)
                    s = dataclasses.replace(s, metadata={**s.metadata, "chat": chat, "system_prompt": system})
                if chat:
                    prompt = _chat_prompt(tokenizer, s, system)
                    num = len(prompt_ids(tokenizer, prompt))
                else:
                    prompt, num = s.prompt, s.num_tokens
                if num + s.max_new_tokens > min_ctx:
                    raise UserError(
                        f"{task.name} at length {format_length(L)}: sample {s.index} needs {num} prompt tokens + "
                        f"{s.max_new_tokens} to generate > context {min_ctx} of {tightest.path}: {fix}"
                    )
                plan.gen_items.append((task, L, s, prompt, num))
            bar.update(1)
    bar.close()
    return plan


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
            if _record_key(c, t, L, s.index, cfg.seed, rs, s.dataset_hash) not in done
        ]
        rw = []
        for w in samples.runner_work:
            todo = [i for i in w.indices if _record_key(c, w.task, w.length, i, cfg.seed, rs) not in done]
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


def plan_eval(cfg: EvalConfig) -> Plan:
    """Everything up to the first model load; raises UserError on any bad input. The model sources
    (harness/models/sources/: folders, GGUF files, served endpoints) answer everything that depends on the
    kind of model, so planning is the same for every kind."""
    from harness.core.lengths import parse_lengths
    from harness.core.paths import check_out, check_output_file, check_run_name, results_dir
    from harness.models.checkpoints import run_name_default
    from harness.models.runners.common import threads_from_env
    from harness.models.sources import check_same_tokenizer, resolve_sources
    from harness.models.sources.base import still_there, vanished
    from harness.models.tokenization import tokenizer_fingerprint
    from harness.pipeline.reasoning import chat_template_hash
    from harness.pipeline.store import ResultStore

    _check_numbers(cfg)
    threads_from_env()  # a HARNESS_THREADS the workers could not use: an error now, before any work
    if cfg.lengths is not None and not cfg.lengths.strip():
        raise UserError("--lengths is empty: pass lengths such as 4k-128k or 1k,4k")
    requested = parse_lengths(cfg.lengths) if cfg.lengths is not None else None
    lengths = requested if requested is not None else list(DEFAULT_LENGTHS)
    options = _check_options(cfg)
    sources = resolve_sources(cfg)  # each kind checks its own flags; a served model is asked for here
    # A checkpoint a training run prunes meanwhile (--keep-last) is skipped with one line wherever
    # it disappears; the others are evaluated.
    sources = still_there(sources, cfg.ckpts)
    check_same_tokenizer(sources)
    for src in list(sources):
        try:
            src.check(cfg.backend)  # damaged or inconsistent models: an error now, before any work
        except UserError:
            if not vanished(src):
                raise
            sources.remove(src)
    sources = still_there(sources, cfg.ckpts)
    ckpts = [src.checkpoint for src in sources]
    label, full, tasks, unavailable = _resolve_tasks(cfg)
    # Torch-free where exact (a run with nothing left to compute never imports transformers); a
    # chat template needs the transformers tokenizer
    tokenizer = sources[0].load_tokenizer(light=not cfg.chat_template)
    tok_fp = tokenizer_fingerprint(tokenizer)
    for src in sources:
        tasks = src.filter_tasks(tasks, unavailable, tokenizer)
    if not tasks:
        raise UserError("no task can run: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))
    judges = [t.judge_settings() for t in tasks if hasattr(t, "judge_settings")]
    generated = [x.name for x in tasks if x.kind == "generate"]
    for t in options.max_new_tokens:
        if t != "*" and t not in generated:
            raise UserError(
                f"--max-new-tokens names {t!r}, which is not a generation task of this run: "
                f"choose from {', '.join(generated) or 'none'}"
            )
    # Outputs stay where the user put them (harness.core.paths): a plain run name, results/<name> by
    # default, and results.json a file we may replace, checked before anything is computed.
    name = check_run_name(cfg.name) if cfg.name is not None else run_name_default(ckpts)
    out = check_out(cfg.out) if cfg.out is not None else results_dir(name)
    check_output_file(out / "results.json")

    sources = still_there(sources, cfg.ckpts)  # (the tokenizer and tasks took a while)
    ckpts = [src.checkpoint for src in sources]
    contexts = {src.checkpoint.fingerprint: src.context_length(cfg.max_model_len) for src in sources}
    min_ctx = min(contexts.values())
    tightest = next(s for s in sources if contexts[s.checkpoint.fingerprint] == min_ctx)
    fix = tightest.context_fix
    # Each task's lengths (RULER-style: the requested ones; a fixed dataset: its truncation budget or
    # its reference's own grid; loglikelihood suites: 0), once: planning, checks and reports read them.
    task_lens = {t.name: t.task_lengths(requested, min_ctx, cfg.max_length) for t in tasks}
    truncation_budget = _check_lengths(cfg, task_lens, tasks, min_ctx, tightest.checkpoint, fix)
    # Opened after the cheap checks above (a rejected command leaves --out untouched), before any
    # work: a foreign or corrupt store is a StoreError here.
    fresh_out, fresh_store = not out.exists(), not (out / "samples.jsonl").exists()
    store = ResultStore(out / "samples.jsonl")
    try:
        done = store.done_keys()
        samples = _plan_samples(cfg, tasks, task_lens, tokenizer, min_ctx, tightest.checkpoint, options, fix)
        # A task unavailable at every one of its lengths is unavailable (listed with the reason at its
        # shortest length); one unavailable at some lengths runs at the others and says why not there.
        unavailable_lengths = samples.unavailable_lengths
        for name_, by_len in list(unavailable_lengths.items()):
            if len(by_len) == len(task_lens[name_]):
                unavailable[name_] = by_len[min(by_len, key=int)]
                del unavailable_lengths[name_]
                tasks = [t for t in tasks if t.name != name_]
        if not tasks:
            raise UserError("no task can run: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))

        chat_hash = chat_template_hash(tokenizer) if cfg.chat_template else None
        runner_settings: dict[str, RunnerSettings] = {}
        record_settings: dict[str, dict] = {}
        for src in sources:
            fp = src.checkpoint.fingerprint
            fields: dict = {
                "backend": cfg.backend,
                "dtype": cfg.dtype,
                "batch_size": cfg.batch_size,
                "max_model_len": cfg.max_model_len,
                "rope_theta": cfg.rope_theta,
                "rope_scaling": cfg.rope_scaling,
                "tensor_parallel_size": cfg.tensor_parallel_size,
                "chat_template": cfg.chat_template,
                "extra": {"device_map": cfg.device_map} if cfg.device_map else {},
                "system_prompt": cfg.system_prompt,
                "prefix_reuse": cfg.prefix_reuse,
            }
            fields.update(src.runner_settings(cfg, contexts[fp]))
            runner_settings[fp] = RunnerSettings(**fields)
            own = src.record_settings(cfg)
            # (a folder deleted meanwhile would read as a hub name; its job is skipped when it runs)
            local = cfg.backend == "hf" and not vanished(src)
            eos_ids = model_stop_ids(src.checkpoint.path, tokenizer.eos_token_id) if local else None
            if eos_ids is not None:  # the ids its generation stops at, where they are more than one
                own = {"eos_ids": eos_ids, **own}
            record_settings[fp] = _record_settings(cfg, options, tok_fp, chat_hash, contexts[fp], own)
        record_base = {"run": name, "suite": label, "seed": cfg.seed}
        jobs = _build_jobs(cfg, ckpts, samples, done, runner_settings, record_settings, record_base, str(store.path))
        planned = {
            _record_key(c, t, L, i, cfg.seed, record_settings[c.fingerprint], samples.dataset_hashes[t.name])
            for t, L, indices in samples.groups
            for c in ckpts
            for i in indices
        }
        plan_lengths = sorted({L for t in tasks for L in task_lens[t.name]})
        extra: dict = {**options.provenance(), "chat_template": chat_hash}
        if any(t.protocols for t in tasks):  # which inputs the published suites were shown
            extra["protocol"] = cfg.protocol
        for src in sources:
            extra.update(src.provenance())
        if judges:  # one judge per run (the flags): each judged record also names it in settings["judge"]
            extra["judge"] = judges[0]
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
            samples.dataset_hashes,
            contexts,
            plan_lengths,
            truncation_budget,
            unavailable_lengths,
            extra,
            sources,
            record_settings,
            fresh_store=fresh_out if fresh_store else None,
            task_lengths=task_lens,
        )
    except BaseException:
        if fresh_store:
            discard_empty_store(out, fresh_out)
        raise


def _record_settings(cfg: EvalConfig, options, tok_fp: str, chat_hash: str | None, context: int, own: dict) -> dict:
    """The settings every record of one checkpoint carries. Every field is part of the record's
    identity (harness/core/identity.py) unless listed there as neutral; a None field is left out of it,
    so a field added here with a None default keeps the identity of records written before it."""
    settings = {
        "backend": cfg.backend,
        "dtype": cfg.dtype,
        "batch_size": cfg.batch_size,
        "max_model_len": context,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": cfg.rope_scaling,
        "template": "chat" if cfg.chat_template else "none",
        "truncation": "none",
        "tokenizer": tok_fp,
        "chat_template": chat_hash,
        # vLLM's tensor parallelism reduces in another order; 1 (the default) is left out
        "tensor_parallel_size": cfg.tensor_parallel_size if cfg.tensor_parallel_size != 1 else None,
    }
    if options.non_default():  # only then: records of default runs stay as they were
        settings["options"] = options.non_default()
    # constants of the backend that shape its arithmetic (the hf runner's decode width)
    settings.update(backend_record_settings(cfg.backend))
    settings.update(own)  # the model source's own fields (a served model: its endpoint)
    return settings


def _check_options(cfg: EvalConfig):
    """The reasoning Options; UserError on bad combinations (the model source checks its own flags)."""
    from harness.models.runners.registry import backend_names
    from harness.pipeline.reasoning import Options, parse_max_new_tokens

    if cfg.backend not in backend_names():
        raise UserError(f"unknown backend {cfg.backend!r}: choose {', '.join(backend_names())}")
    if cfg.concurrency < 1 or cfg.retries < 0 or not cfg.request_timeout > 0:
        raise UserError("--concurrency and --request-timeout must be positive, --retries at least 0")
    if cfg.system_prompt is not None and not cfg.chat_template:
        raise UserError("--system-prompt needs --chat (a system turn exists only in a chat template)")
    return Options(
        answer_prefix=not cfg.no_answer_prefix,
        max_new_tokens=parse_max_new_tokens(cfg.max_new_tokens),
        system_prompt=cfg.system_prompt,
        strip_thinking=cfg.strip_thinking,
    )


def _system_prompt(cfg: EvalConfig, task) -> str | None:
    """The system turn of a chat-wrapped task: --system-prompt, else the reference's own under the
    reference protocol (NoLiMa's "You are a helpful assistant"), else none."""
    if cfg.system_prompt is not None:
        return cfg.system_prompt
    return task.reference_system_prompt if task.protocol == "reference" else None


def _chat_template_tokens(tokenizer, system_prompt: str | None) -> int:
    """Tokens a chat template adds around a user turn (and the system turn), counted once."""
    from types import SimpleNamespace

    from harness.models.runners.common import prompt_ids

    probe = SimpleNamespace(input="Question: which word comes next?", answer_prefix="")
    wrapped = _chat_prompt(tokenizer, probe, system_prompt)
    return max(0, len(prompt_ids(tokenizer, wrapped)) - len(prompt_ids(tokenizer, probe.input)))


# --------------------------------------------------------------------------------------------
# 3. report
# --------------------------------------------------------------------------------------------
def build_results(plan: Plan) -> dict:
    from harness.core.identity import check_claims
    from harness.core.provenance import provenance
    from harness.models.sources import run_model
    from harness.models.sources.base import vanished
    from harness.pipeline.aggregate import DEFAULT_THRESHOLD, aggregate
    from harness.pipeline.store import ResultStore, read_store

    cfg = plan.cfg
    _, records = read_store(plan.out / "samples.jsonl")
    records = [r for r in records if ResultStore.key(r) in plan.planned_keys]
    suites = _report_suites(plan)
    modes = {(c.training or {}).get("mode") for c in plan.ckpts}
    # a checkpoint deleted before it ran (and skipped) is not one of the run's: no empty cells for it
    with_records = {r["checkpoint"]["fingerprint"] for r in records}
    kept = [c for c in plan.ckpts if c.fingerprint in with_records or not vanished(c)] or plan.ckpts
    run = {
        "name": plan.name,
        "model": run_model(plan.sources),
        "mode": modes.pop() if len(modes) == 1 else None,
        "checkpoints": [c.to_dict() for c in kept],
    }
    ctxs = set(plan.contexts.values())
    families = {t.family for t in plan.tasks}
    # What the records were computed with, as the plan keyed them (one value: every model source
    # of a run shares these; a served model's batch size is the server's, null)
    claimed = {
        key: plan.record_settings[plan.ckpts[0].fingerprint].get(key)
        for key in (
            "backend",
            "dtype",
            "batch_size",
            "rope_theta",
            "rope_scaling",
            "template",
            "tokenizer",
            "decode_rows",
        )
    }
    prov = {
        **provenance(),
        **claimed,
        "max_model_len": ctxs.pop() if len(ctxs) == 1 else sorted(ctxs),
        "truncation": "middle" if families & MIDDLE_TRUNCATION_FAMILIES else "none",
        "dataset_hashes": plan.dataset_hashes,
        "seed": cfg.seed,
        "lm_eval_version": _lm_eval_version() if "short" in families else None,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "data_parallel": cfg.data_parallel,
        "shard_samples": cfg.shard_samples,
        "device_map": cfg.device_map,
        "samples": cfg.samples,
        "checkpoint_steps": [c.step for c in plan.ckpts],
        "prefix_reuse": _prefix_reuse(cfg, records),
        **({"doctor": "skipped (--no-doctor)"} if cfg.no_doctor else {}),
        **plan.extra_provenance,
    }
    if families & MIDDLE_TRUNCATION_FAMILIES:
        # LongBench's length: the whole budget of a sample (prompt + generation); each prompt is
        # middle-truncated to max_length minus the task's max new tokens (the prompt cap, which
        # LongBench pred.py's own max_length sets directly).
        # Under the reference protocol LongBench's length is pred.py's prompt budget itself.
        budgets = sorted(
            {L for t in plan.tasks if t.family in MIDDLE_TRUNCATION_FAMILIES for L in plan.task_lengths[t.name]}
        )
        prov["max_length"] = budgets[0] if len(budgets) == 1 else budgets or plan.truncation_budget
    check_claims(records, prov)  # results.json never states a setting its records lack
    threshold = DEFAULT_THRESHOLD if cfg.threshold is None else cfg.threshold
    return aggregate(records, suites, run, prov, threshold=threshold)


def _prefix_reuse(cfg: EvalConfig, records: list[dict]) -> dict:
    """Whether shared prompt prefixes were computed once, and how much of the prompts that saved:
    tokens summed over the records that say (`compute`, written by the hf and vllm runners)."""
    facts = [r["compute"] for r in records if isinstance(r.get("compute"), dict)]
    prompt = sum(int(f.get("prompt_tokens") or 0) for f in facts)
    reused = sum(int(f.get("reused_tokens") or 0) for f in facts)
    grids = sorted({f["grid"] for f in facts if isinstance(f.get("grid"), int)})
    return {
        "enabled": cfg.prefix_reuse,
        # the hf engine's prefill grid (tokens): it shapes bf16 rounding, reuse or not
        "grid_tokens": grids[0] if len(grids) == 1 else grids or None,
        "prompt_tokens": prompt,
        "reused_tokens": reused,
        "reused_fraction": reused / prompt if prompt else None,
        "note": "reuse never changes an output; tokens are those of this run's stored records that report them",
    }


def _lm_eval_version() -> str | None:
    """The installed lm-eval's version (MMLU and HellaSwag run through it); None when absent."""
    try:
        from tasks.short.lm_adapter import lm_eval_version

        return lm_eval_version()
    except ImportError:  # lm-eval not installed (PackageNotFoundError is an ImportError)
        return None


def _family(task_name: str) -> str:
    """The task's declared family (Task.family), which names its suite in results.json."""
    from tasks.registry import get_task

    try:
        return get_task(task_name).family or "other"
    except UserError:  # not registered (an --exclude name the registry does not know)
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

    from tasks.suites import suite_categories, suite_weighting

    excluded = set(plan.cfg.exclude)
    by_family: dict[str, list[str]] = {}
    for t in plan.suite_tasks:
        by_family.setdefault(_family(t), []).append(t)
    if len(by_family) == 1:
        groups = {plan.suite_label: plan.suite_tasks}
    else:
        groups = {fam: names for fam, names in by_family.items()}
    tasks_by_name = {t.name: t for t in plan.tasks}
    from tasks.registry import get_task, suite_headline

    suites = {}
    for label, names in groups.items():
        lengths = sorted({L for n in names if n in tasks_by_name for L in plan.task_lengths[n]})
        # a custom task list of one family reads that family's categories and weighting
        fams = {_family(t) for t in names}
        key = label if suite_categories(label) or suite_weighting(label) or len(fams) != 1 else fams.pop()
        cats = suite_categories(key)
        entry: dict = {
            "tasks": list(names),
            "excluded": [t for t in names if t in excluded],
            "unavailable": {t: r for t, r in plan.unavailable.items() if t in names},
            "lengths": lengths or plan.lengths,
        }
        cats = {c: [t for t in ts if t in names] for c, ts in cats.items() if any(t in names for t in ts)}
        if cats:
            entry["categories"] = cats
        if suite_weighting(key):
            entry["weighting"] = suite_weighting(key)
        headline = suite_headline(key) or suite_headline(label)
        headline_spec = headline.to_spec(names) if headline is not None else None
        if headline_spec:  # the number the suite's reference publishes, averaged its way
            entry["headline"] = headline_spec
        protocols = sorted({tk.protocol for n in names if (tk := tasks_by_name.get(n)) is not None and tk.protocols})
        if protocols:
            entry["protocol"] = protocols[0] if len(protocols) == 1 else protocols
        # LongBench (one length: its truncation budget) and MMLU/HellaSwag (length 0) are not
        # length-controlled: the aggregate gives them no effective length.
        entry["length_controlled"] = any(_length_controlled(tasks_by_name.get(n), n, get_task) for n in names)
        gaps = {t: dict(v) for t, v in plan.unavailable_lengths.items() if t in names}
        if gaps:
            entry["unavailable_lengths"] = gaps
        suites[label] = entry
    return suites


def work_units(jobs: list[CheckpointJob], engines: int, shard: bool) -> list[CheckpointJob]:
    """The units a data-parallel run hands out: whole checkpoints, or, with --shard-samples or when
    there are fewer checkpoints than engines, sample ranges of each (checkpoint, task, length) so
    that several engines share one checkpoint. Units show no bar of their own (the run shows one)."""
    if shard or len(jobs) < engines:
        parts = engines if shard else -(-engines // len(jobs))
        units = [u for job in jobs for u in split_job(job, parts)]
    else:
        units = list(jobs)
    return [replace(u, progress=False) for u in units]


def execute(plan: Plan) -> None:
    cfg = plan.cfg
    if not plan.jobs:
        return
    if cfg.data_parallel > 1 or cfg.ray_address:
        from harness.pipeline.parallel import run_units

        units = work_units(plan.jobs, cfg.data_parallel, cfg.shard_samples)
        stats = run_units(
            JobEngine,
            units,
            cfg.data_parallel,
            cfg.tensor_parallel_size,
            cfg.ray_address,
            store_dir=plan.out,
            progress=cfg.progress,
        )
        retried = f", {stats.retried} sent again after a lost worker" if stats.retried else ""
        print(
            f"model loads: {stats.loads} ({stats.engines} engines, {len(plan.jobs)} checkpoints, "
            f"{stats.units} work units{retried})",
            file=sys.stderr,
        )
    else:
        for job in plan.jobs:
            _run_unless_vanished(job)


def _run_unless_vanished(job: CheckpointJob) -> None:
    """run_job, except for a checkpoint folder deleted since planning (a training run's --keep-last
    pruning it): skipped with one line, its records so far kept, the other checkpoints evaluated."""
    from harness.models.sources.base import vanished, warn_vanished

    if vanished(job.ckpt):
        warn_vanished(job.ckpt.path)
        return
    try:
        run_job(job)
    except Exception:
        if not vanished(job.ckpt):
            raise
        warn_vanished(job.ckpt.path)


def run_eval(cfg: EvalConfig, print_table: bool = True) -> dict:
    """Plan, run, aggregate; writes <out>/results.json and returns the results dict."""
    from harness.core.results_file import write_results
    from harness.pipeline.store import run_lock

    plan = plan_eval(cfg)
    with run_lock(plan.out) as waited:  # one eval per --out; the second computes only what is missing
        if waited:
            plan = plan_eval(cfg)
        try:
            execute(plan)
        except BaseException:
            if plan.fresh_store is not None:  # a run that stored nothing leaves no store behind
                discard_empty_store(plan.out, plan.fresh_store, keep_dir=True)
            raise
        results = build_results(plan)
        write_results(plan.out / "results.json", results)
    if print_table:
        from harness.pipeline.table import format_table

        print(format_table(results))
        print(f"results: {plan.out / 'results.json'} (samples: {plan.out / 'samples.jsonl'})")
    return results
