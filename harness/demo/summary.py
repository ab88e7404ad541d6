"""What the demo prints under its stages: the score table (each run's suite average per length with
its 95% interval, each run minus the baseline with its paired interval, in numbers and in words), a
one-sentence verdict per compared run, and what the run can and cannot show at its scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.demo.config import DEFAULT_MODEL, DemoConfig
from harness.demo.rope import rope_caveat

# Why bf16 is the default on CPU too (docs/demo.md has the table).
DTYPE_MEASURED = "measured on 2 CPU cores: a bf16 step costs about what an fp32 step does for the demo model"


def print_scores(cfg: DemoConfig, tasks: list[str], loaded: dict, lengths: list[int], baseline: str | None) -> None:
    """The score table of every run (loaded results.json by run name), with the deltas against the baseline."""
    print()
    print(
        f"suite average over {len(tasks)} tasks ({', '.join(tasks)}), x100, mean over checkpoints, "
        f"{cfg.samples} samples per task and length:"
    )
    print(_summary(loaded, lengths, baseline))


def print_what_it_shows(
    cfg: DemoConfig, loaded: dict, lengths: list[int], baseline: str | None, corpus: tuple, steps: int, rope_runs: list
) -> None:
    """The verdict on each compared run, then the caveats; `corpus`: (its LengthStats, measured whole)."""
    stats, whole = corpus
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
