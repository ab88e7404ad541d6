"""RULER metrics against hand-checked cases and the reference formulas."""

import pytest

from tasks.metrics import postprocess, string_match_all, string_match_part, task_score


def ref_string_match_all(preds, refs):  # NVIDIA/RULER scripts/eval/synthetic/constants.py, verbatim
    score = (
        sum(
            [sum([1.0 if r.lower() in pred.lower() else 0.0 for r in ref]) / len(ref) for pred, ref in zip(preds, refs)]
        )
        / len(preds)
        * 100
    )
    return round(score, 2)


def ref_string_match_part(preds, refs):
    score = (
        sum([max([1.0 if r.lower() in pred.lower() else 0.0 for r in ref]) for pred, ref in zip(preds, refs)])
        / len(preds)
        * 100
    )
    return round(score, 2)


def test_postprocess_replaces_control_characters():
    assert postprocess("  \t 1234567\x00and\x1fmore \n ") == "1234567\nand\nmore"
    assert postprocess("\x07") == ""


def test_string_match_all_hand_checked():
    assert string_match_all(" 1234567.", ["1234567"]) == 1.0
    assert string_match_all("1234567 and 7654321", ["1234567", "7654321", "1111111", "2222222"]) == 0.5
    assert string_match_all("ABC", ["abc"]) == 1.0  # case-insensitive
    assert string_match_all("12345678", ["1234567"]) == 1.0  # substring false positive, as RULER
    assert string_match_all("", ["a"]) == 0.0


def test_string_match_part_hand_checked():
    assert string_match_part("It was Denver Broncos.", ["Denver Broncos", "Broncos"]) == 1.0
    assert string_match_part("Carolina", ["Denver Broncos", "Broncos"]) == 0.0
    assert string_match_part("the islands", ["is"]) == 1.0  # substring false positive, as RULER


def test_task_score_equals_reference():
    preds = ["a b", "x", "1234567 76543", "The answer: Paris\x00"]
    refs = [["a", "b", "c"], ["y"], ["1234567", "7654321"], ["paris"]]
    assert task_score("string_match_all", preds, refs) == ref_string_match_all(preds, refs)
    assert task_score("string_match_part", preds, refs) == ref_string_match_part(preds, refs)
    assert task_score("string_match_all", preds, refs) == pytest.approx((2 / 3 + 0 + 0.5 + 1) / 4 * 100, abs=0.01)
