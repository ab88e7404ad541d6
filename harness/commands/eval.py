"""`harness eval`: evaluate checkpoints x tasks x lengths, resumable, averaged over checkpoints.

    harness eval --ckpts 'runs/anchor/ckpt-<1950..2000>' --suite ruler --lengths 4k-128k
    harness eval --ckpts 'runs/anchor/ckpt-*' --last 5 --suite ruler --backend vllm --tensor-parallel-size 2
    harness eval --embedded          # builds 5 tiny checkpoints under runs/embedded/ and evaluates them on CPU
    harness eval --backend openai --base-url http://127.0.0.1:8000/v1 --model NAME --tokenizer DIR --suite ruler
    harness eval --ckpts smollm2-135m-instruct --tasks niah_single_1 --lengths 1k --samples 5   # packaged GGUF

Per-sample results go to <out>/samples.jsonl (default out: results/<name>); the same command
re-run resumes where a killed run stopped. The averaged table is printed and written to
<out>/results.json (`harness report <out>` re-prints it). The loop is harness/pipeline/evaluate.py.
"""

from __future__ import annotations

import argparse
import json

from harness.core.errors import UserError
from harness.core.validate import require_above, require_at_least

HELP = (
    "evaluate checkpoints (transformers, vLLM) or a served model (OpenAI-compatible API) on suites x lengths, "
    "resumable, averaged over checkpoints"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.models.runners.registry import backend_help, backend_names

    g = p.add_argument_group("what to evaluate")
    g.add_argument(
        "--ckpts",
        metavar="SPEC",
        help="checkpoints: path with <A..B> step range, glob, comma list, hub name, .gguf file, or a packaged "
        "model name (smollm2-135m-instruct)",
    )
    g.add_argument("--last", type=int, metavar="N", help="keep only the last N checkpoints by step")
    g.add_argument(
        "--embedded",
        action="store_true",
        help="build 5 tiny random checkpoints under runs/embedded/ (if absent) and evaluate them on "
        "RULER tasks needing no data at 1k,2k; other flags override",
    )
    g.add_argument("--suite", help="suite name (e.g. ruler, ruler-llama2)")
    g.add_argument("--tasks", metavar="A,B", help="comma list of tasks (instead of a suite)")
    g.add_argument("--exclude", metavar="A,B", help="tasks to leave out (listed as excluded in the results)")
    g.add_argument(
        "--lengths",
        metavar="SPEC",
        help="lengths, e.g. 4k-128k or 1k,4k (default: 4k-128k; a published suite under --protocol reference: "
        "its reference's own grid)",
    )
    g.add_argument(
        "--protocol",
        choices=["reference", "exact-length"],
        default="reference",
        help="inputs of the published suites (LongBench v1/v2, HELMET, BABILong, NoLiMa): reference (default) "
        "shows the model what the reference's own pipeline shows it (items, per-length files, length unit, "
        "truncation budget, per-task chat policy, sample count), so scores stand beside published tables; "
        "exact-length fills each length in the evaluated model's tokens, to compare across tokenizers. "
        "Recorded in every record and results.json",
    )
    g.add_argument(
        "--samples",
        type=int,
        metavar="N",
        help="samples per task and length, for every task (default: 500, RULER's, per length-controlled "
        "task and length; every item of LongBench, MMLU and HellaSwag)",
    )
    g.add_argument("--seed", type=int, default=42, help="sample generation seed (default 42)")
    g = p.add_argument_group("runner")
    g.add_argument("--backend", choices=backend_names(), default="hf", help=backend_help())
    g.add_argument(
        "--dtype",
        choices=["auto", "bfloat16", "float16", "float32"],
        default="auto",
        help="model dtype (default: the checkpoint's)",
    )
    g.add_argument(
        "--batch-size",
        type=int,
        default=8,
        help="samples stored per write; loglikelihood rows per batch (hf generation runs one prompt at a time) (default 8)",
    )
    g.add_argument(
        "--no-doctor",
        action="store_true",
        help="skip the cheap set-up checks eval runs first (harness doctor's: the tokenizer's EOS and vocabulary); "
        "recorded in results.json",
    )
    g.add_argument(
        "--no-prefix-reuse",
        action="store_true",
        help="compute every prompt in full: no shared-prefix KV reuse (hf) or prefix caching (vllm); "
        "outputs are the same either way, only slower",
    )
    g.add_argument(
        "--max-model-len", type=int, metavar="N", help="context to run with (default: config max_position_embeddings)"
    )
    g.add_argument(
        "--max-length",
        type=int,
        metavar="N",
        help="LongBench length, prompt + generation: each prompt is middle-truncated to N minus the "
        "task's tokens to generate (pred.py's max_length caps the prompt alone) (default: the context)",
    )
    g.add_argument("--rope-theta", type=float, metavar="THETA", help="override the config's rope theta (recorded)")
    g.add_argument(
        "--rope-scaling", metavar="JSON", help='override rope scaling, e.g. \'{"rope_type": "yarn", "factor": 4.0}\''
    )
    g.add_argument("--tensor-parallel-size", type=int, default=1, metavar="N", help="GPUs per engine (vLLM)")
    g.add_argument(
        "--data-parallel", type=int, default=1, metavar="N", help="evaluate N checkpoints at once (one engine each)"
    )
    g.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="spread --data-parallel workers over a Ray cluster (needs ray): auto, HOST:6379, or local (start one here)",
    )
    g.add_argument(
        "--shard-samples",
        action="store_true",
        help="split each checkpoint x task x length into sample ranges so engines share a checkpoint "
        "(automatic when fewer checkpoints than --data-parallel)",
    )
    g.add_argument(
        "--device-map",
        choices=["auto"],
        help="hf backend: spread one model over the worker's GPUs (--tensor-parallel-size of them per worker)",
    )
    g.add_argument(
        "--chat-template",
        "--chat",
        action="store_true",
        help="wrap prompts in the tokenizer's chat template (off: base-model prompting); with --backend openai: "
        "the chat route, the server's template (its tokens count inside each length)",
    )
    g = p.add_argument_group("served model (--backend openai: vLLM, SGLang, TGI, llama.cpp, hosted APIs)")
    g.add_argument("--base-url", metavar="URL", help="the server's API root, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", metavar="NAME", help="the name the server serves the model under (see URL/models)")
    g.add_argument(
        "--tokenizer",
        metavar="DIR_OR_HUB",
        help="the served model's tokenizer, to build and count prompts locally (default: --model)",
    )
    g.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the API key (default: OPENAI_API_KEY when set, else no key)",
    )
    # default None: given with a local backend, which would ignore them, they are an error
    g.add_argument("--concurrency", type=int, metavar="N", help="requests in flight (default 8)")
    g.add_argument("--request-timeout", type=float, metavar="S", help="seconds per request (default 600)")
    g.add_argument(
        "--retries",
        type=int,
        metavar="N",
        help="tries again after a 429, 5xx or connection error, waiting 0.5 s, 1 s, 2 s, ... (default 5)",
    )
    g = p.add_argument_group("model judge (HELMET LongQA and summarization; any OpenAI-compatible server)")
    g.add_argument("--judge-base-url", metavar="URL", help="the judge server's API root, e.g. http://127.0.0.1:8001/v1")
    g.add_argument("--judge-model", metavar="NAME", help="the name the judge server serves its model under")
    g.add_argument(
        "--judge-api-key-env",
        metavar="VAR",
        help="environment variable holding the judge's API key (default: OPENAI_API_KEY when set, else no key)",
    )
    g = p.add_argument_group("instruct and reasoning models (every backend; each is part of the run's identity)")
    g.add_argument(
        "--no-answer-prefix",
        action="store_true",
        help="end the prompt with the task input, without the answer prefix (e.g. RULER's ' Answer:')",
    )
    g.add_argument(
        "--max-new-tokens",
        metavar="N|TASK=N,...",
        help="tokens to generate instead of each task's own, for every task (N) or some (qa_1=1024,vt=512)",
    )
    g.add_argument("--system-prompt", metavar="TEXT", help="a system turn before the task (needs --chat)")
    g.add_argument(
        "--strip-thinking",
        action="store_true",
        help="score the answer without <think>...</think> (the raw output is kept in the record)",
    )
    g = p.add_argument_group("output and data")
    g.add_argument("--name", help="run name (default: the checkpoints' parent folder)")
    g.add_argument("--out", metavar="DIR", help="store + results directory (default results/<name>); re-run to resume")
    g.add_argument("--threshold", type=float, help="effective-length threshold (default 85.6)")
    g.add_argument("--cache-dir", metavar="DIR", help="sample cache directory ('none' disables it)")
    g.add_argument("--no-progress", action="store_true", help="hide progress bars")
    from tasks import data_sources

    data_sources.add_arguments(p.add_argument_group("task data, offline (online: the hub)"))


