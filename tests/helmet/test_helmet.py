"""HELMET (no judge): prompts byte-compared with the reference's loaders, its metrics on shared
predictions, exact length fitting, missing data, and an end-to-end `harness eval`.

Expected values come from one run of princeton-nlp/HELMET at 4526dfb here (never in CI): its
data.py loaders (load_qa, load_msmarco_rerank, load_alce with the seed set as eval.py sets it and
datasets' shuffle for max_test_samples, load_ruler, load_json_kv) on the fixture folder of
tests/helmet/fixtures.py, and its metric code (utils.py calculate_metrics / parse_rankings /
calculate_retrieval_metrics with pytrec_eval, data.py post_process functions, eval_alce.py
compute_str_em / compute_qampari_f1 / compute_autoais with a stand-in NLI) on the predictions
below. Prompts are compared at a length where every passage fits (HELMET shows them all).
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from harness.core.errors import TaskUnavailable
from tasks.helmet import alce, metrics
from tasks.helmet.tasks import HelmetJsonKV, select_passages
from tasks.registry import all_suites, get_task
from tasks.suites import suite_categories

from .fixtures import write_helmet

# sha256 prefixes of prompt_template.format(**item) from HELMET's loaders, in item order
REFERENCE_PROMPTS = {
    "helmet_nq": [
        "537a862c8c891f398694a025",
        "ce4bcbb09bbfc2bc92e8dc96",
        "15d372e64cf6447632d6d2ff",
        "7adc1c73bf96be06bf27f239",
    ],
    "helmet_triviaqa": [
        "3c5dba3b4eee59d4b41ef44a",
        "8b1888983dd58f8a8bb26571",
        "c11363e920a963312eaf8de6",
        "da65294adae2c03c8ffbbbd4",
    ],
    "helmet_hotpotqa": [
        "c327dcef2a74c1513ba7bc75",
        "369b11c522bf17a2f7aecfa5",
        "f086d14ca59cd18dd9a7fcd8",
        "ae9437b65071609137cfc1d0",
    ],
    "helmet_popqa": ["da33d5b1fd79bf8f184b0266", "aeef76b08b1071df448ff70b", "79099de3c74dbe4b4cc238aa"],
    "helmet_msmarco": ["d341f323ec37e565d549bbbd", "4099043d78a909b49c671e5e", "1010ff43f5b9c9d232a598a0"],
    "helmet_alce_asqa": [
        "f05d38fadba37e0dd8d55919",
        "e973b102fee73390782d8593",
        "d022db0309c4055f1967e490",
        "dd76fae7a440e4d28ebffa8d",
    ],
    "helmet_alce_qampari": [
        "8b7bddbf8e699ecaac00ac2a",
        "cfcb257b3fec680264f850ea",
        "0b84eab3912bbec926f03047",
        "1a45627ab5cd4e5ae58aa7bd",
    ],
}
MSMARCO_GOLD = [
    "11 > 8 > 9 > 2 > 4 > 5 > 0 > 1 > 3 > 6 > 7 > 10",
    "1011 > 1001 > 1008 > 1000 > 1003 > 1007 > 1002 > 1004 > 1005 > 1006 > 1009 > 1010",
    "2004 > 2005 > 2006 > 2011 > 2009 > 2007 > 2008 > 2000 > 2001 > 2002 > 2003 > 2010",
]
# our samples (length, index 0) rebuilt by HELMET's load_ruler from their context/query: equal
RULER_SUBSETS = {
    ("helmet_niah_mk_2", 1024): "96d8888de694f50119d66ea6",
    ("helmet_niah_mk_3", 2048): "eca48be6fe8703821a1dd932",
    ("helmet_niah_mv", 2048): "4984a5108ea6f12166fa8899",
}
JSON_KV_PROMPT = "3e7a0d12cb9e50ac71bbda32"  # load_json_kv(shots=2) on the same pairs, demos and key


def _exact(name: str):
    """The task under the exact-length protocol (what these prompt tests pin)."""
    task = get_task(name)
    task.set_protocol("exact-length")
    return task


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def helmet_dir(tmp_path, monkeypatch):
    write_helmet(tmp_path)
    monkeypatch.setenv("HARNESS_HELMET", str(tmp_path))
    return tmp_path


def test_prompts_match_the_reference_loaders(helmet_dir, bpe_tokenizer):
    for name, shas in REFERENCE_PROMPTS.items():
        task = _exact(name)
        assert task.num_samples_available(0) == len(shas), name
        for i, sha in enumerate(shas):
            s = task.sample(32768, i, 42, bpe_tokenizer)
            assert _sha(s.prompt).startswith(sha), (name, i)
            if name == "helmet_msmarco":
                assert s.references == (MSMARCO_GOLD[i],)


def test_synthetic_recall_prompts(bpe_tokenizer):
    for (name, length), sha in RULER_SUBSETS.items():
        s = _exact(name).sample(length, 0, 42, bpe_tokenizer)
        assert _sha(s.prompt).startswith(sha), name
        assert s.answer_prefix.startswith("\nThe special magic") and s.num_tokens + s.max_new_tokens <= length
    pairs = [("aa-1", "v-1"), ("bb-2", "v-2"), ("cc-3", "v-3")]
    kv = HelmetJsonKV.render(pairs, pairs[:2], "cc-3") + "\nCorresponding value:"
    assert _sha(kv).startswith(JSON_KV_PROMPT)
    assert [
        _exact(n).max_new_tokens for n in ("helmet_niah_mk_2", "helmet_niah_mk_3", "helmet_niah_mv", "helmet_json_kv")
    ] == [50, 100, 50, 100]


def test_json_kv_fits_exactly(bpe_tokenizer):
    task = _exact("helmet_json_kv")
    for length in (1024, 2048):
        for index in range(6):
            s = task.sample(length, index, 42, bpe_tokenizer)
            assert s.num_tokens == len(bpe_tokenizer(s.prompt)["input_ids"]) and s.num_tokens + 100 <= length
            assert s.metadata["depth"] == index / 5 and s.references[0] in s.prompt
            assert s.prompt.count('": "') == s.metadata["num_kvs"]
    # one more pair would not fit: the 8K sample holds more pairs than the 1K one, deterministically
    a, b = task.sample(1024, 0, 42, bpe_tokenizer), task.sample(8192, 0, 42, bpe_tokenizer)
    assert b.metadata["num_kvs"] > 4 * a.metadata["num_kvs"]
    assert task.sample(1024, 0, 42, bpe_tokenizer) == a


def test_rag_fits_the_length_keeping_the_gold_passage(helmet_dir, bpe_tokenizer):
    task = _exact("helmet_nq")
    full = task.sample(32768, 0, 42, bpe_tokenizer)
    short_len = full.num_tokens - 150  # a few passages must go
    s = task.sample(short_len, 0, 42, bpe_tokenizer)
    assert 0 < s.metadata["passages"] < s.metadata["passages_available"] == 8
    assert s.num_tokens + 20 <= short_len and "Person" in s.input.split("\n\nQuestion:")[-2]  # gold kept
    assert s.metadata["stop"] == ["\n"] and s.answer_prefix == "\nAnswer:"


def test_select_passages_keeps_gold_depth():
    ctxs = [{"text": f"p{i}", "has_answer": i == 6} for i in range(10)]
    out = select_passages(ctxs, 4, ["x"])
    assert [c["text"] for c in out] == ["p0", "p1", "p6", "p2"]  # gold at 6/9 of the way -> slot 2 of 4
    assert select_passages(ctxs, 20, ["x"]) == ctxs
    plain = [{"text": "has ans" if i == 0 else f"q{i}"} for i in range(5)]  # no flag: the answer is searched
    assert [c["text"] for c in select_passages(plain, 2, ["ANS"])] == ["has ans", "q1"]


def test_metrics_match_the_reference():
    answers = ["Person1 Smith", "P. 1 Smith"]
    preds = [
        "Person1 Smith",
        " person1 smith.\nmore",
        "Answer: The founder was P. 1 Smith",
        "Smith",
        "",
        "Answer: nobody\nPerson1 Smith",
        "answer: Person1 Smithson",
    ]
    rag = [metrics.best_of_raw_and_parsed(metrics.substring_exact_match, "Answer:" + p, answers) for p in preds]
    assert rag == [1, 1, 1, 0, 0, 1, 1]
    kv = "5ea4c2d0-1111-4b7e-9a11-e6a2ea39a0e3"
    kvp = [" " + kv, ' "' + kv + '"', " 5ea4c2d0", "Key: x\nCorresponding value: " + kv, ""]
    got = [
        metrics.best_of_raw_and_parsed(
            metrics.substring_exact_match, "Corresponding value:" + p, [kv], "corresponding value:"
        )
        for p in kvp
    ]
    assert got == [1, 1, 0, 1, 0]
    sysmv = "The special magic numbers for q mentioned in the provided text are"
    rp = [" 1234567 and 7654321", " 1234567", " none", " 7654321, 1234567.", ""]
    assert [metrics.ruler_recall(sysmv + p, ["1234567", "7654321"]) for p in rp] == [1.0, 0.5, 0.0, 1.0, 0.0]
    labels = [3, 0, 1, 2, 0, 0, 1, 0, 0, 2, 0, 1]
    qrels = {str(i + 1): g for i, g in enumerate(labels)}
    rk = [
        " 1 > 4 > 10 > 3 > 7 > 12",
        " [ID: 4] > [ID: 1] > [ID: 2]",
        " ID3 > ID1 > ID2",
        " no idea",
        " 2 > 5 > 6 > 8 > 9 > 11 > 1",
        " 12 > 11 > 10 > 9 > 8 > 7 > 6 > 5 > 4 > 3 > 2 > 1",
        " 1 > 1 > 4",
        " 13 > 1 > 4",
    ]
    ndcg = [
        metrics.ndcg_at_k({k: float(v) for k, v in metrics.parse_rankings("Ranking:" + p).items()}, qrels) for p in rk
    ]
    # pytrec_eval's ndcg_cut_10, rounded to 5 decimals by HELMET's calculate_retrieval_metrics
    assert [round(x, 5) for x in ndcg] == [1.0, 0.60488, 0.4495, 0.0, 0.15539, 0.50459, 0.66223, 0.4495]
    assert metrics.parse_rankings("Ranking: no idea") == {"ranking no ea": 1}
    assert metrics.parse_rankings("Ranking: 1 > 1 > 4") == {"1": 3, "4": 1}
    qa_pairs = [
        {"question": "a?", "short_answers": ["River 1", "river one"]},
        {"question": "b?", "short_answers": ["Castle 1"]},
    ]
    ap = ["River 1 [1] and Castle 1 [2].", "The River 1\n\nis there [3]", "Nothing [1].", "castle 1 only"]
    clean = [metrics.remove_citations(metrics.alce_clean(p)) for p in ap]
    assert [metrics.str_em(c, qa_pairs) for c in clean] == [1.0, 0.5, 0.0, 0.5]
    assert [metrics.remove_citations(p) for p in ap] == [
        "River 1 and Castle 1.",
        "The River 1\n\nis there",
        "Nothing.",
        "castle 1 only",
    ]
    qans = [["River 1", "the river 1"], ["Castle 1"], ["Comet 1"], ["D"], ["E"], ["F"], ["G"]]
    qp = [
        "River 1 [1], Castle 1 [2], Comet 1 [3].",
        "the river 1, Mars, Venus",
        "",
        "D, E, F, G, River 1, Castle 1, Comet 1",
    ]
    got = [metrics.qampari_scores(metrics.remove_citations(metrics.alce_clean(p)), qans) for p in qp]
    assert [round(g["qampari_rec_top5"], 6) for g in got] == [0.6, 0.2, 0.0, 1.0]
    assert [round(g["qampari_prec"], 6) for g in got] == [1.0, 0.333333, 0.0, 1.0]
    assert [round(g["qampari_f1_top5"], 6) for g in got] == [0.75, 0.25, 0.0, 1.0]
    # InfiniteBench QA (default_post_process rougeL_f1) and choice (choice_post_process exact_match)
    qa_preds = ["Keeper 3", " the keeper 3 walked", "Answer: keepers", "no idea at all", ""]
    got = [
        metrics.best_of_raw_and_parsed(metrics.rouge_l_f1, "Answer:" + p, ["Keeper 3", "the keeper 3"])
        for p in qa_preds
    ]
    assert got == pytest.approx([1.0, 0.8571428571428571, 0.6666666666666666, 0.0, 0.0])
    from tasks.base import Sample

    choice = get_task("helmet_infbench_choice")
    base = Sample("t", "1", 0, 0, 0, "", "\nAnswer:", ("D", "D. Miller 3"), 10, 1, "", {"system": "Answer:"})
    preds = [" D", " D. Miller 3", " The answer is D. Miller 3.", " C", "Answer: d"]
    assert [choice.score(p, base) for p in preds] == [1, 1, 1, 0, 1]


def test_citation_plumbing_matches_the_reference(monkeypatch):
    # punkt's data is not installed here: these outputs split the same under punkt and at ". "
    monkeypatch.setattr(alce, "sentences", lambda text: [p for p in re.split(r"(?<=\.) ", text) if p])

    def nli(passage, claim):  # the stand-in the reference run used for its _run_nli_autoais
        return int(all(w in passage.lower() for w in re.findall(r"\w+", claim.lower())))

    docs = [
        {"title": "River 1", "text": "river one flows"},
        {"title": "Castle 1", "text": "castle stands near river"},
        {"title": "Comet", "text": "bright comet"},
    ]
    outs = [
        "River 1 flows [1]. Castle 1 stands near river 1 [1][2]. Bright comet [3][1].",
        "Nothing cited here. River [4].",
        "castle [2][3]",
    ]
    got = [alce.citation_scores(o, "q", docs, False, nli) for o in outs]
    assert [(g["citation_rec"], g["citation_prec"]) for g in got] == [(1.0, 0.6), (0.0, 0.0), (1.0, 0.5)]
    got = [
        alce.citation_scores(o, "Which", docs, True, nli)
        for o in ("River 1 [1], Castle 1 [2], comet [3]", "Castle 1 [1][2], nothing [9]")
    ]
    assert all(g == {"citation_rec": 0.0, "citation_prec": 0.0} for g in got)


def test_citation_skips_and_punkt_are_explicit(monkeypatch):
    from tasks.base import Sample

    rec = get_task("helmet_alce_asqa_citation_rec")
    s = Sample("t", "1", 8192, 0, 42, "", "", ("x",), 300, 1, "", {"question": "q?"})
    monkeypatch.setattr(alce, "sentences", lambda text: [text] if text else [])
    assert rec.unscored_reason("", s) and rec.unscored_reason("1.", s)  # eval_alce: skipped, not 0
    assert rec.unscored_reason("A long answer [1].", s) is None
    assert get_task("helmet_alce_qampari_citation_rec").unscored_reason("", s) is None  # comma items: never empty
    assert get_task("helmet_alce_asqa").unscored_reason("", s) is None  # str_em scores every output
    monkeypatch.undo()

    def missing(text):
        raise LookupError("punkt_tab")

    monkeypatch.setattr("nltk.sent_tokenize", missing)
    with pytest.raises(TaskUnavailable, match="nltk.downloader punkt_tab"):
        alce.sentences("One. Two.")


def test_missing_data_and_nli(tmp_path, monkeypatch, bpe_tokenizer):
    monkeypatch.delenv("HARNESS_HELMET", raising=False)
    with pytest.raises(TaskUnavailable, match=r"kilt/nq-dev-multikilt_1000_k\*_dep\*.jsonl: pass --helmet-data DIR"):
        get_task("helmet_nq").check_available()
    monkeypatch.setenv("HARNESS_HELMET", str(tmp_path))
    with pytest.raises(TaskUnavailable, match=f"no file {tmp_path}/msmarco"):
        get_task("helmet_msmarco").check_available()
    write_helmet(tmp_path)
    monkeypatch.delenv(alce.NLI_ENV, raising=False)
    get_task("helmet_alce_asqa").check_available()
    with pytest.raises(TaskUnavailable, match="t5_xxl_true_nli_mixture.*HARNESS_ALCE_NLI"):
        get_task("helmet_alce_asqa_citation_rec").check_available()
    _exact("helmet_json_kv").check_available()  # synthetic under exact-length: no data needed


def test_suite_and_categories():
    names = all_suites()["helmet"]
    cats = suite_categories("helmet")
    assert cats["LongQA"] == ["helmet_narrativeqa", "helmet_infbench_qa", "helmet_infbench_choice"]
    assert suite_categories("helmet-nojudge")["LongQA"] == ["helmet_infbench_qa", "helmet_infbench_choice"]
    assert list(cats) == ["Recall", "RAG", "Re-rank", "Cite", "ICL", "LongQA", "Summ"]
    assert sorted(names) == sorted(t for ts in cats.values() for t in ts)
    assert cats["ICL"] == [f"helmet_icl_{d}" for d in ("trec_coarse", "trec_fine", "banking77", "clinic150", "nlu")]
    assert all(get_task(n).family == "helmet" for n in names)
    assert "helmet_narrativeqa" not in all_suites()["helmet-nojudge"]


def test_eval_end_to_end(tiny_llama_dir, helmet_dir, tmp_path, monkeypatch):
    from harness.cli import main

    monkeypatch.delenv(alce.NLI_ENV, raising=False)
    out = tmp_path / "out"
    # 4 new tokens instead of each task's own keep the CPU run short; prompts keep their full budget
    args = ["eval", "--ckpts", str(tiny_llama_dir), "--suite", "helmet-nojudge", "--lengths", "4k", "--samples", "1"]
    args += ["--max-new-tokens", "4", "--exclude", "helmet_niah_mv", "--protocol", "exact-length"]
    assert (
        main([*args, "--helmet-data", str(helmet_dir), "--out", str(out), "--no-progress", "--cache-dir", "none"]) == 0
    )
    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["helmet-nojudge"]
    assert "NLI model" in suite["unavailable"]["helmet_alce_qampari_citation_rec"]
    assert "ICL data" in suite["unavailable"]["helmet_icl_banking77"]  # no ICL folder given: one line each
    assert set(suite["categories"]) == {"Recall", "RAG", "Re-rank", "Cite", "ICL", "LongQA"}
    assert suite["categories"]["ICL"] == {} and set(suite["categories"]["RAG"]) == {"4096"}  # no ICL task ran
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert {r["task"] for r in recs} == {
        "helmet_json_kv", "helmet_niah_mk_2", "helmet_niah_mk_3", "helmet_nq", "helmet_triviaqa",
        "helmet_hotpotqa", "helmet_popqa", "helmet_msmarco", "helmet_alce_asqa", "helmet_alce_qampari",
        "helmet_infbench_qa", "helmet_infbench_choice",
    }  # fmt: skip
    for r in recs:
        assert r["num_tokens"] + get_task(r["task"]).max_new_tokens <= 4096 and 0 <= r["score"] <= 1
        assert "judge" not in r["settings"]
    # the leaderboard shows HELMET as its own column group with its categories
    from leaderboards.build import build, load_runs

    board = build(load_runs([str(out)]))
    groups = {c["group"] for c in board["columns"]}
    assert any(g.startswith("HELMET") for g in groups)
    cats = {c.get("category") for c in board["columns"] if c["suite"] == "helmet-nojudge"}
    assert {"Recall", "RAG", "Re-rank", "Cite"} <= cats
