"""Hand-built results.json fixtures (docs/contracts.md, "Aggregated results").

Scores are drawn per (task, length, step) from a seeded RNG; `raw` keeps them so tests can check
the page against a brute-force recomputation rather than against the fixture's own aggregates.
"""

from __future__ import annotations

import json
import random
import statistics

import pytest

from tasks.ruler import RULER_TASKS

# Schema-2 runs with per-sample blocks (paired differences, heatmaps), shared as fixtures.
from .paired_fixtures import paired_board, paired_dir, paired_site  # noqa: F401

LENGTHS = [4096, 8192, 16384, 32768, 65536, 131072]
STEPS = [1960, 1970, 1980, 1990, 2000]
LB_CATEGORIES = {
    "LongBench ICL": ["trec", "triviaqa", "samsum", "lsht"],
    "LongBench Code Completion": ["lcc", "repobench-p"],
}
XSS = "<script>alert(1)</script>"
THRESHOLD = 85.6


def stats(values: list[float], steps: list[int], **extra) -> dict:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "steps": list(steps),
        "per_step": {str(s): v for s, v in zip(steps, values)},
        **extra,
    }


def eff_length(per_len_mean: dict[int, float], threshold: float):
    value = None
    for L in sorted(per_len_mean):
        if per_len_mean[L] <= threshold:
            break
        value = L
    return value


def suite_from_raw(
    raw: dict,
    tasks: list[str],
    evaluated: list[str],
    lengths: list[int],
    steps: list[int],
    unavailable=None,
    excluded=None,
    categories=None,
    threshold=THRESHOLD,
) -> dict:
    """raw[task][length][step] -> the contract's suite block (within-checkpoint averages first)."""
    per_task = {
        t: {str(L): stats([raw[t][L][s] for s in steps], steps, num_samples=100) for L in lengths} for t in evaluated
    }
    per_length, by_len_step = {}, {}
    for L in lengths:
        vals = [statistics.fmean(raw[t][L][s] for t in evaluated) for s in steps]
        by_len_step[L] = vals
        per_length[str(L)] = stats(vals, steps, tasks_covered=len(evaluated), tasks_total=len(tasks))
    n = len(lengths)
    avg = [statistics.fmean(by_len_step[L][i] for L in lengths) for i in range(len(steps))]
    inc = [
        sum((j + 1) * by_len_step[L][i] for j, L in enumerate(lengths)) / sum(range(1, n + 1))
        for i in range(len(steps))
    ]
    dec = [
        sum((n - j) * by_len_step[L][i] for j, L in enumerate(lengths)) / sum(range(1, n + 1))
        for i in range(len(steps))
    ]
    value = eff_length({L: per_length[str(L)]["mean"] for L in lengths}, threshold)
    from harness.core.lengths import format_length

    summary = {
        "avg": stats(avg, steps),
        "wavg_inc": stats(inc, steps),
        "wavg_dec": stats(dec, steps),
        "effective_length": {
            "threshold": threshold,
            "value": value,
            "label": format_length(value) if value else "below the first length",
        },
        "tasks_covered": len(evaluated),
        "tasks_total": len(tasks),
    }
    out = {
        "tasks": tasks,
        "evaluated": evaluated,
        "excluded": excluded or [],
        "unavailable": unavailable or {},
        "lengths": lengths,
        "per_task": per_task,
        "per_length": per_length,
        "summary": summary,
    }
    if categories:
        out["categories"] = {
            cat: {str(L): stats([statistics.fmean(raw[t][L][s] for t in ts) for s in steps], steps) for L in lengths}
            for cat, ts in categories.items()
        }
    return out


