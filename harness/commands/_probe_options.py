"""`harness train`'s in-loop probe options (training.probes; docs/training-logs.md, "In-loop probes").

    harness train ... --probe-every 50                     # needle log-likelihood, loss by position, D
    harness train ... --probe-every 0                      # no probes
    harness train ... --probe-lengths 16k,32k,64k --probe-depths 10,50,90 --probe-docs heldout.jsonl

Only training.config's dataclasses are imported here, so `harness train --help` stays light.
"""

from __future__ import annotations

from harness.core.errors import UserError
from harness.core.validate import MAX_COUNT, integer, require_at_least, require_at_most
from training.config import DEFAULT_PROBE_EVERY


def add_probe_arguments(g) -> None:
    g.add_argument(
        "--probe-every",
        type=integer,
        default=DEFAULT_PROBE_EVERY,
        metavar="N",
        help=f"every N steps log the needle log-likelihood, the loss by position and the bf16 RoPE deviation D "
        f"beside the loss (default {DEFAULT_PROBE_EVERY}: at most 2%% of training time on the demo's window; "
        "0 turns them off)",
    )
    g.add_argument(
        "--probe-lengths",
        metavar="LENGTHS",
        help="needle prompt lengths in tokens, up to --window, e.g. 16k,32k,64k (default: a quarter, a half and all "
        "of the window)",
    )
    g.add_argument(
        "--probe-depths",
        metavar="PERCENTS",
        help="needle depths, percent of the haystack before the needle (default 10,50,90)",
    )
    g.add_argument(
        "--probe-docs",
        metavar="FILES",
        help="held-out documents (jsonl/parquet, comma-separated, read with --text-field) for the loss by position: "
        "the first that fill a window (default: text generated from a seed no run trains on)",
    )
    g.add_argument(
        "--probe-num-docs",
        type=integer,
        default=2,
        metavar="K",
        help="held-out windows scored for the loss by position (default 2)",
    )
    g.add_argument(
        "--probe-buckets",
        type=integer,
        default=8,
        metavar="B",
        help="equal position buckets over the window for the loss by position (default 8)",
    )
    g.add_argument(
        "--probe-rope-len",
        type=integer,
        metavar="L",
        help="tokens of the window D (Eq. 4, Δ1=0 vs Δ2=16, eager bf16) is measured on (default: the window up to "
        "1024; the paper used 4096; 0: no D)",
    )


def probe_config(args):
    """training.config.ProbeConfig from the parsed flags; a bad value is one UserError line."""
    from harness.core.lengths import parse_lengths
    from training.config import ProbeConfig

    require_at_least(
        (
            ("--probe-every", args.probe_every, 0),
            ("--probe-num-docs", args.probe_num_docs, 1),
            ("--probe-buckets", args.probe_buckets, 1),
            ("--probe-rope-len", args.probe_rope_len, 0),
        )
    )
    require_at_most((("--probe-num-docs", args.probe_num_docs, MAX_COUNT),))
    lengths = None
    if args.probe_lengths is not None:
        try:
            lengths = parse_lengths(args.probe_lengths)
        except UserError as exc:
            raise UserError(f"--probe-lengths: {exc}") from None
    docs = None
    if args.probe_docs is not None:
        docs = [p.strip() for p in args.probe_docs.split(",") if p.strip()]
        if not docs:
            raise UserError("--probe-docs is empty: pass one or more jsonl/parquet files, comma-separated")
    return ProbeConfig(
        every=args.probe_every,
        lengths=lengths,
        depths=_depths(args.probe_depths) if args.probe_depths is not None else ProbeConfig().depths,
        docs=docs,
        num_docs=args.probe_num_docs,
        buckets=args.probe_buckets,
        rope_len=args.probe_rope_len,
    )


def _depths(text: str) -> list[float]:
    from harness.core.validate import ascii_float

    out = []
    for item in text.split(","):
        try:
            value = ascii_float(item)
        except ValueError:
            raise UserError(
                f"--probe-depths {text!r}: {item.strip()!r} is not a number; pass percents like 10,50,90"
            ) from None
        if not 0 <= value <= 100:
            raise UserError(f"--probe-depths {text!r}: {item.strip()} is not a percent from 0 to 100")
        out.append(value)
    return sorted(set(out))
