"""Verdicts along a training run: each checkpoint's point on the curve, its paired differences against
the previous and the first checkpoint, and whether the run has stopped improving.

    from harness.pipeline.run_verdicts import Curve
    curve = Curve(suites, threshold, no_gain_after=3)
    curve.update(records, ckpt_info)      # records of the run's checkpoints (any, pruned ones too)
    curve.points[-1].suites["ruler"]      # {"per_length": {4096: 91.2, ...}, "avg": ..., "effective_length": {...}}
    curve.vs_previous(curve.points[-1])   # {suite: {length: {"diff", "ci_low", "ci_high", "n", "significant"}}}
    curve.no_gain_since()                 # a step, or None

A point is the checkpoint's own aggregate (harness.pipeline.aggregate over that checkpoint's records
alone, so its suite average at a length, its effective length and its degenerate shares are the
numbers results.json gives that checkpoint). A paired difference is B - A of the suite average at
one length over the samples both checkpoints scored (same task version, dataset hash, seed and index:
the same prompt), with the 95% percentile-bootstrap interval of harness.core.paired (one draw of
sample indices shared by both checkpoints). Perplexity tasks (lower is better) are left out of the
differences. "No gain since step S": S is the checkpoint K before the newest, and none of the K
checkpoints after it is significantly above it (its interval above 0) at any length of any suite.
Everything is computed from the store's records, so a checkpoint that training has since pruned
keeps its point and still pairs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from harness.core import paired, stats
from harness.core.lengths import format_length
from harness.pipeline.aggregate import aggregate


@dataclass
class Point:
    """One checkpoint on the curve."""

    step: int
    path: str
    fingerprint: str
    train_tokens: int | None
    suites: dict[str, dict]  # name -> {"per_length": {L: mean}, "avg", "effective_length": {"value", "label"}}
    degenerate: dict | None  # {"empty", "at_max", "repeat", "n"} shares over the checkpoint's predictions
    blocks: dict[tuple[str, int], dict] = field(default_factory=dict, repr=False)  # (task, L) -> paired block
    n_records: int = 0


def _blocks(records: list[dict]) -> dict[tuple[str, int], dict]:
    """(task, length) -> a harness.core.paired block of one checkpoint ("c"), numeric scores only."""
    grouped: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in records:
        if r.get("score") is None or "nll" in (r.get("metadata") or {}):
            continue  # perplexity: lower is better, no paired score difference
        grouped[(r["task"], int(r["length"]))].append(r)
    out = {}
    for key, recs in grouped.items():
        recs.sort(key=lambda r: r["index"])
        first = recs[0]
        out[key] = {
            "task_version": first.get("task_version"),
            "dataset_hash": first.get("dataset_hash"),
            "seed": first.get("seed"),
            "index": [r["index"] for r in recs],
            "scores": {"c": [float(r["score"]) for r in recs]},
        }
    return out


def _summary(results: dict) -> dict[str, dict]:
    """suite -> its per-length averages, Avg and effective length, from one checkpoint's aggregate."""
    out = {}
    for name, block in results["suites"].items():
        per_length = {int(L): s["mean"] for L, s in block["per_length"].items() if s.get("mean") is not None}
        summary = block.get("summary") or {}
        eff = summary.get("effective_length") or {}
        out[name] = {
            "per_length": per_length,
            "avg": (summary.get("avg") or {}).get("mean"),
            "effective_length": {"value": eff.get("value"), "label": eff.get("label")},
            "perplexity": block.get("score") == "perplexity",
        }
    return out


def checkpoint_point(records: list[dict], suites: dict, ckpt: dict, threshold: float, tokens_per_step) -> Point:
    """The point of one checkpoint from its records: its own aggregate and its paired blocks."""
    run = {"name": "point", "model": None, "mode": None, "checkpoints": [ckpt]}
    results = aggregate(records, suites, run, {}, threshold)
    step = int(ckpt["step"])
    return Point(
        step=step,
        path=ckpt["path"],
        fingerprint=ckpt["fingerprint"],
        train_tokens=step * tokens_per_step if tokens_per_step else None,
        suites=_summary(results),
        degenerate=results.get("degenerate"),
        blocks=_blocks(records),
        n_records=len(records),
    )


def _task_difference(task: str, L: int, a: dict, b: dict) -> tuple[float, np.ndarray, int] | None:
    """(point difference x100, bootstrap replicates, samples) of B - A on the samples both scored."""
    idx = paired.shared_indices(a, b)
    if not idx:
        return None
    ra, rb = paired.paired_replicates(task, L, a, ["c"], b, ["c"], idx)
    pos_a = {i: p for p, i in enumerate(a["index"])}
    pos_b = {i: p for p, i in enumerate(b["index"])}
    mean_a = float(np.mean([a["scores"]["c"][pos_a[i]] for i in idx]))
    mean_b = float(np.mean([b["scores"]["c"][pos_b[i]] for i in idx]))
    return 100.0 * (mean_b - mean_a), rb[:, 0] - ra[:, 0], len(idx)


