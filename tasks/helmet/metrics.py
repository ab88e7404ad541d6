"""HELMET's metrics (princeton-nlp/HELMET at 4526dfb: utils.py, data.py post_process functions,
eval_alce.py), written here and checked against the reference's functions on shared predictions
(tests/helmet/test_helmet_metrics.py pins the values the reference computed).

Per sample, in [0, 1]:
  substring_exact_match  normalised answer is a substring of the normalised prediction (SubEM:
                         RAG, JSON KV); max over answers, and max of the raw and the parsed output
  ruler_recall           share of answers found, case-insensitive (HELMET's RULER subsets)
  ndcg_at_10             trec_eval's ndcg_cut_10 of the parsed ranking against the shown passages'
                         labels (MS MARCO re-ranking), as pytrec_eval computes it
  str_em                 ASQA: share of qa_pairs with a short answer present in the output
  qampari_rec_top5       QAMPARI: answers found among the comma-split output, capped at 5
The normalisation is SQuAD's (lower, drop punctuation, drop articles, collapse whitespace), the
same function LongBench uses.
"""

from __future__ import annotations

import math
import re

from tasks.longbench.metrics import normalize_answer


def substring_exact_match(prediction: str, answers) -> float:
    """utils.substring_exact_match_score, max over the answers (a list, or a list of lists)."""
    flat = _flat(answers)
    pred = normalize_answer(prediction)
    return float(max(normalize_answer(a) in pred for a in flat))


def exact_match(prediction: str, answers) -> float:
    pred = normalize_answer(prediction)
    return float(max(normalize_answer(a) == pred for a in _flat(answers)))


def _flat(answers) -> list[str]:
    if isinstance(answers, str):
        return [answers]
    answers = list(answers)
    if answers and isinstance(answers[0], (list, tuple)):
        return [a for group in answers for a in group]
    return answers


def rouge_l_f1(prediction: str, answers) -> float:
    """utils.calculate_metrics' rougeL_f1: rouge_score's ROUGE-L F (Porter stemmer), max over answers."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return max(scorer.score(target=a, prediction=prediction)["rougeL"].fmeasure for a in _flat(answers))


def parse_output(output: str, prefix: str = "Answer:") -> str | None:
    """utils.parse_output: the text after `prefix` on its line, else the first line."""
    patterns = [re.compile(f"(?:{prefix})(.*)(?:\n|$)", flags=re.IGNORECASE), re.compile(r"(?:^)(.*)(?:\n|$)")]
    for pat in patterns:
        m = pat.search(output)
        if m is not None:
            return re.sub(f"^{re.escape(prefix)}", "", m[1].strip(), flags=re.IGNORECASE).strip()
    return None


def best_of_raw_and_parsed(metric, output: str, answers, prefix: str = "Answer:") -> float:
    """data.default_post_process: the metric on the output and on its parsed answer, the max."""
    score = metric(output, answers)
    parsed = parse_output(output, prefix)
    return max(score, metric(parsed, answers)) if parsed is not None else score


def ruler_recall(output: str, answers) -> float:
    """data.load_ruler's post_process: share of answers found, case-insensitive, no parsing."""
    answers = list(answers)
    return sum(a.lower() in output.lower() for a in answers) / len(answers)


def parse_rankings(output: str) -> dict[str, int]:
    """utils.parse_rankings: the longest 'a > b > c' run of integers; {id: len - position}."""
    output = re.sub(r"[\[\]:]", "", output)
    output = output.lower().replace("id", "")
    longest = ""
    for m in re.finditer(r"(\d+)(?:\s*>\s*(\d+))*", output):
        if len(m.group(0)) > len(longest):
            longest = m.group(0)
    if longest:
        rankings = [n.strip() for n in longest.split(">") if n.strip().isdigit()]
    else:
        rankings = [output]
    results: dict[str, int] = {}
    for i, rank in enumerate(rankings):
        if rank not in results:
            results[rank] = len(rankings) - i
    return results


def ndcg_at_k(run: dict[str, float], qrels: dict[str, int], k: int = 10) -> float:
    """trec_eval's ndcg_cut.k (what pytrec_eval's "ndcg_cut_10" returns): the run's documents
    sorted by score, ties broken by document id in descending order; gain = relevance label,
    discount log2(rank + 1); normalised by the ideal ordering of the judged labels. Documents of
    the run that are not judged gain 0; 0 when no judged document is relevant."""
    ranked = sorted(run.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:k]
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(i + 2) for i, (doc, _) in enumerate(ranked))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def remove_citations(sent: str) -> str:
    """utils.remove_citations: drop "[n" markers, " |" and "]"."""
    return re.sub(r"\[\d+", "", re.sub(r" \[\d+", "", sent)).replace(" |", "").replace("]", "")


def alce_clean(output: str) -> str:
    """eval_alce.main's clean-up before any metric: newlines to spaces, <|im_end|> dropped."""
    return re.sub(r"\n+", " ", output).replace("<|im_end|>", "")


def str_em(output: str, qa_pairs) -> float:
    """eval_alce.compute_str_em for one item (output already cleaned, citations removed)."""
    found = []
    for pair in qa_pairs:
        norm = normalize_answer(output)
        found.append(any(normalize_answer(a) in norm for a in pair["short_answers"]))
    return sum(found) / len(found) if found else 0.0


def qampari_scores(output: str, answers) -> dict[str, float]:
    """eval_alce.compute_qampari_f1 for one item (cot=False): precision, recall, recall@5, F1s."""
    preds = [normalize_answer(x.strip()) for x in output.rstrip().rstrip(".").rstrip(",").split(",")]
    preds = [p for p in preds if len(p) > 0]
    groups = [[normalize_answer(x) for x in group] for group in answers]
    flat = [a for g in groups for a in g]
    prec = sum(p in flat for p in preds) / len(preds) if preds else 0.0
    hits = sum(any(x in preds for x in g) for g in groups)
    rec = hits / len(groups)
    rec5 = min(5, hits) / min(5, len(groups))
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    f1_5 = 2 * prec * rec5 / (prec + rec5) if prec + rec5 else 0.0
    return {
        "qampari_prec": prec,
        "qampari_rec": rec,
        "qampari_rec_top5": rec5,
        "qampari_f1": f1,
        "qampari_f1_top5": f1_5,
    }


def citation_refs(sentence: str) -> list[int]:
    """The 0-based document ids a sentence cites ("[3]" cites document 2), as eval_alce reads them."""
    return [int(r[1:]) - 1 for r in re.findall(r"\[\d+", sentence)]
