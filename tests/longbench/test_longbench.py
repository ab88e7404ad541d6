"""LongBench: prompt parity with reference strings, middle truncation, data loading and
end-to-end runs on tiny local jsonl files (fake runner and the tiny Llama)."""

from __future__ import annotations

import pytest

from harness.core.errors import TaskUnavailable
from harness.models.runners.base import GenerationRequest
from tasks.generate import generate_samples
from tasks.longbench import data
from tasks.registry import all_suites, get_task

from .helpers import FakeRunner, _icl_files, _rec, _write

# Reference strings typed from LongBench/config/dataset2prompt.json with {context}/{input} filled.
REF_NARRATIVEQA = (
    "You are given a story, which can be either a novel or a movie script, and a question. Answer the question "
    "asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: CTX\n\n"
    "Now, answer the question based on the story asconcisely as you can, using a single phrase if possible. "
    "Do not provide any explanation.\n\nQuestion: INP\n\nAnswer:"
)
REF_TREC = "Please determine the type of the question below. Here are some examples of questions.\n\nCTX\nINP"
REF_PASSAGE_COUNT = (
    "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read "
    "these paragraphs and determine how many unique paragraphs there are after removing duplicates. In other words, "
    "how many non-repeating paragraphs are there in total?\n\nCTX\n\nPlease enter the final count of unique "
    "paragraphs after removing duplicates. The output format should only contain the number, such as 1, 2, 3, and "
    "so on.\n\nThe final answer is: "
)
REF_REPOBENCH = "Please complete the code given below. \nCTXINPNext line of code:\n"
REF_MULTI_NEWS = (
    "You are given several news passages. Write a one-page summary of all news. \n\nNews:\nCTX\n\n"
    "Now, write a one-page summary of all the news.\n\nSummary:"
)
REF_LSHT = "请判断给定新闻的类别，下面是一些例子。\n\nCTX\nINP"

MAXLEN = {
    "narrativeqa": 128,
    "gov_report": 512,
    "trec": 64,
    "triviaqa": 32,
    "samsum": 128,
    "lsht": 64,
    "passage_count": 32,
    "lcc": 64,
    "repobench-p": 64,
    "hotpotqa": 32,
}


@pytest.mark.parametrize(
    "name,ref",
    [
        ("narrativeqa", REF_NARRATIVEQA),
        ("trec", REF_TREC),
        ("passage_count", REF_PASSAGE_COUNT),
        ("repobench-p", REF_REPOBENCH),
        ("multi_news", REF_MULTI_NEWS),
        ("lsht", REF_LSHT),
    ],
)
def test_prompt_parity(lb_dir, byte_tokenizer, name, ref):
    _write(lb_dir, name, [_rec(name)])
    s = get_task(name).sample(0, 0, 42, byte_tokenizer)
    assert s.prompt == ref
    assert s.metadata["truncation"]["truncated"] is False


def test_registry_tables():
    suites = all_suites()
    assert len(suites["longbench"]) == 21
    assert suites["longbench-icl"] == ["trec", "triviaqa", "samsum", "lsht"]
    assert not {"multifieldqa_zh", "dureader", "vcsum", "lsht", "passage_retrieval_zh"} & set(suites["longbench-en"])
    assert len(suites["longbench-e"]) == 13 and all(t.endswith("_e") for t in suites["longbench-e"])
    for name, n in MAXLEN.items():
        assert get_task(name).max_new_tokens == n
    assert get_task("2wikimqa").metric == "qa_f1" and get_task("vcsum").metric == "rouge_zh"
    assert get_task("trec").length_controlled is False
    from tasks.longbench import SUITE_CATEGORIES

    cats = SUITE_CATEGORIES["longbench"]
    assert cats["LongBench ICL"] == ["trec", "triviaqa", "samsum", "lsht"]
    assert sorted(t for ts in cats.values() for t in ts) == sorted(suites["longbench"])


