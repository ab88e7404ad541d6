"""`harness demo`: the paper's experiment in miniature, train -> evaluate -> leaderboard, in one command.

    harness demo                                # CPU: the shipped base model, 2K window
    harness demo --steps 4 --save-every 2 --keep-last 2 --lengths 1k --samples 2   # a quick look

Continues the base model (default assets/demo-base, pretrained at 512/1K windows by
scripts/pretrain_demo_base.sh) twice from the same weights, in bf16, with full attention and with
AnchorAttention, on a generated corpus with long documents upsampled; evaluates the base model and
the last checkpoints of both runs on RULER tasks that need no data; measures the bf16 RoPE deviation
of the base and of each run's last checkpoint; renders the HTML leaderboard (anchor minus full) and
says what the run can and cannot show. The flags scale it to a real run (harness/demo/__init__.py has the
GPU-scale invocation); the orchestration is harness/demo/__init__.py, the measured settings docs/demo.md.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.demo.config import DemoConfig

HELP = "train full and anchor runs from one base model, evaluate them and the base, render the leaderboard"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.demo.config import DemoConfig

    d = DemoConfig()
    _add_model_and_data(p.add_argument_group("model and data"), d)
    g = p.add_argument_group("training (both runs)")
    _add_schedule(g, d)
    _add_optimizer(g, d)
    _add_evaluation(p.add_argument_group("evaluation"), d)
    _add_rope_diagnostic(
        p.add_argument_group("RoPE diagnostic (paper Section 2) of the base and each run's last checkpoint"), d
    )


def _add_model_and_data(g, d: DemoConfig) -> None:
    g.add_argument(
        "--model",
        default=d.model,
        help="base model: save_pretrained directory or hub name (default: the shipped assets/demo-base)",
    )
    g.add_argument(
        "--data", help="continued-pretraining jsonl/parquet files, comma-separated (default: generate the demo corpus)"
    )
    g.add_argument(
        "--corpus-docs",
        type=int,
        default=d.corpus_docs,
        metavar="N",
        help=f"documents in the generated corpus (default {d.corpus_docs})",
    )
    g.add_argument(
        "--long-share",
        type=float,
        default=d.long_share,
        metavar="S",
        help=f"share of generated documents filled to 1-2 windows, the paper's upsampling of long documents "
        f"(default {d.long_share:g}; 0: the short-document corpus)",
    )
    g.add_argument(
        "--out",
        default=d.out,
        metavar="DIR",
        help=f"everything goes here: data/, runs/, results/, leaderboard/ (default {d.out})",
    )


def _add_schedule(g, d: DemoConfig) -> None:
    """The training flags on what is trained and for how long: modes, window, steps, checkpoints."""
    g.add_argument(
        "--modes",
        default=",".join(d.modes),
        metavar="A,B",
        help="attention modes to train (default full,anchor; full is the leaderboard baseline)",
    )
    g.add_argument(
        "--window", type=int, default=d.window, metavar="L", help=f"training window in tokens (default {d.window})"
    )
    g.add_argument("--steps", type=int, default=d.steps, help=f"optimizer steps per run (default {d.steps})")
    g.add_argument(
        "--train-minutes",
        type=float,
        metavar="M",
        help="the first mode trains at most M minutes of --steps, the others as many steps as it reached "
        "(equal tokens; e.g. for a GPU lent for an hour)",
    )
    g.add_argument(
        "--save-every",
        type=int,
        default=d.save_every,
        metavar="S",
        help=f"checkpoint every S steps (default {d.save_every})",
    )
    g.add_argument(
        "--keep-last",
        type=int,
        default=d.keep_last,
        metavar="K",
        help=f"checkpoints kept and averaged in the evaluation (default {d.keep_last})",
    )
    g.add_argument("--batch-size", type=int, default=d.batch_size, help=f"windows per step (default {d.batch_size})")


def _add_optimizer(g, d: DemoConfig) -> None:
    """The training flags on how each step trains: learning rate, RoPE base, precision, extra arguments."""
    g.add_argument(
        "--lr",
        type=float,
        default=d.lr,
        help=f"learning rate (default {d.lr}, for the 0.66M-parameter demo model; real models: the paper's 2e-5)",
    )
    g.add_argument("--warmup", type=int, default=d.warmup, metavar="W", help="linear warmup steps (default 0)")
    g.add_argument(
        "--rope-theta",
        type=float,
        metavar="T",
        help="RoPE base for the continued runs (default: the model's; paper: 5e6 at 64K)",
    )
    g.add_argument(
        "--dtype",
        choices=("bf16", "fp32"),
        default=d.dtype,
        help=f"training precision (default {d.dtype}, as the paper: autocast with fp32 master weights; "
        "measured about as fast as fp32 on CPU for the demo model)",
    )
    g.add_argument(
        "--train-arg",
        action="append",
        metavar="ARG",
        help="extra `harness train` argument, repeatable (e.g. --train-arg=--grad-checkpointing)",
    )


def _add_evaluation(g, d: DemoConfig) -> None:
    from harness.commands._eval_options import MODEL_DTYPES
    from harness.models.runners.registry import backend_help, backend_names

    tasks, lengths = ",".join(d.tasks), d.lengths
    g.add_argument("--tasks", default=tasks, metavar="A,B", help=f"tasks, or one suite name (default {tasks})")
    g.add_argument("--lengths", default=lengths, metavar="SPEC", help=f"evaluation lengths (default {lengths})")
    g.add_argument(
        "--samples",
        type=int,
        default=d.samples,
        metavar="N",
        help=f"samples per task and length (default {d.samples}; RULER uses 500)",
    )
    g.add_argument("--seed", type=int, default=d.seed, help=f"evaluation sample seed (default {d.seed})")
    g.add_argument(
        "--eval-backend",
        choices=backend_names(local_only=True),
        default=d.eval_backend,
        help=backend_help(local_only=True),
    )
    g.add_argument(
        "--eval-dtype", choices=MODEL_DTYPES, default=d.eval_dtype, help="evaluation dtype (default: the checkpoint's)"
    )
    g.add_argument(
        "--eval-batch-size",
        type=int,
        default=d.eval_batch_size,
        metavar="N",
        help=f"harness eval --batch-size: samples per write; loglikelihood rows per batch (default {d.eval_batch_size})",
    )
    g.add_argument(
        "--eval-arg",
        action="append",
        metavar="ARG",
        help="extra `harness eval` argument, repeatable (e.g. --eval-arg=--tensor-parallel-size=8)",
    )
    g.add_argument("--no-base", action="store_true", help="do not evaluate the base model as a row")


def _add_rope_diagnostic(g, d: DemoConfig) -> None:
    g.add_argument(
        "--rope-samples",
        type=int,
        default=d.rope_samples,
        metavar="N",
        help=f"text windows to average over, in bf16 and fp32 (default {d.rope_samples}; 0 skips the stage)",
    )
    g.add_argument(
        "--rope-len", type=int, default=d.rope_len, metavar="L", help=f"tokens per window (default {d.rope_len})"
    )
    # Not a diagnostic flag, but --help has always listed it last, in this group.
    g.add_argument("--progress", action="store_true", help="show the training and evaluation progress bars")


def run(args: argparse.Namespace) -> int:
    from harness.core.validate import require_above, require_at_least
    from harness.demo import run_demo
    from harness.demo.config import config_from_args

    # The int flags are checked with the rest of the config in harness.demo.validate.validate.
    require_at_least((("--seed", args.seed, 0),))
    require_above((("--lr", args.lr, 0), ("--rope-theta", args.rope_theta, 0)))
    require_at_least((("--long-share", args.long_share, 0),))
    run_demo(config_from_args(args))
    return 0
