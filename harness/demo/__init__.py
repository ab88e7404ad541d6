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

This module runs the stages in order. Their parts live beside it: harness/demo/config.py (the
settings and their defaults), demo_validate.py (every input checked first), demo_model.py (the base
model, converted once when it is a GGUF file), demo_data.py (the corpus), demo_subcommands.py (the
train, eval and leaderboard commands run in-process), demo_rope.py (the RoPE stage) and
demo_summary.py (the tables and what the run can and cannot show).
"""

from __future__ import annotations

import time
from pathlib import Path

from harness.core.errors import UserError
from harness.demo.config import DemoConfig
from harness.demo.data import CORPUS_SEED, _corpus, corpus_stats
from harness.demo.follow import finish_followers, start_follower
from harness.demo.model import _as_folder
from harness.demo.rope import ROPE_DELTA1, ROPE_DELTA2, ROPE_DTYPES, print_rope_table, rope_stage
from harness.demo.subcommands import _cli, _eval_argv, _minutes_for, _train_argv
from harness.demo.summary import print_scores, print_what_it_shows
from harness.demo.validate import validate


class _Stages:
    """Prints the `[demo k/n] ...` line of each stage as it starts: numbered, timed from the demo's start."""

    def __init__(self, t0: float, total: int):
        self.t0, self.total, self.started = t0, total, 0

    def __call__(self, text: str) -> None:
        self.started += 1
        print(f"[demo {self.started}/{self.total}] {text} (at {time.monotonic() - self.t0:.0f}s)", flush=True)


