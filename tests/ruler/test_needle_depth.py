"""Needle depth metadata: every niah sample records where each needle sits (0-100% of the
haystack), checked by locating the needles in the rendered text."""

import pytest

from tasks.registry import get_task
from tasks.ruler.niah import NIAH_TASKS

NAMES = [cls.name for cls in NIAH_TASKS]


def _context(sample) -> str:
    # NIAH_TEMPLATE: "<instructions>\n{context}\n<question>"
    return sample.input.split("\n", 1)[1].rsplit("\n", 1)[0]


@pytest.mark.parametrize("name", NAMES)
def test_depths_match_the_rendered_text(name, bpe_tokenizer):
    task = get_task(name)
    for index in range(3):
        sample = task.sample(2048, index, 42, bpe_tokenizer)
        plan = task.build_plan(2048, index, 42, bpe_tokenizer)
        meta = sample.metadata
        n = meta["haystack_units"]
        depths = meta["needle_depths"]
        assert len(depths) == len(plan.needles) and all(0 <= d <= 100 for d in depths)
        context = _context(sample)
        for needle, depth in zip(plan.needles, depths):
            at = context.index(needle)
            earlier = [x for x in plan.needles if context.index(x) < at]
            if plan.cfg.haystack == "essay":  # units are words
                before = len(context[:at].split()) - sum(len(x.split()) for x in earlier)
            else:  # units are lines (noise lines or distractor needles)
                before = context[:at].count("\n") - len(earlier)
            assert depth == pytest.approx(100.0 * before / n, abs=0.006), (name, index)
        assert len(meta["answer_depths"]) == len(sample.references)
        for ref, d in zip(sample.references, meta["answer_depths"]):
            holder = [i for i, x in enumerate(plan.needles) if x.endswith(f" {ref}.")]
            assert holder and any(depths[i] == d for i in holder), (name, ref)


def test_depths_spread_over_the_haystack(bpe_tokenizer):
    """Over many samples the single needle visits shallow and deep positions alike."""
    task = get_task("niah_single_1")
    depths = [task.sample(1024, i, 7, bpe_tokenizer).metadata["answer_depths"][0] for i in range(30)]
    assert min(depths) < 30 and max(depths) > 70
