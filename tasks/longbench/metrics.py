"""LongBench v1 metrics, with LongBench/metrics.py's normalisation and quirks kept on purpose.

Every function takes (prediction, ground_truth, **kwargs) and returns a float in [0, 1]; a
sample's score is the max over its `answers` (see `score_sample`), a task's score is the mean.
Quirks that move numbers and are kept so results compare with published LongBench tables:
  - classification_score removes matched class names from a list while iterating over it
    (so of two adjacent names that are substrings of the answer only the first is removed);
  - rouge_score uses the `rouge` package (summary-level ROUGE-L over "."-split sentences,
    unique-word counts) and scores 0 when that package raises (empty text, very long texts);
  - code_sim_score keeps the first line without `, # or //, scored with fuzzywuzzy's ratio
    (difflib backend, as the reference's requirements install no python-Levenshtein);
  - the few-shot tasks (trec, triviaqa, samsum, lsht) are cut to their first line first.
jieba, rouge and fuzzywuzzy are imported on first use: jieba takes a second to load its dictionary.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

from tasks.longbench.prompts import FIRST_LINE_TASKS

_CN_PUNCTUATION = "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
_EN_PUNCT = set(string.punctuation)
_ALL_PUNCT = set(string.punctuation + _CN_PUNCTUATION)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower, drop punctuation, drop articles, collapse whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _EN_PUNCT)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def normalize_zh_answer(s: str) -> str:
    """Lower, drop English and Chinese punctuation, remove all whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _ALL_PUNCT)
    return "".join(s.split())


@lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # its "Building prefix dict" banner is noise in our logs
    return jieba


def _cut(text: str) -> list[str]:
    return list(_jieba().cut(text, cut_all=False))


def count_score(prediction: str, ground_truth, **kwargs) -> float:
    numbers = re.findall(r"\d+", prediction)
    right = sum(1 for n in numbers if str(n) == str(ground_truth))
    return 0.0 if not numbers else float(right / len(numbers))


def _retrieval(prediction: str, ground_truth: str, pattern: str) -> float:
    ground_truth_id = re.findall(pattern, ground_truth)[0]
    numbers = re.findall(r"\d+", prediction)
    right = sum(1 for n in numbers if str(n) == str(ground_truth_id))
    return 0.0 if not numbers else float(right / len(numbers))


def retrieval_score(prediction: str, ground_truth: str, **kwargs) -> float:
    return _retrieval(prediction, ground_truth, r"Paragraph (\d+)")


def retrieval_zh_score(prediction: str, ground_truth: str, **kwargs) -> float:
    return _retrieval(prediction, ground_truth, r"段落(\d+)")


@lru_cache(maxsize=1)
def _fuzz():
    import warnings

    with warnings.catch_warnings():  # the difflib backend is the reference's; its warning is noise
        warnings.simplefilter("ignore")
        from fuzzywuzzy import fuzz
    return fuzz


def code_sim_score(prediction: str, ground_truth: str, **kwargs) -> float:
    fuzz = _fuzz()

    first = ""
    for line in prediction.lstrip("\n").split("\n"):
        if "`" not in line and "#" not in line and "//" not in line:
            first = line
            break
    return fuzz.ratio(first, ground_truth) / 100


def classification_score(prediction: str, ground_truth: str, **kwargs) -> float:
    matches = [c for c in kwargs["all_classes"] if c in prediction]
    # The reference removes from the list it iterates over; a copy would change scores.
    for term in matches:
        if term in ground_truth and term != ground_truth:
            matches.remove(term)
    return 1.0 / len(matches) if ground_truth in matches else 0.0


def rouge_score(prediction: str, ground_truth: str, **kwargs) -> float:
    from rouge import Rouge

    try:
        scores = Rouge().get_scores([prediction], [ground_truth], avg=True)
    except Exception:  # the reference's bare except: empty or pathological text scores 0  # noqa: BLE001
        return 0.0
    return scores["rouge-l"]["f"]


def rouge_zh_score(prediction: str, ground_truth: str, **kwargs) -> float:
    return rouge_score(" ".join(_cut(prediction)), " ".join(_cut(ground_truth)))


def f1_score(prediction: list[str], ground_truth: list[str]) -> float:
    common = Counter(prediction) & Counter(ground_truth)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction)
    recall = num_same / len(ground_truth)
    return (2 * precision * recall) / (precision + recall)


def qa_f1_score(prediction: str, ground_truth: str, **kwargs) -> float:
    return f1_score(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def qa_f1_zh_score(prediction: str, ground_truth: str, **kwargs) -> float:
    pred = [t for t in (normalize_zh_answer(x) for x in _cut(prediction)) if t]
    gold = [t for t in (normalize_zh_answer(x) for x in _cut(ground_truth)) if t]
    return f1_score(pred, gold)


METRICS: dict[str, Callable[..., float]] = {
    "qa_f1": qa_f1_score,
    "qa_f1_zh": qa_f1_zh_score,
    "rouge": rouge_score,
    "rouge_zh": rouge_zh_score,
    "classification": classification_score,
    "retrieval": retrieval_score,
    "retrieval_zh": retrieval_zh_score,
    "count": count_score,
    "code_sim": code_sim_score,
}

# LongBench/eval.py dataset2metric, by metric name.
DATASET2METRIC: dict[str, str] = {
    "narrativeqa": "qa_f1",
    "qasper": "qa_f1",
    "multifieldqa_en": "qa_f1",
    "multifieldqa_zh": "qa_f1_zh",
    "hotpotqa": "qa_f1",
    "2wikimqa": "qa_f1",
    "musique": "qa_f1",
    "dureader": "rouge_zh",
    "gov_report": "rouge",
    "qmsum": "rouge",
    "multi_news": "rouge",
    "vcsum": "rouge_zh",
    "trec": "classification",
    "triviaqa": "qa_f1",
    "samsum": "rouge",
    "lsht": "classification",
    "passage_retrieval_en": "retrieval",
    "passage_count": "count",
    "passage_retrieval_zh": "retrieval_zh",
    "lcc": "code_sim",
    "repobench-p": "code_sim",
}


def first_line(prediction: str) -> str:
    """eval.py's cut for the few-shot tasks: strip leading newlines, keep the first line."""
    return prediction.lstrip("\n").split("\n")[0]


def score_sample(dataset: str, prediction: str, answers: list[str], all_classes) -> float:
    """eval.py's per-sample score: max over the answers (0 when all score 0)."""
    if dataset in FIRST_LINE_TASKS:
        prediction = first_line(prediction)
    metric = METRICS[DATASET2METRIC[dataset]]
    score = 0.0
    for gt in answers:
        score = max(score, metric(prediction, gt, all_classes=all_classes))
    return float(score)