def run_demo(cfg: DemoConfig) -> dict:
    """Train, evaluate, diagnose and render; returns {"runs": {mode: run_dir}, "results": {name: dir},
    "leaderboard": path, "rope": [diagnostic runs]}."""

    t0 = time.monotonic()
    lengths, tasks = validate(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    rope = cfg.rope_samples > 0
    stage = _Stages(t0, 2 + len(cfg.modes) + len(cfg.modes) + (1 if cfg.base else 0) + (1 if rope else 0))

    cfg, data, corpus = _corpus_stage(cfg, out, stage)
    max_len = max(max(lengths), cfg.window)
    followers: dict = {}  # each run evaluated as it trains (harness/demo/follow.py)

    def follow(mode: str, run_dir: Path) -> None:
        followers[mode] = start_follower(cfg, tasks, mode, run_dir, out / "results" / mode, max_len)

    try:
        runs, steps = train_modes(cfg, data, out, stage, follow=follow)
        results = _eval_stages(cfg, tasks, runs, out, max_len, stage, followers)
    except BaseException:
        for child in followers.values():
            child.stop()
        raise
    rope_runs = _rope_stage(cfg, runs, out, stage) if rope else []
    baseline = "full" if "full" in runs else None
    board = _leaderboard_stage(cfg, results, baseline, rope_runs, out, stage)

    from harness.core.results_file import load_results  # the one schema, as every results.json reader

    loaded = {name: load_results(p / "results.json") for name, p in results.items()}
    print_scores(cfg, tasks, loaded, lengths, baseline)
    if rope_runs:
        print_rope_table(cfg, rope_runs, out)
    print_what_it_shows(cfg, loaded, lengths, baseline, corpus, steps, rope_runs)
    print()
    print(f"leaderboard: {board / 'index.html'}")
    print(f"demo finished in {time.monotonic() - t0:.0f}s")
    return {
        "runs": {m: str(p) for m, p in runs.items()},
        "results": {m: str(p) for m, p in results.items()},
        "leaderboard": str(board / "index.html"),
        "rope": rope_runs,
        "corpus": corpus[0],
    }


def _corpus_stage(cfg: DemoConfig, out: Path, stage: _Stages) -> tuple[DemoConfig, str, tuple]:
    """Stage 1: the base model as a folder, the corpus written (or --data) and measured; returns
    (cfg with that folder, the corpus's files, (its LengthStats, measured whole))."""
    generated = f"{cfg.corpus_docs} generated documents, seed {CORPUS_SEED}, long-document share {cfg.long_share:g}"
    stage(f"continued-pretraining corpus ({'--data ' + cfg.data if cfg.data else generated})")
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
    return cfg, data, (stats, whole)


def train_modes(cfg: DemoConfig, data: str, out: Path, announce, follow=None) -> tuple[dict[str, Path], int]:
    """Train each mode from cfg.model into out/runs/<mode>; returns ({mode: run dir}, steps each
    trained). With cfg.train_minutes the first mode trains at most that long and the others as many
    steps as it reached, so every mode sees the same tokens. `follow(mode, run_dir)`, called before a
    mode trains, starts the evaluation of its checkpoints as they are written."""
    runs: dict[str, Path] = {}
    steps = cfg.steps  # what the next mode is asked to train
    for i, mode in enumerate(cfg.modes):
        run_dir = out / "runs" / mode
        minutes = _minutes_for(cfg, i)
        budget = f"up to {steps} steps or {minutes:g} minutes of training" if minutes else f"{steps} steps"
        announce(
            f"train --mode {mode}: {budget} at window {cfg.window} in {cfg.dtype} from {cfg.model}, "
            f"checkpoint every {cfg.save_every}, keep the last {cfg.keep_last} -> {run_dir}"
            + (" (each checkpoint evaluated as it is written)" if follow is not None else "")
        )
        if follow is not None:
            follow(mode, run_dir)
        _cli(_train_argv(cfg, mode, data, run_dir, steps, minutes))
        runs[mode] = run_dir
        if minutes:
            steps = _trained_steps(run_dir)
            rest = f"; {', '.join(cfg.modes[1:])}: {steps} steps too (equal tokens)" if len(cfg.modes) > 1 else ""
            print(f"  {mode} reached step {steps} in its {minutes:g} minutes{rest}", flush=True)
    # What the first run holds, not what was asked: a run already trained further says "nothing to do".
    return runs, _trained_steps(runs[cfg.modes[0]])


def _eval_stages(
    cfg: DemoConfig,
    tasks: list[str],
    runs: dict[str, Path],
    out: Path,
    max_len: int,
    stage: _Stages,
    followers: dict | None = None,
) -> dict[str, Path]:
    """`harness eval` of the base model (one row) and of each run's last --keep-last checkpoints (by the
    run's follower, evaluating them as training wrote them, when it has one); returns {name: results dir}."""
    results: dict[str, Path] = {}
    followers = followers or {}
    if cfg.base:
        stage(f"eval base model {cfg.model} on {len(tasks)} tasks at {cfg.lengths}, {cfg.samples} samples each")
        results["base"] = out / "results" / "base"
        _cli(_eval_argv(cfg, tasks, cfg.model, "base", results["base"], max_len, None))

    def alone(mode: str) -> None:
        ckpts = f"{runs[mode]}/ckpt-*"
        _cli(_eval_argv(cfg, tasks, ckpts, mode, results[mode], max_len, cfg.keep_last))

    for mode, run_dir in runs.items():
        how = "evaluated as training wrote them, the last ones now" if mode in followers else "evaluated now"
        stage(
            f"eval {mode}: last {cfg.keep_last} checkpoints of {run_dir} on {len(tasks)} tasks at {cfg.lengths}, {how}"
        )
        results[mode] = out / "results" / mode
        if mode in followers:
            finish_followers({mode: followers[mode]}, alone)
        else:
            alone(mode)
    return results


def _rope_stage(cfg: DemoConfig, runs: dict[str, Path], out: Path, stage: _Stages) -> list[dict]:
    """The RoPE diagnostic of the base and of each run's last checkpoint, into out/diagnose/."""
    diag_dir = out / "diagnose"
    targets = {"base": cfg.model} if cfg.base else {}
    targets |= {mode: str(_last_checkpoint(run_dir)) for mode, run_dir in runs.items()}
    stage(
        f"RoPE diagnostic (paper Eq. 4: Δ1={ROPE_DELTA1} vs Δ2={ROPE_DELTA2}) of {', '.join(targets)} in "
        f"{' and '.join(ROPE_DTYPES)}, {cfg.rope_samples} samples of {cfg.rope_len} tokens -> {diag_dir}"
    )
    return rope_stage(cfg, targets, diag_dir)


def _leaderboard_stage(
    cfg: DemoConfig, results: dict[str, Path], baseline: str | None, rope_runs: list[dict], out: Path, stage: _Stages
) -> Path:
    """`harness leaderboard` over every result (the delta view against the baseline, the diagnostic's
    section when it ran); returns the leaderboard's folder."""
    board = out / "leaderboard"
    stage(
        f"leaderboard of {', '.join(results)}"
        + (f" (delta view: minus {baseline})" if baseline else "")
        + f" -> {board}"
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
        argv += ["--rope-diagnostic", str(out / "diagnose" / "rope_diagnostic.json")]
    _cli(argv)
    return board


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
