"""The paper's experiment in miniature: train -> evaluate -> leaderboard in one command.

    harness demo                                   # CPU, minutes: the shipped base model assets/demo-base
    harness demo --model meta-llama/Llama-2-7b-hf --data slimpajama.jsonl --window 65536 \\
        --rope-theta 5e6 --steps 2000 --save-every 10 --dtype bf16 --lengths 4k-128k --samples 500 \\
        --tasks ruler --train-arg=--grad-checkpointing          # the template of a real GPU run

Stages (each prints a `[demo k/n] ...` line):
  1. the continued-pretraining corpus: training/demo_corpus.py documents (or --data);
  2. `harness train --mode full` and `--mode anchor` from the same base weights at --window,
     saving every --save-every steps and keeping the last --keep-last checkpoints;
  3. `harness eval` of the base model (one row) and of each run's last --keep-last checkpoints
     (averaged over them) on --tasks at --lengths;
  4. `harness leaderboard` over the three results with full attention as the baseline (the
     anchor-minus-full view), then a summary table and the leaderboard's path.

Everything goes under --out (default runs/demo): data/, runs/<mode>/, results/<name>/,
leaderboard/. Every stage resumes: re-running the same command skips finished training steps and
evaluated samples. The base model defaults to assets/demo-base (resolved from the repository root): a
2-layer Llama pretrained by scripts/pretrain_demo_base.sh at 512- then 1024-token windows, so the
2K continuation starts from a model that already retrieves at 1K (assets/demo-base/PROVENANCE.md).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UserError, require_at_least, require_at_most

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO_ROOT / "assets" / "demo-base"
# RULER tasks that need no external data and that the shipped base model was taught to do.
DEFAULT_TASKS = ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt"]
# 1K (inside the base's window) and 2K (the continuation's window): 4K scored 0 for every run and
# cost the most per sample, so its time goes to more samples at the lengths that are compared.
DEFAULT_LENGTHS = "1k,2k"
DEFAULT_MODES = ("full", "anchor")
CORPUS_SEED = 3  # base-model pretraining corpora use other seeds (1, 2), so the two never share documents


@dataclass
class DemoConfig:
    model: str = str(DEFAULT_MODEL)
    out: str = "runs/demo"
    data: str | None = None
    window: int = 2048
    steps: int = 200  # measured: 150 steps at 2K already lift 2K retrieval from 0 (README)
    save_every: int = 10
    keep_last: int = 5
    batch_size: int = 1
    lr: float = 5e-4
    warmup: int = 0
    rope_theta: float | None = None
    dtype: str = "fp32"
    corpus_docs: int = 1000
    modes: list[str] = field(default_factory=lambda: list(DEFAULT_MODES))
    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    lengths: str = DEFAULT_LENGTHS
    samples: int = 8  # per task and length; the summary's intervals say how sure each difference is
    seed: int = 42
    eval_backend: str = "hf"
    eval_dtype: str = "auto"
    eval_batch_size: int = 32  # measured: 128 new tokens at 1K cost 0.7 s/sample at batch 64, 1.3 s at 16
    base: bool = True
    train_args: list[str] = field(default_factory=list)
    eval_args: list[str] = field(default_factory=list)
    progress: bool = False


def _stage(k: int, n: int, text: str, t0: float) -> None:
    print(f"[demo {k}/{n}] {text} (at {time.monotonic() - t0:.0f}s)", flush=True)


def validate(cfg: DemoConfig) -> tuple[list[int], list[str]]:
    """Check every input before any work; returns (lengths, task names). Raises UserError."""
    from tasks.lengths import parse_lengths
    from tasks.registry import resolve_tasks

    require_at_least(
        (
            ("--window", cfg.window, 16),
            ("--steps", cfg.steps, 1),
            ("--save-every", cfg.save_every, 1),
            ("--keep-last", cfg.keep_last, 1),
            ("--batch-size", cfg.batch_size, 1),
            ("--samples", cfg.samples, 1),
            ("--corpus-docs", cfg.corpus_docs, 1),
            ("--eval-batch-size", cfg.eval_batch_size, 1),
            ("--warmup", cfg.warmup, 0),
        )
    )
    from harness.validate import MAX_COUNT, MAX_TOKENS

    require_at_most(
        (
            ("--window", cfg.window, MAX_TOKENS),
            ("--samples", cfg.samples, MAX_COUNT),
            ("--corpus-docs", cfg.corpus_docs, MAX_COUNT),
            ("--batch-size", cfg.batch_size, MAX_COUNT),
            ("--eval-batch-size", cfg.eval_batch_size, MAX_COUNT),
        )
    )
    saves = cfg.steps // cfg.save_every
    if saves < cfg.keep_last:
        raise UserError(
            f"--steps {cfg.steps} with --save-every {cfg.save_every} saves {saves} checkpoint(s), fewer than "
            f"--keep-last {cfg.keep_last} to average over: raise --steps to {cfg.keep_last * cfg.save_every} "
            f"or lower --save-every or --keep-last"
        )
    if not cfg.modes:
        raise UserError("--modes is empty: pass e.g. full,anchor")
    from training.modes import MODES

    bad = [m for m in cfg.modes if m not in MODES]
    if bad:
        raise UserError(f"unknown --modes {', '.join(bad)}: choose from {', '.join(MODES)}")
    if len(set(cfg.modes)) != len(cfg.modes):
        raise UserError(f"--modes {','.join(cfg.modes)} repeats a mode: list each once")
    lengths = parse_lengths(cfg.lengths)
    if not cfg.tasks:
        raise UserError("--tasks is empty: pass task names (e.g. niah_single_1,vt) or one suite name (e.g. ruler)")
    if len(cfg.tasks) == 1 and cfg.tasks[0] in _suite_names():
        tasks = resolve_tasks(cfg.tasks[0], None, None)
    else:
        tasks = resolve_tasks(None, cfg.tasks, None)
    model = Path(cfg.model)
    looks_local = model.is_absolute() or cfg.model.startswith(".") or model.exists() or cfg.model.count("/") != 1
    if looks_local and not (model / "config.json").is_file():
        hint = (
            (
                " (the shipped base model is missing from this checkout: restore it with `git checkout -- assets/demo-base`"
                " or rebuild it with scripts/pretrain_demo_base.sh)"
            )
            if model == DEFAULT_MODEL
            else ""
        )
        raise UserError(
            f"--model {cfg.model} is not a save_pretrained directory (no config.json){hint}: "
            f"pass a model directory or a hub name"
        )
    if cfg.data:
        missing = [p for p in cfg.data.split(",") if p.strip() and not Path(p.strip()).exists() and p.count("/") != 1]
        if missing:
            raise UserError(
                f"--data {missing[0]} does not exist: pass jsonl/parquet files, or leave --data out to generate the demo corpus"
            )
        from harness.paths import file_kind

        for p in (Path(p.strip()) for p in cfg.data.split(",") if p.strip()):
            kind = file_kind(p.stat().st_mode) if p.exists() else None
            if kind and kind != "a directory":  # a FIFO would hang the training run half way
                raise UserError(f"--data {p} is {kind}: pass jsonl/parquet files or a folder of them")
    from harness.paths import check_out

    out = check_out(cfg.out)
    _check_stage_args(cfg, tasks, out)
    return lengths, tasks


def _parsed(argv: list[str], flag: str) -> argparse.Namespace:
    """argv parsed by the harness parser; its error (printed by argparse) as a UserError naming flag."""
    import contextlib
    import io

    from harness.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return build_parser().parse_args(argv)
    except SystemExit:
        message = err.getvalue().strip().removeprefix("error: ")
        raise UserError(f"{flag}: {message}") from None


def _check_stage_args(cfg: DemoConfig, tasks: list[str], out: Path) -> None:
    """Every train and eval command the demo will run, parsed and checked now: a bad --train-arg or
    --eval-arg fails before anything is trained (a rejected command changes nothing)."""
    from harness.commands.eval import check_args
    from harness.commands.train import job_from_args

    data = cfg.data or str(out / "data" / "corpus.jsonl")
    for mode in cfg.modes:
        job_from_args(_parsed(_train_argv(cfg, mode, data, out / "runs" / mode), "--train-arg"))
        check_args(
            _parsed(
                _eval_argv(cfg, tasks, f"{out}/runs/{mode}/ckpt-*", mode, out / "results" / mode, 1, 1), "--eval-arg"
            )
        )
    if cfg.base:
        check_args(_parsed(_eval_argv(cfg, tasks, cfg.model, "base", out / "results" / "base", 1, None), "--eval-arg"))


def _suite_names() -> set[str]:
    from tasks.registry import all_suites

    return set(all_suites())


def _corpus(cfg: DemoConfig, out: Path) -> str:
    if cfg.data:
        return cfg.data
    from training import demo_corpus

    path = out / "data" / f"corpus-seed{CORPUS_SEED}-{cfg.corpus_docs}.jsonl"
    if not path.exists():
        # Long documents (about 25 tokens a line) so the facts and their recall sit far apart in the window.
        max_lines = max(8, cfg.window // 25)
        tmp = path.with_suffix(".tmp")
        demo_corpus.write(tmp, cfg.corpus_docs, seed=CORPUS_SEED, max_lines=max_lines, min_lines=max(4, max_lines // 4))
        tmp.replace(path)
    return str(path)


def _cli(argv: list[str]) -> None:
    """Run a harness subcommand in-process (its UserError propagates: one line, exit 2)."""
    from harness.cli import build_parser

    args = build_parser().parse_args(argv)
    rc = int(args._run(args) or 0)
    if rc:
        raise UserError(f"`harness {' '.join(argv)}` exited with {rc}")


def _train_argv(cfg: DemoConfig, mode: str, data: str, run_dir: Path) -> list[str]:
    argv = [
        "train",
        "--model",
        cfg.model,
        "--data",
        data,
        "--out",
        str(run_dir),
        "--mode",
        mode,
        "--window",
        str(cfg.window),
        "--steps",
        str(cfg.steps),
        "--batch-size",
        str(cfg.batch_size),
        "--lr",
        str(cfg.lr),
        "--warmup",
        str(cfg.warmup),
        "--dtype",
        cfg.dtype,
        "--save-every",
        str(cfg.save_every),
        "--keep-last",
        str(cfg.keep_last),
    ]
    if cfg.rope_theta is not None:
        argv += ["--rope-theta", str(cfg.rope_theta)]
    if not cfg.progress:
        argv.append("--no-progress")
    return argv + list(cfg.train_args)


def _eval_argv(
    cfg: DemoConfig, tasks: list[str], ckpts: str, name: str, out: Path, max_len: int, last: int | None
) -> list[str]:
    argv = [
        "eval",
        "--ckpts",
        ckpts,
        "--tasks",
        ",".join(tasks),
        "--lengths",
        cfg.lengths,
        "--samples",
        str(cfg.samples),
        "--seed",
        str(cfg.seed),
        "--backend",
        cfg.eval_backend,
        "--dtype",
        cfg.eval_dtype,
        "--batch-size",
        str(cfg.eval_batch_size),
        "--max-model-len",
        str(max_len),
        "--name",
        name,
        "--out",
        str(out),
    ]
    if last:
        argv += ["--last", str(last)]
    if not cfg.progress:
        argv.append("--no-progress")
    return argv + list(cfg.eval_args)


def _interval_text(stats: dict | None) -> str:
    if not stats or stats.get("ci_low") is None:
        return ""
    return f" [{stats['ci_low']:.1f}, {stats['ci_high']:.1f}]"


def _delta_cells(run: dict, base: dict, lengths: list[int]) -> list[tuple[float | None, dict | None]]:
    """(anchor - full point difference, its paired 95% interval) per length and for Avg."""
    from leaderboards.intervals import delta_interval

    sname = next(iter(run["suites"]))
    a, b = run["suites"][sname], base["suites"].get(sname)
    out: list[tuple[float | None, dict | None]] = []
    keys: list[tuple[str, int | None, tuple[Any, Any]]] = [
        (f"len:{L}", L, (a["per_length"].get(str(L)), (b or {}).get("per_length", {}).get(str(L)))) for L in lengths
    ]
    keys.append(("avg", None, ((a.get("summary") or {}).get("avg"), ((b or {}).get("summary") or {}).get("avg"))))
    for key, L, (sa, sb) in keys:
        if not sa or not sb:
            out.append((None, None))
            continue
        col = {"suite": sname, "key": key, "length": L, "id": f"{sname}/{key}"}
        out.append((sa["mean"] - sb["mean"], delta_interval(run, base, col)))
    return out


def _summary(results: dict[str, dict], lengths: list[int], baseline: str | None) -> str:
    """One line per run: the suite average at each length (mean over checkpoints) and Avg, each with
    its 95% interval; then each run minus the baseline with its paired interval, and in words which
    of those differences are significant."""
    from harness.table import MISSING
    from tasks.lengths import format_length

    labels = [format_length(L) for L in lengths] + ["Avg"]
    header = ["run", "ckpts"] + labels
    rows = []
    for name, res in results.items():
        suite = next(iter(res["suites"].values()))
        stats = [suite["per_length"].get(str(L)) for L in lengths] + [(suite.get("summary") or {}).get("avg")]
        rows.append(
            [name, str(len(res["run"]["checkpoints"]))]
            + [MISSING if s is None else f"{s['mean']:.1f}{_interval_text(s)}" for s in stats]
        )
    words = []
    if baseline and baseline in results:
        for name, res in results.items():
            if name in (baseline, "base"):
                continue
            cells = _delta_cells(res, results[baseline], lengths)
            rows.append(
                [f"{name} - {baseline}", ""]
                + [
                    MISSING
                    if d is None
                    else f"{d:+.1f}"
                    + (f" [{iv['low']:+.1f}, {iv['high']:+.1f}]{'*' if iv['significant'] else ''}" if iv else "")
                    for d, iv in cells
                ]
            )
            words.append(_in_words(name, baseline, labels, cells))
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in [header] + rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if words:
        lines += [
            "",
            (
                "[low, high]: 95% bootstrap interval (runs: over samples and checkpoints; differences: paired over "
                "the samples both runs scored); * the difference is significant at 95% (its interval excludes 0)"
            ),
            *words,
        ]
    return "\n".join(lines)


def _in_words(name: str, baseline: str, labels: list[str], cells: list) -> str:
    sig_up = [f"{lab} ({d:+.1f})" for lab, (d, iv) in zip(labels, cells) if iv and iv["significant"] and d > 0]
    sig_down = [f"{lab} ({d:+.1f})" for lab, (d, iv) in zip(labels, cells) if iv and iv["significant"] and d < 0]
    unsure = [lab for lab, (d, iv) in zip(labels, cells) if iv and not iv["significant"]]
    none = [lab for lab, (d, iv) in zip(labels, cells) if d is not None and not iv]
    parts = []
    if sig_up:
        parts.append(f"{name} is significantly better than {baseline} at {', '.join(sig_up)}")
    if sig_down:
        parts.append(f"{name} is significantly worse than {baseline} at {', '.join(sig_down)}")
    if unsure:
        parts.append(
            f"the difference is not significant at {', '.join(unsure)} (the interval contains 0: "
            "more samples or checkpoints would be needed to tell)"
        )
    if none:
        parts.append(f"no interval at {', '.join(none)} (results without per-sample scores)")
    return f"{name} - {baseline}: " + ("; ".join(parts) if parts else "nothing to compare") + "."


def run_demo(cfg: DemoConfig) -> dict:
    """Train, evaluate and render; returns {"runs": {mode: run_dir}, "results": {name: dir}, "leaderboard": path}."""

    t0 = time.monotonic()
    lengths, tasks = validate(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    max_len = max(max(lengths), cfg.window)
    n = 2 + len(cfg.modes) + len(cfg.modes) + (1 if cfg.base else 0)
    k = 1

    _stage(
        k,
        n,
        f"continued-pretraining corpus ({'--data ' + cfg.data if cfg.data else f'{cfg.corpus_docs} generated documents, seed {CORPUS_SEED}'})",
        t0,
    )
    data = _corpus(cfg, out)
    print(f"  corpus: {data}", flush=True)

    runs: dict[str, Path] = {}
    for mode in cfg.modes:
        k += 1
        run_dir = out / "runs" / mode
        _stage(
            k,
            n,
            f"train --mode {mode}: {cfg.steps} steps at window {cfg.window} from {cfg.model}, "
            f"checkpoint every {cfg.save_every}, keep the last {cfg.keep_last} -> {run_dir}",
            t0,
        )
        _cli(_train_argv(cfg, mode, data, run_dir))
        runs[mode] = run_dir

    results: dict[str, Path] = {}
    if cfg.base:
        k += 1
        _stage(
            k, n, f"eval base model {cfg.model} on {len(tasks)} tasks at {cfg.lengths}, {cfg.samples} samples each", t0
        )
        results["base"] = out / "results" / "base"
        _cli(_eval_argv(cfg, tasks, cfg.model, "base", results["base"], max_len, None))
    for mode, run_dir in runs.items():
        k += 1
        _stage(
            k,
            n,
            f"eval {mode}: last {cfg.keep_last} checkpoints of {run_dir} on {len(tasks)} tasks at {cfg.lengths}",
            t0,
        )
        results[mode] = out / "results" / mode
        _cli(_eval_argv(cfg, tasks, f"{run_dir}/ckpt-*", mode, results[mode], max_len, cfg.keep_last))

    k += 1
    baseline = "full" if "full" in runs else None
    board = out / "leaderboard"
    _stage(
        k,
        n,
        f"leaderboard of {', '.join(results)}"
        + (f" (delta view: minus {baseline})" if baseline else "")
        + f" -> {board}",
        t0,
    )
    argv = [
        "leaderboard",
        *[str(p) for p in results.values()],
        "--out",
        str(board),
        "--title",
        f"demo: {', '.join(cfg.modes)} at window {cfg.window}",
    ]
    if baseline:
        argv += ["--baseline", baseline]
    _cli(argv)

    from harness.aggregate import load_results  # the one schema, as every results.json reader

    loaded = {name: load_results(p / "results.json") for name, p in results.items()}
    print()
    print(
        f"suite average over {len(tasks)} tasks ({', '.join(tasks)}), x100, mean over checkpoints, "
        f"{cfg.samples} samples per task and length:"
    )
    print(_summary(loaded, lengths, baseline))
    print()
    print(f"leaderboard: {board / 'index.html'}")
    print(f"demo finished in {time.monotonic() - t0:.0f}s")
    return {
        "runs": {m: str(p) for m, p in runs.items()},
        "results": {m: str(p) for m, p in results.items()},
        "leaderboard": str(board / "index.html"),
    }


def config_from_args(args: argparse.Namespace) -> DemoConfig:
    from tasks.registry import split_csv

    return DemoConfig(
        model=args.model,
        out=args.out,
        data=args.data,
        window=args.window,
        steps=args.steps,
        save_every=args.save_every,
        keep_last=args.keep_last,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup=args.warmup,
        rope_theta=args.rope_theta,
        dtype=args.dtype,
        corpus_docs=args.corpus_docs,
        modes=split_csv(args.modes),
        tasks=split_csv(args.tasks),
        lengths=args.lengths,
        samples=args.samples,
        seed=args.seed,
        eval_backend=args.eval_backend,
        eval_dtype=args.eval_dtype,
        eval_batch_size=args.eval_batch_size,
        base=not args.no_base,
        train_args=list(args.train_arg or []),
        eval_args=list(args.eval_arg or []),
        progress=args.progress,
    )
