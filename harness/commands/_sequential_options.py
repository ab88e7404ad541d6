"""`harness eval`'s sequential options: stop sampling a cell once it is decided (docs/sequential.md).

harness eval --ckpts 'runs/anchor/ckpt-<1950..2000>' --suite ruler --lengths 64k,128k --against results/full
harness eval --ckpts runs/anchor/ckpt-2000 --suite ruler --lengths 4k-128k --until-width 10
"""

from __future__ import annotations

import argparse

from harness.core.errors import UserError

DEFAULT_ALPHA = 0.05
DEFAULT_MARGIN = 5.0
DEFAULT_ROUND = 25


def add_sequential_options(g) -> None:
    g.add_argument(
        "--against",
        metavar="RUN",
        help="compare with another run (its folder or results.json) on the same samples, in rounds, and stop "
        "each task x length (and suite average) once an anytime-valid confidence sequence of the paired "
        "difference decides it: better, worse, or equivalent within --equivalence-margin; the other run's "
        "missing samples are evaluated too when its checkpoints are there",
    )
    g.add_argument(
        "--until-width",
        type=float,
        metavar="W",
        help="one run alone: stop each cell once its anytime-valid interval is narrower than W points",
    )
    g.add_argument(
        "--alpha",
        type=float,
        metavar="A",
        help=f"chance of any wrong verdict over all cells together (default {DEFAULT_ALPHA}; Bonferroni over the cells)",
    )
    g.add_argument(
        "--equivalence-margin",
        type=float,
        metavar="DELTA",
        help=f"a paired cell is equivalent once its sequence lies inside ±DELTA points (default {DEFAULT_MARGIN:g}; "
        "0: only better or worse stop a cell)",
    )
    g.add_argument(
        "--round-size",
        type=int,
        metavar="N",
        help=f"samples added to every open cell per round (default {DEFAULT_ROUND})",
    )
    g.add_argument(
        "--max-samples",
        type=int,
        metavar="N",
        help="stop a cell undecided after N samples (default: its pool, the samples a plain run takes)",
    )
    g.add_argument(
        "--hold-averages",
        action="store_true",
        default=None,
        help="keep every task at a length drawn until its suite average is decided (more samples; can decide "
        "an average whose tasks are each undecided after some of them are). Default: a decided task stops, "
        "and the average is read from its tasks' intervals",
    )


def sequential_rule(args: argparse.Namespace):
    """The Rule of these flags, or None for a plain (fixed-n) evaluation; UserError on bad values."""
    from harness.core.validate import MAX_COUNT, require_at_least, require_at_most
    from harness.pipeline.sequential_cells import Rule

    against, width = getattr(args, "against", None), getattr(args, "until_width", None)
    tuning = {
        flag: value
        for flag, value in (
            ("--alpha", args.alpha),
            ("--equivalence-margin", args.equivalence_margin),
            ("--round-size", args.round_size),
            ("--max-samples", args.max_samples),
            ("--hold-averages", getattr(args, "hold_averages", None)),
        )
        if value is not None
    }
    if against is None and width is None:
        if tuning:
            raise UserError(
                f"{next(iter(tuning))} belongs to a sequential evaluation: add --against RUN (compare two runs) "
                "or --until-width W (one run), or drop it"
            )
        return None
    if against is not None and width is not None:
        raise UserError(
            "--against and --until-width are two rules: pass one (--against compares, --until-width sizes one run)"
        )
    if width is not None and args.equivalence_margin is not None:
        raise UserError("--equivalence-margin is for --against (a paired comparison): drop it with --until-width")
    alpha = DEFAULT_ALPHA if args.alpha is None else args.alpha
    if not 0.0 < alpha < 0.5:  # NaN fails too
        raise UserError(f"--alpha {alpha}: pass a level between 0 and 0.5, e.g. 0.05")
    margin = DEFAULT_MARGIN if args.equivalence_margin is None else args.equivalence_margin
    if not 0.0 <= margin <= 100.0:
        raise UserError(f"--equivalence-margin {margin}: pass points between 0 and 100 (scores are x100), e.g. 5")
    if width is not None and not 0.0 < width <= 100.0:
        raise UserError(f"--until-width {width}: pass points between 0 and 100, e.g. 10")
    require_at_least((("--round-size", args.round_size, 1), ("--max-samples", args.max_samples, 1)))
    require_at_most((("--round-size", args.round_size, MAX_COUNT), ("--max-samples", args.max_samples, MAX_COUNT)))
    return Rule(
        alpha=alpha,
        margin=margin if margin > 0 else None,
        width=width,
        round_size=DEFAULT_ROUND if args.round_size is None else args.round_size,
        max_samples=args.max_samples,
        seed=args.seed,
        hold_averages=bool(getattr(args, "hold_averages", None)),
    )