def _rope_scaling(text: str | None) -> dict | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except RecursionError:  # a nesting Python's parser cannot follow: no rope scaling is nested at all
        raise UserError(
            '--rope-scaling is nested too deeply: write a flat object, e.g. \'{"rope_type": "yarn", "factor": 4.0}\''
        ) from None
    except ValueError as exc:
        raise UserError(
            f'--rope-scaling is not valid JSON ({exc}): write e.g. \'{{"rope_type": "yarn", "factor": 4.0}}\''
        ) from None
    if not isinstance(value, dict):
        raise UserError('--rope-scaling must be a JSON object, e.g. \'{"rope_type": "linear", "factor": 2.0}\'')
    from harness.models.runners.common import check_rope_scaling, normalise_rope_scaling

    if not value:  # {} would mean no scaling at all, in silence
        raise UserError('--rope-scaling {} names no rope_type: write e.g. \'{"rope_type": "yarn", "factor": 4.0}\'')
    normalised = normalise_rope_scaling(value)  # no rope type: an error now, not when the first model loads
    if normalised is not None:
        check_rope_scaling(normalised)
        _check_rope_keys(normalised)
    factor = value.get("factor")
    if factor is not None:  # a number (check_rope_scaling), and one that scales
        require_above((("--rope-scaling factor", factor, 0),))
    return value


