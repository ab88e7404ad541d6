"""The card's grader against an independent computation, and the card's bins and their counting."""

from __future__ import annotations

import random
import sys
import types

import pytest

from harness.core.errors import UserError
from tasks.mrcr import bins
from tasks.mrcr.grading import grade


def _longest(a: str, b: str, alo: int, ahi: int, blo: int, bhi: int) -> tuple[int, int, int]:
    """The longest common block, earliest in a, then earliest in b (difflib's documented tie rule)."""
    best = (alo, blo, 0)
    for i in range(alo, ahi):
        for j in range(blo, bhi):
            k = 0
            while i + k < ahi and j + k < bhi and a[i + k] == b[j + k]:
                k += 1
            if k > best[2]:
                best = (i, j, k)
    return best


def _matched(a: str, b: str, alo: int, ahi: int, blo: int, bhi: int) -> int:
    i, j, k = _longest(a, b, alo, ahi, blo, bhi)
    if not k:
        return 0
    return k + _matched(a, b, alo, i, blo, j) + _matched(a, b, i + k, ahi, j + k, bhi)


def brute_grade(response: str, answer: str, prefix: str) -> float:
    """The card's rule written out: the prefix gate, then Ratcliff-Obershelp's 2M/T (no junk: < 200 chars)."""
    if response[: len(prefix)] != prefix:
        return 0.0
    a, b = response[len(prefix) :], answer[len(prefix) :] if answer[: len(prefix)] == prefix else answer
    total = len(a) + len(b)
    return 2.0 * _matched(a, b, 0, len(a), 0, len(b)) / total if total else 1.0


def test_grade_matches_an_independent_computation():
    rng = random.Random(7)
    alphabet = "ab c\n\u00e9"
    for _ in range(400):
        prefix = "".join(rng.choice("XYZ12") for _ in range(rng.randint(1, 4)))
        answer = prefix + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        response = rng.choice([prefix + body, body, prefix[:-1] + body, " " + prefix + body, prefix])
        assert grade(response, answer, prefix) == pytest.approx(brute_grade(response, answer, prefix), abs=1e-15)


@pytest.mark.parametrize(
    ("response", "score"),
    [
        ("XYZhello", 1.0),  # exact
        ("hello", 0.0),  # prefix missing
        (" XYZhello", 0.0),  # whitespace before the prefix
        ("", 0.0),  # empty answer
        ("XYZ", 0.0),  # the prefix alone: nothing of "hello" matched
        ("XYZ hello", 2 * 5 / 11),  # whitespace after the prefix
        ("xyzhello", 0.0),  # the prefix is case-sensitive
    ],
)
def test_grade_edge_cases(response, score):
    assert grade(response, "XYZhello", "XYZ") == pytest.approx(score)


def test_grade_keeps_difflibs_junk_heuristic():
    """Past 200 characters difflib ignores popular characters: the card's score, not a plain 2M/T."""
    answer = "P" + "ab" * 150
    response = "P" + "ba" * 150
    from difflib import SequenceMatcher

    assert grade(response, answer, "P") == SequenceMatcher(None, "ba" * 150, "ab" * 150).ratio()
    assert grade(response, answer, "P") != pytest.approx(brute_grade(response, answer, "P"))


def test_bins_are_the_cards():
    """[4096, 8192], (8192, 16384], ..., (524288, 1048576]; under 4096: the first; past 1M: none."""
    assert bins.BINS == tuple(1 << p for p in range(13, 21))
    assert [bins.bin_of(n) for n in (1, 4096, 8192, 8193, 16384, 16385, 1048576, 1048577)] == [
        8192, 8192, 8192, 16384, 16384, 32768, 1048576, None,
    ]  # fmt: skip
    assert bins.bin_range(8192) == "[4096, 8192]" and bins.bin_range(16384) == "(8192, 16384]"


def test_item_tokens_counts_every_content_and_the_answer():
    msgs = [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "cde"}]
    assert bins.item_tokens(msgs, "fghi", len) == 2 + 3 + 4


def test_counting_is_announced_and_shown(monkeypatch, capsys):
    """openbench issue 24: counting every item up front looked like a stall. It says so first, and
    moves a bar item by item."""
    from harness.core import progress

    updates = []

    class Bar:
        def __init__(self, total, desc, unit, enabled=True, leave=False):
            updates.append(("open", total, desc))

        def update(self, n):
            updates.append(("update", n))

        def close(self):
            updates.append(("close",))

    monkeypatch.setattr(progress, "progress_bar", Bar)
    texts = [([{"role": "user", "content": "x" * k}], "y") for k in range(5)]
    assert bins.count_all(texts, len, "2needle.parquet") == [1, 2, 3, 4, 5]
    err = capsys.readouterr().err
    assert "counting o200k_base tokens of 5 2needle.parquet" in err
    assert updates[0] == ("open", 5, "MRCR bins (2needle.parquet)") and updates.count(("update", 1)) == 5
    assert updates[-1] == ("close",)


def test_no_tiktoken_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(UserError) as err:
        bins.reference_counter()
    assert "pip install tiktoken" in str(err.value) and "\n" not in str(err.value)


def test_reference_counter_is_o200k_base(monkeypatch):
    seen = []
    fake = types.ModuleType("tiktoken")

    class Enc:
        def encode(self, text, disallowed_special):
            assert disallowed_special == ()  # text that spells a special token counts as text
            return list(text)

    fake.get_encoding = lambda name: seen.append(name) or Enc()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    assert bins.reference_counter()("abc") == 3 and seen == ["o200k_base"]
