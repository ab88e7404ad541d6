"""Suite labels, order and "higher is better" come from the suites' own declarations
(tasks.registry.register_suite), and results are grouped by Task.family."""

from __future__ import annotations

import pytest

from harness.pipeline.results import _family
from leaderboards.labels import lower_is_better, suite_label, suite_rank
from tasks import registry


@pytest.fixture
def extra_suite():
    registry.all_suites()  # load the families first
    registry.register_suite("zz-loss", ["ppl"], "a test suite", label="Loss", higher_is_better=False, order=-1)
    yield "zz-loss"
    for table in (registry._SUITES, registry._SUITE_HELP, registry._SUITE_INFO):
        table.pop("zz-loss", None)


def test_declared_labels_and_order():
    assert [suite_label(s) for s in ("ruler", "longbench", "short", "icl", "ppl", "paper")] == [
        "RULER",
        "LongBench",
        "Short context",
        "ICL",
        "Perplexity",
        "Paper suite",
    ]
    # variants take their head suite's label; unknown names show themselves
    assert suite_label("ruler-llama2") == "RULER llama2" and suite_label("longbench-icl") == "LongBench ICL"
    assert suite_label("mystery") == "mystery"
    order = sorted(
        ["ppl", "short", "icl-natural", "longbench-e", "paper", "ruler-llama2", "ruler", "zzz"], key=suite_rank
    )
    assert order == ["ruler", "ruler-llama2", "paper", "longbench-e", "icl-natural", "short", "ppl", "zzz"]
    assert lower_is_better("ppl") and not lower_is_better("ruler") and not lower_is_better("mystery")


def test_a_new_suite_needs_only_its_declaration(extra_suite):
    assert suite_label(extra_suite) == "Loss" and lower_is_better(extra_suite)
    assert sorted(["ruler", extra_suite], key=suite_rank) == [extra_suite, "ruler"]


def test_family_is_the_tasks_declared_family():
    assert _family("niah_single_1") == "ruler" and _family("qasper") == "longbench"
    assert _family("icl_trec_coarse") == "icl" and _family("icl_trec_coarse_natural") == "icl-natural"
    assert _family("mmlu") == "short" and _family("ppl") == "ppl" and _family("no-such-task") == "other"