# The keys transformers reads for each rope type (modeling_rope_utils' validators), beside rope_type,
# rope_theta and partial_rotary_factor: any other key is a typo that transformers would only warn
# about and ignore, so a run would go without the scaling the user meant.
_ROPE_KEYS = {
    "default": set(),
    "linear": {"factor"},
    "dynamic": {"factor", "original_max_position_embeddings"},
    "yarn": {
        "factor",
        "original_max_position_embeddings",
        "attention_factor",
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "truncate",
    },
    "longrope": {"short_factor", "long_factor", "original_max_position_embeddings", "attention_factor", "factor"},
    "llama3": {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"},
}


def _check_rope_keys(rope_scaling: dict) -> None:
    kind = rope_scaling["rope_type"]
    known = _ROPE_KEYS.get(kind, set()) | {"rope_type", "rope_theta", "partial_rotary_factor"}
    unknown = sorted(str(k) for k in rope_scaling if k not in known)
    if unknown:
        raise UserError(
            f"--rope-scaling key {unknown[0]!r} is not one rope_type {kind!r} takes (it would be ignored in silence): "
            f"use {', '.join(sorted(known - {'rope_type'}))}"
        )


def check_numbers(args: argparse.Namespace) -> None:
    """Every numeric flag against its range (NaN/inf rejected), before any work."""
    from harness.core.validate import MAX_COUNT, MAX_TOKENS, MAX_WORKERS, require_at_most

    require_at_most(
        (
            ("--last", args.last, MAX_COUNT),
            ("--samples", args.samples, MAX_COUNT),
            ("--batch-size", args.batch_size, MAX_COUNT),
            ("--max-model-len", args.max_model_len, MAX_TOKENS),
            ("--max-length", args.max_length, MAX_TOKENS),
            ("--tensor-parallel-size", args.tensor_parallel_size, MAX_WORKERS),
            ("--data-parallel", args.data_parallel, MAX_WORKERS),
            ("--concurrency", args.concurrency, MAX_WORKERS),
            ("--retries", args.retries, 100),
            ("--request-timeout", args.request_timeout, 7 * 24 * 3600.0),  # socket timeouts overflow beyond
        )
    )
    require_at_least(
        (
            ("--last", args.last, 1),
            ("--samples", args.samples, 1),
            ("--seed", args.seed, 0),
            ("--batch-size", args.batch_size, 1),
            ("--max-model-len", args.max_model_len, 1),
            ("--max-length", args.max_length, 1),
            ("--tensor-parallel-size", args.tensor_parallel_size, 1),
            ("--data-parallel", args.data_parallel, 1),
            ("--threshold", args.threshold, 0),
        )
    )
    require_above((("--rope-theta", args.rope_theta, 0),))
    if args.threshold is not None and args.threshold > 100:
        raise UserError(f"--threshold {args.threshold} is above 100: scores are percentages (RULER uses 85.6)")


# Flags whose empty value means something (an empty system turn); any other empty text is a mistake.
_MAY_BE_EMPTY = {"system_prompt"}
_SERVED_ONLY = ("concurrency", "request_timeout", "retries", "api_key_env")


def _check_given(args: argparse.Namespace) -> None:
    """An empty value (--tokenizer "") and a served-model flag given with a local backend, which
    would ignore it (--concurrency with hf), are one-line errors instead of being accepted in silence."""
    from harness.models.runners.registry import is_local

    for dest, value in sorted(vars(args).items()):
        if isinstance(value, str) and not value.strip() and dest not in _MAY_BE_EMPTY:
            flag = "--" + dest.replace("_", "-")
            raise UserError(f"{flag} is empty: give it a value or leave the flag out")
    backend = getattr(args, "backend", None)
    if backend is not None and is_local(backend):
        given = ["--" + d.replace("_", "-") for d in _SERVED_ONLY if getattr(args, d, None) is not None]
        if given:
            raise UserError(
                f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for served models (--backend openai); "
                f"--backend {backend} would ignore {'it' if len(given) == 1 else 'them'}: drop "
                f"{'it' if len(given) == 1 else 'them'} (--batch-size sets how many prompts run together)"
            )


def check_args(args: argparse.Namespace) -> None:
    """The checks that need no file or model: numbers, --rope-scaling, the run name and --out.
    (`harness demo` runs them on its eval arguments before it trains anything.)"""
    from harness.core.paths import check_out, check_run_name

    check_numbers(args)
    _check_given(args)
    _rope_scaling(args.rope_scaling)
    if args.name is not None:
        check_run_name(args.name)
    if args.out is not None:
        check_out(args.out)


def config_from_args(args: argparse.Namespace):
    from harness.pipeline.evaluate import EvalConfig
    from tasks import data_sources
    from tasks.registry import all_suites, split_csv

    check_args(args)
    data_sources.apply(args)
    from harness.models.judge import set_judge

    set_judge(args.judge_base_url, args.judge_model, args.judge_api_key_env)
    ckpts, suite, tasks, exclude = args.ckpts, args.suite, split_csv(args.tasks), split_csv(args.exclude)
    lengths, samples = args.lengths, args.samples
    if lengths is not None and not lengths.strip():  # given but empty: not the default 4k-128k in silence
        raise UserError("--lengths is empty: pass lengths such as 4k-128k or 1k,4k")
    if args.embedded:
        from harness.pipeline import embedded_eval

        if not ckpts:
            ckpts = embedded_eval.ensure_checkpoints()
        if not suite and not tasks:
            # RULER with the tasks that need external data left out (listed as excluded: 6/13).
            suite = "ruler"
            exclude = list(
                dict.fromkeys(exclude + [t for t in all_suites().get("ruler", []) if t not in embedded_eval.TASKS])
            )
        lengths = lengths or embedded_eval.LENGTHS
        samples = samples or embedded_eval.SAMPLES
    if not ckpts and not args.model:
        raise UserError(
            "no checkpoints: pass --ckpts SPEC (e.g. 'runs/anchor/ckpt-<1950..2000>'), --embedded, "
            "or --backend openai --base-url URL --model NAME"
        )
    return EvalConfig(
        ckpts=ckpts or "",
        last=args.last,
        suite=suite,
        tasks=tasks,
        exclude=exclude,
        lengths=lengths,
        protocol=args.protocol,
        samples=samples,
        seed=args.seed,
        backend=args.backend,
        dtype=args.dtype,
        batch_size=args.batch_size,
        max_model_len=args.max_model_len,
        max_length=args.max_length,
        rope_theta=args.rope_theta,
        rope_scaling=_rope_scaling(args.rope_scaling),
        tensor_parallel_size=args.tensor_parallel_size,
        data_parallel=args.data_parallel,
        ray_address=args.ray_address,
        shard_samples=args.shard_samples,
        device_map=args.device_map,
        name=args.name or ("embedded" if args.embedded and not args.ckpts else None),
        out=args.out,
        threshold=args.threshold,
        chat_template=args.chat_template,
        cache_dir=args.cache_dir,
        progress=not args.no_progress,
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        concurrency=8 if args.concurrency is None else args.concurrency,
        request_timeout=600.0 if args.request_timeout is None else args.request_timeout,
        retries=5 if args.retries is None else args.retries,
        tokenizer=args.tokenizer,
        no_answer_prefix=args.no_answer_prefix,
        max_new_tokens=args.max_new_tokens,
        system_prompt=args.system_prompt,
        strip_thinking=args.strip_thinking,
        prefix_reuse=not args.no_prefix_reuse,
        no_doctor=getattr(args, "no_doctor", False),
    )


def run(args: argparse.Namespace) -> int:
    from harness.pipeline.evaluate import run_eval

    cfg = config_from_args(args)
    if not cfg.no_doctor:
        from harness.pipeline.doctor import preflight

        preflight(cfg)  # a broken set-up stops here, before a table of zeros
    results = run_eval(cfg)
    _say_degenerate(results)
    return 0


def _say_degenerate(results: dict) -> None:
    """The run's last line when its predictions are degenerate as a whole (every one empty, or
    every one ran to max new tokens): the table of zeros above is a set-up problem, not a score."""
    from harness.core.degenerate import describe_causes

    d = results.get("degenerate") or {}
    n = d.get("n", 0)
    for kind, what in (("empty", "empty"), ("at_max", "ran to max new tokens")):
        if n and d.get(kind) == 1.0:
            print(
                f"warning: all {n} predictions {'are ' if kind == 'empty' else ''}{what}: {describe_causes(kind)}; "
                "run `harness doctor` with the same flags"
            )
            return
