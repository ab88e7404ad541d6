"""`harness train`: continue pretraining a causal LM on packed long windows (AnchorAttention and baselines).

    harness train --model models/tiny --data corpus.jsonl --out runs/anchor --mode anchor \\
        --window 8192 --rope-theta 5e6 --steps 2000 --grad-accum 8 --save-every 10 --keep-last 5
    torchrun --nproc-per-node 8 -m harness train ... --sp 8          # FSDP2 + Ulysses over 8 GPUs
    accelerate launch -m harness train ...                           # same, launched by accelerate

Writes RUN/ckpt-<step>/ (evaluable by `harness eval --ckpts RUN/ckpt-<A..B>`), RUN/state/ (resume:
re-run the same command) and RUN/log.jsonl (with --log-to tensorboard,wandb also RUN/tensorboard/, RUN/wandb/).
See training/loop.py for the loss and resume rules, training/logging.py for the logs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands._follow_child import add_follow_eval_arguments, follower_for
from harness.commands._probe_options import add_probe_arguments, probe_config
from harness.core.errors import UserError
from harness.core.validate import MAX_COUNT, MAX_TOKENS, MAX_WORKERS, require_above, require_at_least, require_at_most
from training.config import DTYPES, KERNEL_CHOICES  # dataclasses only: keeps --help light
from training.modes import INTERLEAVE_MODES, MODES  # no torch at import: keeps --help light

HELP = "continue pretraining a causal LM on packed long windows (anchor, intradoc, full attention)"


def _betas(text: str) -> tuple[float, float]:
    from harness.core.validate import ascii_float

    try:
        b1, b2 = (ascii_float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--betas {text!r} must be two numbers like 0.9,0.95") from None
    return b1, b2


def add_arguments(p: argparse.ArgumentParser) -> None:
    _add_model_and_data(p.add_argument_group("model and data"))
    _add_optimization(p.add_argument_group("optimization"))
    _add_checkpoints(p.add_argument_group("checkpoints"))
    add_follow_eval_arguments(p.add_argument_group("evaluate while training (docs/following.md)"))
    _add_distributed(p.add_argument_group("distributed (under torchrun / accelerate launch)"))
    _add_logging(p.add_argument_group("logging"))
    add_probe_arguments(p.add_argument_group("in-loop probes (training/probes.py; logged like the loss)"))


def _add_model_and_data(g) -> None:
    """The base model and its RoPE base, the run directory, the corpus and how it is read and packed."""
    g.add_argument(
        "--model",
        required=True,
        help="save_pretrained directory, .gguf file or packaged model name (or hub name when online)",
    )
    g.add_argument("--data", required=True, help="comma-separated jsonl/parquet files (or hub dataset names)")
    g.add_argument("--out", required=True, help="run directory: ckpt-<step>/, state/, log.jsonl")
    g.add_argument("--mode", required=True, choices=MODES, help="attention mode")
    g.add_argument(
        "--domain-tags", metavar="FIELD", help="prepend each document's FIELD value as a tag (no loss on it)"
    )
    g.add_argument(
        "--interleave-chunks", type=int, metavar="K", help="cut documents into up to K chunks shuffled across documents"
    )
    g.add_argument("--window", type=int, required=True, metavar="L", help="tokens per window, anchor included")
    g.add_argument(
        "--rope-theta", type=float, metavar="T", help="RoPE base written into the config (paper: 5e6 at 64K)"
    )
    g.add_argument("--text-field", default="text", help="record field holding the text (default text)")
    g.add_argument("--max-docs", type=int, help="read at most N documents per source")
    g.add_argument(
        "--mixture",
        metavar="SPEC",
        help="UpSampledMix: tokens=N[,source=FIELD][,long_threshold=4096][,long_weight=5][,SOURCE=SHARE,...]; "
        "a document's source is its FIELD, else its --domain-tags value, else its file's stem "
        "(the ratio table is printed and saved to RUN/mixture.txt)",
    )


def _add_optimization(g) -> None:
    """Steps, time limit, batch, AdamW and schedule, precision, kernel, seed."""
    g.add_argument("--steps", type=int, required=True, help="optimizer steps")
    g.add_argument(
        "--max-minutes",
        type=float,
        metavar="M",
        help="stop after the first step that ends M minutes of training (model loading not counted; summed over "
        "resumes) and checkpoint there; --steps stays the upper bound",
    )
    g.add_argument(
        "--batch-size", type=int, default=1, help="windows per micro-batch per data-parallel rank (default 1)"
    )
    g.add_argument("--grad-accum", type=int, default=1, help="micro-batches per step (default 1)")
    g.add_argument("--lr", type=float, default=2e-5, help="learning rate (default 2e-5)")
    g.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay (default 0.1)")
    g.add_argument("--betas", type=_betas, default=(0.9, 0.95), help="AdamW betas (default 0.9,0.95)")
    g.add_argument("--warmup", type=int, default=0, metavar="W", help="linear warmup steps, then constant (default 0)")
    g.add_argument("--max-grad-norm", type=float, default=1.0, help="clip the gradient norm (default 1.0; 0 disables)")
    g.add_argument("--dtype", choices=DTYPES, default="bf16", help="bf16 autocast over fp32 weights, or pure fp32")
    g.add_argument("--grad-checkpointing", action="store_true", help="recompute activations in backward")
    g.add_argument(
        "--kernel",
        choices=KERNEL_CHOICES,
        default="auto",
        help="attention kernel (auto: varlen on CUDA, flex with --sp > 1, sdpa-doc on CPU)",
    )
    g.add_argument("--seed", type=int, default=0, help="packing order, interleaving and init RNG (default 0)")


def _add_checkpoints(g) -> None:
    """Which checkpoints and resumable states are written."""
    g.add_argument("--save-every", type=int, default=10, metavar="S", help="checkpoint every S steps (default 10)")
    g.add_argument(
        "--keep-last", type=int, default=5, metavar="K", help="write only the last K checkpoints (default 5; 0 = all)"
    )
    g.add_argument(
        "--save-state-every", type=int, metavar="N", help="full resumable state every N steps (always at the end)"
    )


def _add_distributed(g) -> None:
    """Sequence parallelism and sharding under torchrun / accelerate launch."""
    g.add_argument("--sp", type=int, default=1, metavar="P", help="Ulysses sequence-parallel degree (default 1)")
    g.add_argument(
        "--shard",
        choices=("fsdp", "none"),
        default="fsdp",
        help="FSDP2 parameter sharding, or replicas with all-reduce",
    )


def _add_logging(g) -> None:
    """The progress bar and the extra log sinks."""
    g.add_argument("--no-progress", action="store_true", help="no progress bar (the JSONL log is still written)")
    g.add_argument(
        "--log-to",
        metavar="SINKS",
        help="also log loss, tokens/s, lr and grad norm to tensorboard (RUN/tensorboard/) and/or wandb "
        "(RUN/wandb/, offline without network or credentials), comma-separated; needs the extra of that name "
        "(RUN/log.jsonl is always written; see docs/training-logs.md)",
    )


def _check_flags(args) -> None:
    """Every numeric flag in its range, and the flags that only work together, before any work."""
    # Every numeric flag: a lower bound, NaN and infinity rejected (None = not given).
    require_at_least(
        (
            ("--steps", args.steps, 1),
            ("--window", args.window, 16),
            ("--batch-size", args.batch_size, 1),
            ("--grad-accum", args.grad_accum, 1),
            ("--save-every", args.save_every, 1),
            ("--keep-last", args.keep_last, 0),
            ("--warmup", args.warmup, 0),
            ("--sp", args.sp, 1),
            ("--save-state-every", args.save_state_every, 1),
            ("--interleave-chunks", args.interleave_chunks, 1),
            ("--max-docs", args.max_docs, 1),
            ("--seed", args.seed, 0),
            ("--weight-decay", args.weight_decay, 0.0),
            ("--max-grad-norm", args.max_grad_norm, 0.0),
            ("--betas", args.betas[0], 0.0),
            ("--betas", args.betas[1], 0.0),
        )
    )
    require_above(
        (("--lr", args.lr, 0.0), ("--rope-theta", args.rope_theta, 0.0), ("--max-minutes", args.max_minutes, 0.0))
    )
    require_at_most(
        (
            ("--window", args.window, MAX_TOKENS),
            ("--batch-size", args.batch_size, MAX_COUNT),
            ("--grad-accum", args.grad_accum, MAX_COUNT),
            ("--interleave-chunks", args.interleave_chunks, args.window),
            ("--sp", args.sp, MAX_WORKERS),
        )
    )
    if not all(b < 1 for b in args.betas):  # AdamW's running averages need a decay below 1
        raise UserError(f"--betas {args.betas[0]},{args.betas[1]}: each beta must be below 1, e.g. 0.9,0.95")
    if args.seed >= 2**32:  # numpy's seed range
        raise UserError(f"--seed {args.seed} must be below 2**32")
    if args.interleave_chunks and args.mode not in INTERLEAVE_MODES:
        raise UserError(
            f"--interleave-chunks works with --mode {' or '.join(INTERLEAVE_MODES)}, not {args.mode}: "
            "change the mode or drop the flag"
        )


def job_from_args(args):
    from harness.core.paths import check_apart, check_out
    from training.config import CheckpointConfig, DataConfig, ModelConfig, OptimizerConfig, ScheduleConfig, TrainJob

    _check_flags(args)
    paths = [p.strip() for p in args.data.split(",") if p.strip()]
    if not paths:
        raise UserError("--data is empty: pass one or more jsonl/parquet files, comma-separated")
    from harness.core.validate import require_distinct_paths

    # 'a,a' trained on one file twice without a word: each file once (--mixture weights them)
    require_distinct_paths("--data", paths, "list each file once (--mixture weights the files)")
    check_out(args.out)
    check_apart(args.out, args.model, "--out", "--model")  # checkpoints never land in the base model
    return TrainJob(
        model=ModelConfig(
            path=args.model,
            rope_theta=args.rope_theta,
            dtype=args.dtype,
            grad_checkpointing=args.grad_checkpointing,
            kernel=args.kernel,
        ),
        data=DataConfig(
            paths=paths,
            mode=args.mode,
            window=args.window,
            batch_size=args.batch_size,
            grad_accum=args.grad_accum,
            text_field=args.text_field,
            domain_tags=args.domain_tags,
            interleave_chunks=args.interleave_chunks,
            max_docs=args.max_docs,
            mixture=args.mixture,
            seed=args.seed,
        ),
        out=args.out,
        optimizer=OptimizerConfig(
            lr=args.lr,
            weight_decay=args.weight_decay,
            betas=tuple(args.betas),
            max_grad_norm=args.max_grad_norm or None,
        ),
        schedule=ScheduleConfig(steps=args.steps, warmup=args.warmup, max_minutes=args.max_minutes),
        checkpoint=CheckpointConfig(
            save_every=args.save_every, keep_last=args.keep_last or None, save_state_every=args.save_state_every
        ),
        probes=probe_config(args),
    )


def run(args) -> int:
    from training.logging import parse_log_to

    sinks = parse_log_to(args.log_to)  # an unknown sink or a missing package: one line, nothing loaded
    job = job_from_args(args)
    out = Path(job.out)
    if out.exists() and not out.is_dir():  # before any model or data is read
        raise UserError(f"--out {out} is a file: pass a directory (a new one, or the run to resume)")
    from training.logging import check_sink_folders

    check_sink_folders(out, sinks)  # RUN/tensorboard/ that cannot be made: one line now, not after the model loads
    from training.distributed import init_from_env
    from training.loop import train

    follower = follower_for(args, job.out)  # its flags checked now, before any model or data is read
    dist = init_from_env(sp_size=args.sp, shard=args.shard)
    if follower is not None and (dist is None or dist.rank == 0):  # one follower per run
        follower.start()
    try:
        summary = train(job, dist=dist, progress=not args.no_progress, log_to=sinks)
    except BaseException:
        if follower is not None:
            follower.stop()
        raise
    finally:
        if dist:
            dist.close()
    if follower is not None:
        follower.finish()  # it evaluates the checkpoints left, then ends by itself
    if dist is None or dist.rank == 0:
        last = summary.get("last_loss")  # a finished run re-run reports its logged loss
        cut = f" of {job.schedule.steps}, stopped by --max-minutes" if summary.get("stopped_early") else ""
        print(
            f"trained {job.out} to step {summary['steps']}{cut} "
            f"(last loss {'unknown' if last is None else f'{last:.4f}'}); "
            f"checkpoints: {', '.join(summary['checkpoints']) or 'none new'}"
        )
    return 0