def paired_difference(a: Point, b: Point, suites: dict) -> dict[str, dict[int, dict]]:
    """suite -> length -> B - A of the suite average over shared samples, with its 95% interval.

    A suite weighted by samples (LongBench v2) weights each task by its shared samples, as its average does."""
    out: dict[str, dict[int, dict]] = {}
    for name, spec in suites.items():
        by_length: dict[int, dict] = {}
        for L in sorted(int(x) for x in spec["lengths"]):
            parts = [
                d
                for t in spec["tasks"]
                if (t, L) in a.blocks
                and (t, L) in b.blocks
                and (d := _task_difference(t, L, a.blocks[(t, L)], b.blocks[(t, L)]))
            ]
            if not parts:
                continue
            w = [n for _, _, n in parts] if spec.get("weighting") == "samples" else [1.0] * len(parts)
            point = float(np.average([p for p, _, _ in parts], weights=w))
            reps = paired.mean_of([r for _, r, _ in parts], w)
            ci = stats.interval(reps)
            by_length[L] = {
                "diff": point,
                "ci_low": ci[0] if ci else None,
                "ci_high": ci[1] if ci else None,
                "n": sum(n for _, _, n in parts),
                "significant": bool(ci and stats.significant(*ci)),
            }
        if by_length:
            out[name] = by_length
    return out


def gains(diff: dict[str, dict[int, dict]]) -> list[tuple[str, int]]:
    """(suite, length) where the difference is significantly above 0."""
    return [(s, L) for s, per in diff.items() for L, d in per.items() if d["ci_low"] is not None and d["ci_low"] > 0]


class Curve:
    """The run's points in step order and the verdicts between them (see the module docstring)."""

    def __init__(self, suites: dict, threshold: float, no_gain_after: int):
        self.suites = suites
        self.threshold = threshold
        self.no_gain_after = no_gain_after
        self.points: list[Point] = []
        self._diffs: dict[tuple[str, str], dict] = {}

    def update(self, by_checkpoint: dict[str, tuple[dict, list[dict]]], tokens_per_step: int | None) -> None:
        """Recompute the points whose records changed; `by_checkpoint`: fingerprint -> (checkpoint, records)."""
        old = {p.fingerprint: p for p in self.points}
        points = []
        for fp, (ckpt, recs) in by_checkpoint.items():
            have = old.get(fp)
            if have is None or have.n_records != len(recs):
                have = checkpoint_point(recs, self.suites, ckpt, self.threshold, tokens_per_step)
                self._diffs = {k: v for k, v in self._diffs.items() if fp not in k}
            points.append(have)
        self.points = sorted(points, key=lambda p: (p.step, p.path))

    def difference(self, a: Point, b: Point) -> dict:
        key = (a.fingerprint, b.fingerprint)
        if key not in self._diffs:
            self._diffs[key] = paired_difference(a, b, self.suites)
        return self._diffs[key]

    def _before(self, point: Point) -> Point | None:
        earlier = [p for p in self.points if p.step < point.step]
        return earlier[-1] if earlier else None

    def vs_previous(self, point: Point) -> tuple[Point, dict] | None:
        prev = self._before(point)
        return (prev, self.difference(prev, point)) if prev is not None else None

    def vs_first(self, point: Point) -> tuple[Point, dict] | None:
        first = self.points[0] if self.points else None
        if first is None or first.step >= point.step:
            return None
        return first, self.difference(first, point)

    def no_gain_since(self) -> int | None:
        """The step S of "no gain since step S", or None (too few checkpoints, or a significant gain)."""
        k = self.no_gain_after
        if k < 1 or len(self.points) < k + 1:
            return None
        ref = self.points[-(k + 1)]
        if any(gains(self.difference(ref, p)) for p in self.points[-k:]):
            return None
        return ref.step


# ---------------------------------------------------------------------------------------------- text


def _signed(d: dict) -> str:
    ci = f" [{d['ci_low']:+.1f}, {d['ci_high']:+.1f}]" if d["ci_low"] is not None else ""
    return f"{d['diff']:+.1f}{ci}{'*' if d['significant'] else ''}"


def _diff_text(diff: dict) -> str:
    parts = []
    for suite, per in diff.items():
        cells = "  ".join(f"{format_length(L)} {_signed(d)}" for L, d in per.items())
        parts.append(f"{suite} {cells}" if len(diff) > 1 else cells)
    return " · ".join(parts) or "no shared samples"


