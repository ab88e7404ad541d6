"""LongBench metric parity: each metric against a small implementation written here from the
reference definitions (LongBench/metrics.py, eval.py), on hand-made and random predictions."""

from __future__ import annotations

import difflib
import random
import re

import pytest

from tasks.longbench import metrics as M

PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


# ---- independent references -------------------------------------------------------------
def ref_norm(s):
    s = "".join(c for c in s.lower() if c not in PUNCT)
    words = [w for w in s.split() if w not in ("a", "an", "the")]
    return words


def ref_f1(pred, gold):
    same = 0
    g = list(gold)
    for t in pred:
        if t in g:
            g.remove(t)
            same += 1
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def ref_qa_f1(pred, gold):
    return ref_f1(ref_norm(pred), ref_norm(gold))


def ref_classification(pred, gold, classes):
    found = [c for c in classes if c in pred]
    i = 0
    # The reference deletes from the list it is iterating: after a deletion the next element
    # slides into slot i and is skipped by the iterator.
    while i < len(found):
        term = found[i]
        if term in gold and term != gold:
            del found[found.index(term)]
        i += 1
    return 1.0 / len(found) if gold in found else 0.0


def ref_count(pred, gold):
    nums = re.findall(r"\d+", pred)
    return 0.0 if not nums else sum(n == str(gold) for n in nums) / len(nums)


def ref_code_sim(pred, gold):
    first = next((ln for ln in pred.lstrip("\n").split("\n") if not any(x in ln for x in ("`", "#", "//"))), "")
    if not first or not gold:
        return 0.0
    return round(100 * difflib.SequenceMatcher(None, first, gold).ratio()) / 100


def ref_lcs(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a)):
        for j in range(len(b)):
            t[i + 1][j + 1] = t[i][j] + 1 if a[i] == b[j] else max(t[i][j + 1], t[i + 1][j])
    return t[-1][-1]


def ref_rouge_l_one_sentence(pred, gold):
    """ROUGE-L F for texts without '.' and with distinct words (where summary level = plain LCS)."""
    h, r = pred.split(), gold.split()
    if not h or not r:
        return 0.0
    lcs = ref_lcs(h, r)
    p, rc = lcs / len(h), lcs / len(r)
    return 2 * p * rc / (p + rc + 1e-8)


# ---- hand-made cases ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "pred,gold,expected",
    [
        ("The Eiffel Tower!", "eiffel tower", 1.0),
        ("a cat sat", "the dog sat", 0.5),
        ("Paris, France.", "Paris", 2 / 3),
        ("", "x", 0.0),
        ("the a an", "the", 0.0),
    ],
)
def test_qa_f1_hand_made(pred, gold, expected):
    assert M.qa_f1_score(pred, gold) == pytest.approx(expected)
    assert ref_qa_f1(pred, gold) == pytest.approx(expected)


def test_classification_keeps_the_reference_quirk():
    # matches [A, B, ABC]; removing "A" makes the loop skip "B", so "B" stays: score 1/2, not 1.
    assert M.classification_score("ABC", "ABC", all_classes=["A", "B", "ABC"]) == 0.5
    assert M.classification_score("Location and Other", "Location", all_classes=["Location", "Other", "Person"]) == 0.5
    assert M.classification_score("nothing", "Location", all_classes=["Location"]) == 0.0


def test_count_retrieval_code_hand_made():
    assert M.count_score("There are 12 paragraphs, maybe 12 or 13", 12) == pytest.approx(2 / 3)
    assert M.count_score("no digits", 3) == 0.0
    assert M.retrieval_score("Paragraph 7", "Paragraph 7") == 1.0
    assert M.retrieval_score("Paragraph 7 or 8", "Paragraph 7") == 0.5
    assert M.retrieval_zh_score("段落3", "段落3") == 1.0
    assert M.code_sim_score("\n# comment\nx = foo(1)\n", "x = foo(1)") == 1.0
    assert M.code_sim_score("```python", "x") == 0.0  # no usable line -> empty -> 0


def test_rouge_hand_made_and_failure_is_zero():
    assert M.rouge_score("the cat sat on mat", "the cat lay on mat") == pytest.approx(
        ref_rouge_l_one_sentence("the cat sat on mat", "the cat lay on mat")
    )
    assert M.rouge_score("", "reference text") == 0.0  # the rouge package raises; the reference scores 0


def test_zh_metrics():
    import jieba

    def ref_zh(pred, gold):
        drop = PUNCT | set(
            "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
        )

        def toks(s):
            out = ["".join(c for c in t.lower() if c not in drop and not c.isspace()) for t in jieba.lcut(s)]
            return [t for t in out if t]

        return ref_f1(toks(pred), toks(gold))

    for pred, gold in [
        ("北京是中国的首都。", "北京"),
        ("答案：上海", "上海"),
        ("", "上海"),
        ("今天天气很好", "今天天气很好"),
    ]:
        assert M.qa_f1_zh_score(pred, gold) == pytest.approx(ref_zh(pred, gold))
    assert M.qa_f1_zh_score("北京是中国的首都。", "北京") == pytest.approx(1 / 3)
    assert M.rouge_zh_score("今天天气很好", "今天天气很好") == pytest.approx(1.0, abs=1e-6)


def test_score_sample_first_line_and_max_over_answers():
    # few-shot tasks: leading newlines stripped, first line kept
    assert M.score_sample("triviaqa", "\n\nParis\nQuestion: next", ["London", "Paris"], None) == 1.0
    # other tasks keep every line: the extra words lower the F1
    assert M.score_sample("hotpotqa", "Paris\nQuestion: next", ["Paris"], None) == pytest.approx(
        ref_qa_f1("Paris\nQuestion: next", "Paris")
    )
    assert M.score_sample("trec", "Type: Location\nOther", ["Location"], ["Location", "Other"]) == 1.0
    assert M.score_sample("passage_count", "3", ["4", "3"], None) == 1.0


# ---- random predictions ------------------------------------------------------------------
WORDS = ["the", "a", "cat", "Dog", "sat", "on", "mat", "an", "apple", "red,", "blue.", "tree", "x-ray", "42", "city"]


def test_random_predictions_match_references():
    rng = random.Random(1)
    classes = ["DESC", "ENTY", "ABBR", "HUM", "NUM", "LOC", "NU", "ES"]
    for _ in range(300):
        pred = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
        gold = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
        assert M.qa_f1_score(pred, gold) == pytest.approx(ref_qa_f1(pred, gold))
        cpred = " ".join(rng.choice(classes + ["foo"]) for _ in range(rng.randint(0, 4)))
        cgold = rng.choice(classes)
        assert M.classification_score(cpred, cgold, all_classes=classes) == pytest.approx(
            ref_classification(cpred, cgold, classes)
        )
        npred = " ".join(str(rng.randint(0, 5)) for _ in range(rng.randint(0, 4)))
        ngold = rng.randint(0, 5)
        assert M.count_score(npred, ngold) == pytest.approx(ref_count(npred, ngold))
        code = "\n".join(rng.choice(["x = 1", "# c", "y = foo(x)", "// z", "", "return x"]) for _ in range(3))
        cg = rng.choice(["x = 1", "y = foo(y)", "return y"])
        assert M.code_sim_score(code, cg) == pytest.approx(ref_code_sim(code, cg))
        vocab = [f"w{i}" for i in range(12)]
        h = " ".join(rng.sample(vocab, rng.randint(1, 8)))
        r = " ".join(rng.sample(vocab, rng.randint(1, 8)))
        assert M.rouge_score(h, r) == pytest.approx(ref_rouge_l_one_sentence(h, r), abs=1e-9)