def test_middle_truncation_matches_pred_py(lb_dir, bpe_tokenizer):
    words = " ".join(f"word{i}" for i in range(400))
    _write(lb_dir, "hotpotqa", [_rec("hotpotqa", ctx=words, inp="Which word is first?")])
    task = get_task("hotpotqa")
    task.set_protocol("exact-length")  # the length is the whole budget (the reference's: tests below)
    full = task.sample(0, 0, 42, bpe_tokenizer)
    budget = 120  # prompt tokens: the length is the whole budget, prompt + 32 generated (hotpotqa)
    s = task.sample(budget + 32, 0, 42, bpe_tokenizer)
    ids = bpe_tokenizer(full.prompt)["input_ids"]  # pred.py: tokenized with special tokens
    expect = bpe_tokenizer.decode(ids[:60], skip_special_tokens=True) + bpe_tokenizer.decode(
        ids[-60:], skip_special_tokens=True
    )
    info = s.metadata["truncation"]
    # This prompt and budget are chosen so that pred.py's cut re-encodes within the budget: no refit,
    # and ours is byte-identical to pred.py's (the refit branch is checked in the test below).
    assert info["refit_tokens"] == 0
    assert s.prompt == expect
    assert s.num_tokens <= budget
    assert s.prompt.startswith("Answer the question based on the given passages.")
    assert s.prompt.endswith("Question: Which word is first?\nAnswer:")
    assert {k: v for k, v in info.items() if k != "refit_tokens"} == {
        "rule": "middle",
        "max_length": budget,
        "original_tokens": len(ids),
        "truncated": True,
    }
    assert s.length == budget + 32 and budget - 3 <= s.num_tokens <= budget
    assert task.default_max_length(4096) == 4096 - 32


def test_missing_data_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.load_records.cache_clear()
    with pytest.raises(TaskUnavailable, match="trec.jsonl not found.*HARNESS_LONGBENCH"):
        get_task("trec").check_available()
    monkeypatch.delenv(data.ENV_VAR)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(TaskUnavailable, match="offline"):
        get_task("trec").check_available()
    data.load_records.cache_clear()


def _mini_loop(task, runner, length, tokenizer):
    """What the evaluation loop does for "generate" tasks (harness/pipeline/evaluate.py), in miniature."""
    n = task.num_samples_available(length)
    samples = generate_samples(task, length, range(n), tokenizer, seed=42, cache_dir=False)
    preds = runner.generate([GenerationRequest(s.prompt, s.max_new_tokens) for s in samples])
    return samples, preds, [task.score(p, s) for p, s in zip(preds, samples)]


def test_longbench_icl_end_to_end_fake_runner(lb_dir, bpe_tokenizer):
    _icl_files(lb_dir)
    answers = {
        "Where is Rome": "\nLocation\nQuestion: foo",
        "What is X": "Other location",
        "Where is Paris?\nAnswer:": " France\nPassage:",
        "A: lunch": "A and B will have lunch.\nDialogue: C",
        "球队获胜": "体育",
    }

    def answer(prompt):
        return next(v for k, v in answers.items() if k in prompt)

    runner = FakeRunner(answer)
    per_task = {}
    for name in all_suites()["longbench-icl"]:
        task = get_task(name)
        task.set_protocol("exact-length")
        samples, _preds, scores = _mini_loop(task, runner, 4096, bpe_tokenizer)
        per_task[name] = 100 * sum(scores) / len(scores)
        assert all(
            s.length == 4096 and s.metadata["truncation"]["max_length"] == 4096 - task.max_new_tokens for s in samples
        )
    # trec: item 0 first line "Location" -> 1; item 1 predicts "Other location" for gold "Description" -> 0
    # triviaqa: " France" -> 1; lsht: 1; samsum: ROUGE-L of the first line against the reference
    expected_samsum = (
        100
        * __import__("rouge")
        .Rouge()
        .get_scores("A and B will have lunch.", "A and B will have lunch together")[0]["rouge-l"]["f"]
    )
    assert per_task == pytest.approx({"trec": 50.0, "triviaqa": 100.0, "samsum": expected_samsum, "lsht": 100.0})
    assert 0 < expected_samsum < 100
    # the category is the unweighted mean of its tasks (aggregator's job; the table says which tasks)
    from tasks.suites import suite_categories

    assert suite_categories("paper")["LongBench ICL"] == list(per_task)