def _tokens(n: int | None) -> str:
    if n is None:
        return ""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f" · {n / size:.3g}{unit} tokens"
    return f" · {n} tokens"


def point_lines(curve: Curve, point: Point) -> list[str]:
    """What the follower prints for a checkpoint: its scores, then its differences."""
    name = "/".join(point.path.rstrip("/").split("/")[-2:])  # run/ckpt-N: followers of two runs print together
    head = []
    for suite, s in point.suites.items():
        cells = "  ".join(f"{format_length(L)} {v:.1f}" for L, v in sorted(s["per_length"].items()))
        avg = f"  avg {s['avg']:.1f}" if s["avg"] is not None else ""
        eff = s["effective_length"]["label"]
        eff_text = f" · effective length {eff}" if eff not in (None, "n/a") and not s["perplexity"] else ""
        head.append(f"{suite}: {cells}{avg}{eff_text}")
    d = point.degenerate or {}
    bad = [f"{k.replace('_', ' ')} {100 * d[k]:.0f}%" for k in ("empty", "at_max", "repeat") if d.get(k)]
    lines = [f"{name} (step {point.step}{_tokens(point.train_tokens)}): " + " | ".join(head)]
    if bad:
        lines[0] += " · degenerate: " + ", ".join(bad)
    prev, first = curve.vs_previous(point), curve.vs_first(point)
    if prev is not None:
        lines.append(f"  vs step {prev[0].step} (previous): {_diff_text(prev[1])}")
    if first is not None and (prev is None or first[0].step != prev[0].step):
        lines.append(f"  vs step {first[0].step} (first): {_diff_text(first[1])}")
    return lines


def no_gain_line(curve: Curve) -> str | None:
    since = curve.no_gain_since()
    if since is None:
        return None
    later = ", ".join(str(p.step) for p in curve.points[-curve.no_gain_after :])
    return (
        f"no gain since step {since}: checkpoints {later} are not significantly above it at any length "
        "(95% paired intervals)"
    )


# ---------------------------------------------------------------------------------------------- file


def _diff_json(diff: dict) -> dict:
    return {s: {str(L): d for L, d in per.items()} for s, per in diff.items()}


def history(curve: Curve, run_dir: str, present: set[str]) -> dict:
    """follow.json: every point, its differences and the run's verdict (docs/following.md)."""
    rows = []
    for p in curve.points:
        prev, first = curve.vs_previous(p), curve.vs_first(p)
        rows.append(
            {
                "step": p.step,
                "path": p.path,
                "fingerprint": p.fingerprint,
                "present": p.path in present,
                "train_tokens": p.train_tokens,
                "suites": {
                    s: {**v, "per_length": {str(L): m for L, m in v["per_length"].items()}} for s, v in p.suites.items()
                },
                "degenerate": p.degenerate,
                "vs_previous": {"step": prev[0].step, "suites": _diff_json(prev[1])} if prev else None,
                "vs_first": {"step": first[0].step, "suites": _diff_json(first[1])} if first else None,
            }
        )
    return {
        "schema_version": 1,
        "run_dir": run_dir,
        "threshold": curve.threshold,
        "intervals": dict(stats.METHOD),
        "no_gain_after": curve.no_gain_after,
        "no_gain_since": curve.no_gain_since(),
        "checkpoints": rows,
    }


def log_row(point: Point) -> dict:
    """The point as one row of the training run's logs (flat numeric fields, tags for TensorBoard):
    eval/<suite>/<length>, eval/<suite>/avg, eval/<suite>/effective_length (0: below the first
    length), eval/degenerate/<kind>, eval/train_tokens."""
    row: dict = {
        "step": point.step,
        "eval_checkpoint": point.path.rstrip("/").split("/")[-1],
        "eval_fingerprint": point.fingerprint,
    }
    for suite, s in point.suites.items():
        for L, v in sorted(s["per_length"].items()):
            row[f"eval/{suite}/{L}"] = v
        if s["avg"] is not None:
            row[f"eval/{suite}/avg"] = s["avg"]
        if s["effective_length"]["label"] not in (None, "n/a") and not s["perplexity"]:
            row[f"eval/{suite}/effective_length"] = s["effective_length"]["value"] or 0
    for kind in ("empty", "at_max", "repeat"):
        if point.degenerate and point.degenerate.get(kind) is not None:
            row[f"eval/degenerate/{kind}"] = point.degenerate[kind]
    if point.train_tokens is not None:
        row["eval/train_tokens"] = point.train_tokens
    return row
