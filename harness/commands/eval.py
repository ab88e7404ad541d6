"""`harness eval`: evaluate checkpoints x tasks x lengths, resumable, averaged over checkpoints.

    harness eval --ckpts 'runs/anchor/ckpt-<1950..2000>' --suite ruler --lengths 4k-128k
    harness eval --ckpts 'runs/anchor/ckpt-*' --last 5 --suite ruler --backend vllm --tensor-parallel-size 2
    harness eval --embedded          # builds 5 tiny checkpoints under runs/embedded/ and evaluates them on CPU
    harness eval --backend openai --base-url http://127.0.0.1:8000/v1 --model NAME --tokenizer DIR --suite ruler
    harness eval --ckpts smollm2-135m-instruct --tasks niah_single_1 --lengths 1k --samples 5   # packaged GGUF

Per-sample results go to <out>/samples.jsonl (default out: results/<name>); the same command
re-run resumes where a killed run stopped. The averaged table is printed and written to
<out>/results.json (`harness report <out>` re-prints it). The loop is harness/pipeline/evaluate.py;
the options, one function per group, are in harness/commands/_eval_options.py.
"""

from __future__ import annotations

import argparse
import json
from typing import NamedTuple

from harness.core.errors import UserError
from harness.core.validate import require_above, require_at_least

HELP = (
    "evaluate checkpoints (transformers, vLLM) or a served model (OpenAI-compatible API) on suites x lengths, "
    "resumable, averaged over checkpoints"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.commands import _eval_options as options
    from tasks import data_sources

    options.add_target_options(p.add_argument_group("what to evaluate"))
    runner = p.add_argument_group("runner")
    options.add_runner_options(runner)
    options.add_parallel_options(runner)
    options.add_chat_option(runner)
    options.add_served_options(
        p.add_argument_group("served model (--backend openai: vLLM, SGLang, TGI, llama.cpp, hosted APIs)")
    )
    options.add_judge_options(
        p.add_argument_group("model judge (HELMET LongQA and summarization; any OpenAI-compatible server)")
    )
    options.add_prompt_options(
        p.add_argument_group("instruct and reasoning models (every backend; each is part of the run's identity)")
    )
    options.add_output_options(p.add_argument_group("output and data"))
    from harness.commands._sequential_options import add_sequential_options

    add_sequential_options(
        p.add_argument_group("stop when decided (sequential: anytime-valid confidence sequences, docs/sequential.md)")
    )
    from harness.commands._follow_options import add_follow_options

    add_follow_options(p.add_argument_group("following a training run (docs/following.md)"))
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
            ("--max-thinking-tokens", args.max_thinking_tokens, MAX_TOKENS),
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
            ("--max-thinking-tokens", args.max_thinking_tokens, 1),
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


class _Selection(NamedTuple):
    """What a run evaluates: the flags as given, with --embedded's defaults filled in."""

    ckpts: str | None
    suite: str | None
    tasks: list[str]
    exclude: list[str]
    lengths: str | None
    samples: int | None


def _selection(args: argparse.Namespace) -> _Selection:
    """The checkpoints, tasks, lengths and samples to evaluate; --embedded builds its checkpoints
    (if absent) and fills in what the other flags leave open."""
    from tasks.registry import all_suites, narrow_suite, split_csv

    ckpts, suite, tasks, exclude = args.ckpts, args.suite, split_csv(args.tasks), split_csv(args.exclude)
    suite, tasks, exclude = narrow_suite(suite, tasks, exclude)  # --suite X --tasks T: X, the rest excluded
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
    return _Selection(ckpts, suite, tasks, exclude, lengths, samples)


def config_from_args(args: argparse.Namespace):
    """The EvalConfig of these arguments, after every check that needs no model (check_args)."""
    from harness.models.judge import set_judge
    from harness.pipeline.evaluate import EvalConfig
    from tasks import data_sources

    check_args(args)
    data_sources.apply(args)
    set_judge(args.judge_base_url, args.judge_model, args.judge_api_key_env)
    what = _selection(args)
    return EvalConfig(
        ckpts=what.ckpts or "",
        last=args.last,
        suite=what.suite,
        tasks=what.tasks,
        exclude=what.exclude,
        lengths=what.lengths,
        protocol=args.protocol,
        samples=what.samples,
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
        max_thinking_tokens=args.max_thinking_tokens,
        prefix_reuse=not args.no_prefix_reuse,
        no_doctor=getattr(args, "no_doctor", False),
    )


def run(args: argparse.Namespace) -> int:
    from harness.commands._sequential_options import sequential_rule
    from harness.pipeline.evaluate import run_eval

    if args.follow or args.leaderboard or args.no_gain_after is not None or args.follow_poll is not None:
        from harness.commands._follow import run_follow

        return run_follow(args, config_from_args)  # each checkpoint of a training run as it is written
    rule = sequential_rule(args)  # before any model: a bad --alpha is an error now
    cfg = config_from_args(args)
    if not cfg.no_doctor:
        from harness.pipeline.doctor import preflight

        preflight(cfg)  # a broken set-up stops here, before a table of zeros
    if rule is not None:
        from harness.pipeline.sequential_run import run_sequential

        results = run_sequential(cfg, rule, against=args.against)
    else:
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
