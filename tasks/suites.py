"""Suites that span families, and the category table the aggregator reads.

    harness eval --suite paper ...        RULER (13) + LongBench (21) + MMLU + HellaSwag
    harness eval --suite paper --exclude niah_multikey_3,cwe ...   the paper's LLaMA-2 choice

The paper suite is the paper's table and stays so. The benchmarks researchers report beside it
run as suites of their own next to it (e.g. `--suite longbench-v2`, `--suite babilong --lengths
4k-128k`), each reported as its own column group.

`suite_categories(name)` gives {category: [tasks]} for suites whose report groups tasks into
categories (a category's score is the unweighted mean of its tasks); {} for the others. In "paper"
LongBench's few-shot category is shown as "LongBench ICL", as in the paper's table.
"""

from __future__ import annotations

from tasks.graphwalks import SUITE_CATEGORIES as _GRAPHWALKS_CATEGORIES
from tasks.helmet.suite import CATEGORIES as _HELMET_CATEGORIES
from tasks.helmet.suite import NOJUDGE_CATEGORIES as _HELMET_NOJUDGE_CATEGORIES
from tasks.longbench.prompts import DATASETS as LONGBENCH_TASKS
from tasks.longbench.tasks import SUITE_CATEGORIES as _LONGBENCH_CATEGORIES
from tasks.longbench_v2.tasks import SUITE_CATEGORIES as _LONGBENCH_V2_CATEGORIES
from tasks.registry import register_suite
from tasks.ruler import RULER_TASKS  # defined once, by the family that registers them

SHORT_TASKS = ["mmlu", "hellaswag"]
PAPER_TASKS = RULER_TASKS + list(LONGBENCH_TASKS) + SHORT_TASKS

_CATEGORIES: dict[str, dict[str, list[str]]] = {
    **_LONGBENCH_CATEGORIES,
    **_LONGBENCH_V2_CATEGORIES,
    **_GRAPHWALKS_CATEGORIES,
    "helmet": dict(_HELMET_CATEGORIES),
    "helmet-nojudge": {c: list(ts) for c, ts in _HELMET_NOJUDGE_CATEGORIES.items()},
    "paper": {
        "RULER": list(RULER_TASKS),
        **_LONGBENCH_CATEGORIES["longbench"],
        "MMLU": ["mmlu"],
        "HellaSwag": ["hellaswag"],
    },
}


# Suites whose averages (suite and categories) pool samples: the mean over the samples of their tasks,
# each task weighted by its number of samples, instead of the unweighted mean over tasks. LongBench
# v2 splits its 503 questions into (difficulty, length) cells; its reference reports accuracy over
# questions (result.py), not a mean over cells. GraphWalks' group score is lm-eval's weight_by_size.
_SAMPLE_WEIGHTED = set(_LONGBENCH_V2_CATEGORIES) | set(_GRAPHWALKS_CATEGORIES)


def suite_categories(name: str) -> dict[str, list[str]]:
    return {k: list(v) for k, v in _CATEGORIES.get(name, {}).items()}


def suite_weighting(name: str) -> str | None:
    """ "samples" for suites whose averages pool samples (see above), None for a mean over tasks."""
    return "samples" if name in _SAMPLE_WEIGHTED else None


register_suite(
    "paper",
    PAPER_TASKS,
    "The paper's table: RULER (13) + LongBench (21) + MMLU + HellaSwag",
    label="Paper suite",
    order=1,
)