def test_longbench_e_buckets(lb_dir, byte_tokenizer):
    _write(
        lb_dir,
        "trec_e",
        [
            _rec("trec", i, length=L, classes=["A"], answers=["A"])
            for i, L in enumerate([100, 3999, 4000, 7999, 8000, 20000])
        ],
    )
    assert get_task("trec_e").num_samples_available(0) == 6
    got = {
        b: [
            get_task(f"trec_e_{b}").sample(0, i, 42, byte_tokenizer).metadata["longbench_length"]
            for i in range(get_task(f"trec_e_{b}").num_samples_available(0))
        ]
        for b in ("0_4k", "4_8k", "8k_plus")
    }
    assert got == {"0_4k": [100, 3999], "4_8k": [4000, 7999], "8k_plus": [8000, 20000]}
    assert all_suites()["longbench-e-8k-plus"][0] == "qasper_e_8k_plus"


def test_longbench_icl_tiny_llama(lb_dir, tiny_runner, tiny_tokenizer):
    """The real tiny Llama through a minimal HF runner: prompts fit, scores equal the metric."""
    from tasks.longbench.metrics import score_sample

    _icl_files(lb_dir)
    length = 112  # small enough that the trec prompts are middle-truncated
    for name in ["trec", "triviaqa"]:
        task = get_task(name)
        task.set_protocol("exact-length")
        budget = length - task.max_new_tokens
        samples, preds, scores = _mini_loop(task, tiny_runner, length, tiny_tokenizer)
        for s, p, sc in zip(samples, preds, scores):
            assert isinstance(p, str) and 0.0 <= sc <= 1.0
            assert sc == score_sample(name, p, list(s.references), s.metadata["all_classes"])
            assert s.num_tokens <= budget
            assert s.metadata["truncation"]["truncated"] == (s.metadata["truncation"]["original_tokens"] > budget)
        assert any(s.metadata["truncation"]["truncated"] for s in samples)


def test_paper_suite():
    from tasks.suites import PAPER_TASKS, RULER_TASKS, suite_categories

    suites = all_suites()
    assert suites["paper"] == PAPER_TASKS
    assert len(RULER_TASKS) == 13 and RULER_TASKS[0] == "niah_single_1" and RULER_TASKS[-1] == "qa_2"
    if "ruler" in suites:  # registered by tasks.ruler; the paper suite must hold the same 13
        assert sorted(suites["ruler"]) == sorted(RULER_TASKS)
    assert PAPER_TASKS[13:34] == suites["longbench"] and PAPER_TASKS[-2:] == ["mmlu", "hellaswag"]
    cats = suite_categories("paper")
    assert cats["LongBench ICL"] == suites["longbench-icl"] and cats["RULER"] == RULER_TASKS
    assert suite_categories("ruler") == {}


def test_middle_truncation_never_exceeds_the_budget(bpe_tokenizer, byte_tokenizer):
    import random

    from tasks.longbench.truncation import middle_truncate

    rng = random.Random(0)
    vocab = ["alpha", "beta", "gamma", "delta", "1234", "5", "!", "?", "\n", " ", "éa", "中文", "x-y", "the"]
    refits = 0
    for tok in (bpe_tokenizer, byte_tokenizer):
        for _ in range(40):
            text = "".join(rng.choice(vocab) + rng.choice(["", " "]) for _ in range(rng.randint(50, 200)))
            budget = rng.randint(8, 60)
            kept, info = middle_truncate(text, tok, budget)
            ids = tok(text)["input_ids"]
            assert info["truncated"] == (len(ids) > budget)
            assert len(tok(kept)["input_ids"]) <= budget
            if info["truncated"] and info["refit_tokens"] == 0:
                half = budget // 2
                assert kept == tok.decode(ids[:half], skip_special_tokens=True) + tok.decode(
                    ids[-half:], skip_special_tokens=True
                )
            refits += info.get("refit_tokens", 0) > 0
    assert 0 < refits < 40  # both branches ran; the refit is the exception, pred.py's cut the rule