def make_run(
    name: str,
    seed: int,
    base: float,
    *,
    mode="full",
    lengths=LENGTHS,
    steps=STEPS,
    drop=(),
    unavailable=None,
    longbench=True,
    short=True,
):
    rng = random.Random(seed)
    # Scores fall with length, like real RULER curves, and jitter between checkpoints (Figure 4).
    raw_ruler = {
        t: {
            L: {
                s: max(0.0, min(100.0, base - 6 * i + rng.uniform(-3, 3) - (5 if t.startswith("qa") else 0)))
                for s in steps
            }
            for i, L in enumerate(lengths)
        }
        for t in RULER_TASKS
    }
    evaluated = [t for t in RULER_TASKS if t not in drop]
    suites = {"ruler": suite_from_raw(raw_ruler, RULER_TASKS, evaluated, list(lengths), steps, unavailable=unavailable)}
    raw = {"ruler": raw_ruler}
    if longbench:
        lb_tasks = [t for ts in LB_CATEGORIES.values() for t in ts]
        raw_lb = {t: {32768: {s: rng.uniform(30, 70) for s in steps}} for t in lb_tasks}
        suites["longbench"] = suite_from_raw(raw_lb, lb_tasks, lb_tasks, [32768], steps, categories=LB_CATEGORIES)
        raw["longbench"] = raw_lb
    if short:
        raw_short = {
            "mmlu": {4096: {s: rng.uniform(35, 45) for s in steps}},
            "hellaswag": {4096: {s: rng.uniform(65, 72) for s in steps}},
        }
        suites["short"] = suite_from_raw(raw_short, ["mmlu", "hellaswag"], ["mmlu", "hellaswag"], [4096], steps)
        raw["short"] = raw_short
    data = {
        "schema_version": 1,
        "run": {
            "name": name,
            "model": f"runs/{mode}",
            "mode": mode,
            "checkpoints": [
                {"path": f"runs/{mode}/ckpt-{s}", "step": s, "fingerprint": f"fp{seed}-{s}", "training": {"mode": mode}}
                for s in steps
            ],
        },
        "provenance": {
            "package_version": "0.1.0",
            "git_hash": "abc123",
            "backend": "hf",
            "dtype": "bfloat16",
            "batch_size": 8,
            "max_model_len": 131072,
            "rope_theta": None,
            "rope_scaling": None,
            "template": "none",
            "truncation": "none",
            "tokenizer": "tokfp",
            "dataset_hashes": {t: f"h-{t}" for t in evaluated},
            "seed": 42,
            "lm_eval_version": None,
            "created": "2026-11-22T12:00:00Z",
        },
        "suites": suites,
    }
    return data, raw


@pytest.fixture(scope="session")
def runs_data():
    """name -> (results dict, raw scores)."""
    unavailable = {
        "qa_1": "SQuAD v2 dev not found: pass --squad PATH",
        "qa_2": "HotpotQA dev not found: pass --hotpotqa PATH",
    }
    out = {
        "full": make_run("full", 1, 88.0, mode="full"),
        "anchor": make_run("anchor", 2, 93.0, mode="anchor"),
        "anchor-11of13": make_run(
            "anchor-11of13", 3, 92.0, mode="anchor", drop=("qa_1", "qa_2"), unavailable=unavailable
        ),
        "intra-doc-short": make_run(
            "intra-doc-short", 4, 90.0, mode="intra-doc", lengths=LENGTHS[:4], longbench=False, short=False
        ),
        XSS: make_run(XSS, 5, 80.0, mode='"><img src=x onerror=alert(2)>', longbench=False),
    }
    return out


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory, runs_data):
    """One run directory per run, each holding results.json; returns {name: dir}."""
    root = tmp_path_factory.mktemp("results")
    dirs = {}
    for i, (name, (data, _)) in enumerate(runs_data.items()):
        d = root / f"run{i}"
        d.mkdir()
        (d / "results.json").write_text(json.dumps(data), encoding="utf-8")
        dirs[name] = d
    return dirs


@pytest.fixture(scope="session")
def board(results_dir):
    from leaderboards.build import build, load_runs

    return build(load_runs(list(results_dir.values())), baseline="full")


@pytest.fixture(scope="session")
def site(tmp_path_factory, results_dir):
    """The CLI's output directory for all fixture runs, baseline 'full'."""
    from harness.cli import main

    out = tmp_path_factory.mktemp("site")
    assert (
        main(
            [
                "leaderboard",
                *map(str, results_dir.values()),
                "--out",
                str(out),
                "--baseline",
                "full",
                "--title",
                "Fixture leaderboard",
            ]
        )
        == 0
    )
    return out
