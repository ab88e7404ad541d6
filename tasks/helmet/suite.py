"""The HELMET suite: its seven categories, as HELMET's scripts/collect_results.py averages them.

A category's score is the unweighted mean of its tasks (Cite: ASQA str_em, citation recall and
precision, and the same three for QAMPARI, as collect_results.py's custom_avgs lists them). The
headline is collect_results.py's "Ours" column: the mean of the 7 category means (not a mean over
the 25 tasks, which would weigh Cite's six scores six times Re-rank's one). The ICL category is
tasks.icl's HELMET ICL under helmet_icl_* names (family "helmet", so the suite reports as one).
"""

from __future__ import annotations

from tasks.helmet import icl_reference
from tasks.helmet.reference import ReferenceProtocol
from tasks.icl.tasks import DATASETS as ICL_DATASETS
from tasks.icl.tasks import TASKS as ICL_TASKS
from tasks.registry import Headline, register_suite, register_task


def _icl_alias(dataset: str):
    base = ICL_TASKS[f"icl_{dataset}"]

    def reference_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None):
        return icl_reference.sample(self, length, index, seed, tokenizer, budget)

    def score(self, prediction: str, sample) -> float:
        if sample.metadata.get("protocol") == "reference":
            return icl_reference.score(prediction, sample)
        return base.score(self, prediction, sample)

    # exact-length: tasks.icl's samples (its demo counts are HELMET's shots at 8K-128K, fitted to L);
    # reference: data.load_icl's items, demos and prompt (tasks.helmet.icl_reference)
    cls = type(
        f"Helmet_icl_{dataset}",
        (ReferenceProtocol, base),
        {
            "name": f"helmet_icl_{dataset}",
            "version": "2",  # 2: no stop at a newline under the reference protocol (released.RELEASED_STOP)
            "family": "helmet",
            "category": "ICL",
            "exact_sample": base.sample,
            "reference_sample": reference_sample,
            "score": score,
            "__doc__": f"HELMET ICL: {dataset} (tasks.icl).",
        },
    )
    return register_task(cls)


ICL = [_icl_alias(d).name for d in ICL_DATASETS]

CATEGORIES: dict[str, list[str]] = {
    "Recall": ["helmet_json_kv", "helmet_niah_mk_2", "helmet_niah_mk_3", "helmet_niah_mv"],
    "RAG": ["helmet_nq", "helmet_triviaqa", "helmet_hotpotqa", "helmet_popqa"],
    "Re-rank": ["helmet_msmarco"],
    "Cite": [
        "helmet_alce_asqa",
        "helmet_alce_asqa_citation_rec",
        "helmet_alce_asqa_citation_prec",
        "helmet_alce_qampari",
        "helmet_alce_qampari_citation_rec",
        "helmet_alce_qampari_citation_prec",
    ],
    "ICL": ICL,
    "LongQA": ["helmet_narrativeqa", "helmet_infbench_qa", "helmet_infbench_choice"],
    "Summ": ["helmet_infbench_sum", "helmet_multi_lexsum"],
}
JUDGED_TASKS = {"helmet_narrativeqa", "helmet_infbench_sum", "helmet_multi_lexsum"}
HELMET_TASKS = [t for ts in CATEGORIES.values() for t in ts]
NOJUDGE_TASKS = [t for t in HELMET_TASKS if t not in JUDGED_TASKS]
NOJUDGE_CATEGORIES = {
    c: [t for t in ts if t not in JUDGED_TASKS]
    for c, ts in CATEGORIES.items()
    if any(t not in JUDGED_TASKS for t in ts)
}

HEADLINE_LABEL = "mean of the 7 category means (HELMET's Avg)"

register_suite(
    "helmet",
    HELMET_TASKS,
    "HELMET: recall, RAG, re-ranking, citations, ICL, LongQA and summarization (judged: --judge-base-url); "
    "set HARNESS_HELMET offline",
    label="HELMET",
    order=8,
    headline=Headline(HEADLINE_LABEL, {"HELMET": CATEGORIES}),
)
# Without a judge the Summ category has no task left: the headline is still HELMET's (7 categories)
# and says that it covers 6 of them, rather than passing a 6-category mean off as HELMET's Avg.
register_suite(
    "helmet-nojudge",
    NOJUDGE_TASKS,
    "HELMET without the judged tasks (NarrativeQA, InfiniteBench Sum, Multi-LexSum)",
    headline=Headline(HEADLINE_LABEL, {"HELMET": CATEGORIES}),
)
