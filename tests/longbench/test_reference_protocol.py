"""LongBench v1 under the reference protocol (pred.py's inputs): the prompt budget per model context,
one cut for every task, the chat policy per task, samsum's stop rule, the README's per-language
headline, and bad budgets as one line."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.cli import main
from harness.core.errors import UserError
from tasks.longbench.prompts import DATASETS, NO_CHAT_TEMPLATE
from tasks.longbench.tasks import HEADLINE_GROUPS
from tasks.registry import get_task

from .helpers import _rec, _write

# pred.py's config/model2maxlen.json (model context -> prompt budget), and the same rule elsewhere
BUDGETS = {4096: 3500, 8192: 7500, 16384: 15500, 32768: 31500, 2048: 1500, 131072: 127500, 5000: 3500}


@pytest.mark.parametrize("context,budget", BUDGETS.items())
def test_budget_is_pred_pys_model2maxlen(context, budget):
    for name in ("gov_report", "trec", "hotpotqa_e"):
        task = get_task(name)
        assert task.protocol == "reference"
        assert task.task_lengths(None, context, None) == [budget]
        assert task.task_lengths([4096, 8192], context, None) == [budget]  # --lengths does not apply


def test_exact_length_keeps_the_whole_budget():
    task = get_task("gov_report")
    task.set_protocol("exact-length")
    assert task.task_lengths(None, 4096, None) == [4096] and task.task_lengths(None, 4096, 2000) == [2000]
    assert task.default_max_length(4096) == 4096 - 512


def test_max_length_is_the_prompt_budget_and_bad_ones_are_one_line():
    task = get_task("gov_report")
    assert task.task_lengths(None, 4096, 1000) == [1000]
    with pytest.raises(UserError, match=r"below LongBench's minimum prompt budget 2.*--max-length 2 or more"):
        task.task_lengths(None, 4096, 1)
    with pytest.raises(
        UserError, match=r"gov_report generates exceed the model's context 4096: pass --max-length 3584"
    ):
        task.task_lengths(None, 4096, 3700)
    with pytest.raises(UserError, match="at least 1024 tokens.*--protocol exact-length"):
        task.task_lengths(None, 1000, None)
    for err in ("below LongBench", "exceed the model's context", "at least 1024"):
        assert err  # each message above is a single line (UserError text has no newline)


def test_every_task_is_cut_to_3500_on_a_4k_model(lb_dir, bpe_tokenizer):
    words = " ".join(f"word{i % 97} stone{i % 13}." for i in range(2500))  # ~7,000 tokens
    for name in DATASETS:
        _write(
            lb_dir,
            name,
            [_rec(name, ctx=words, inp="Which word is first?", classes=["A"] if name in ("trec", "lsht") else None)],
        )
    for name in DATASETS:
        task = get_task(name)
        (length,) = task.task_lengths(None, 4096, None)
        s = task.sample(length, 0, 42, bpe_tokenizer)
        full = task.sample(0, 0, 42, bpe_tokenizer).prompt
        ids = bpe_tokenizer(full)["input_ids"]
        expect = bpe_tokenizer.decode(ids[:1750], skip_special_tokens=True) + bpe_tokenizer.decode(
            ids[-1750:], skip_special_tokens=True
        )
        assert length == 3500 and s.length == 3500, name
        assert s.prompt == expect, name  # pred.py's cut as it is, no refit
        assert s.metadata["truncation"] == {
            "rule": "middle",
            "max_length": 3500,
            "original_tokens": len(ids),
            "truncated": True,
        }
        assert abs(s.num_tokens - 3500) <= 2 and s.num_tokens + s.max_new_tokens <= 4096, name
        assert s.metadata["protocol"] == "reference" and s.version == "2"


@pytest.mark.parametrize("name", DATASETS)
def test_chat_policy_is_pred_pys(name):
    task = get_task(name)
    assert task.uses_chat_template() == (name not in {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"})
    assert task.uses_chat_template() == (name not in NO_CHAT_TEMPLATE)
    task.set_protocol("exact-length")
    assert task.uses_chat_template()  # this project's rule: --chat wraps every task
    if f"{name}_e" in {t for t in __import__("tasks.longbench.tasks", fromlist=["TASKS"]).TASKS}:
        assert get_task(f"{name}_e").uses_chat_template() == (name not in NO_CHAT_TEMPLATE)


def test_samsum_carries_pred_pys_stop_rule(lb_dir, bpe_tokenizer):
    _write(lb_dir, "samsum", [_rec("samsum")])
    _write(lb_dir, "trec", [_rec("trec", classes=["A"])])
    s = get_task("samsum").sample(3500, 0, 42, bpe_tokenizer)
    assert (s.metadata["stop_tokens"], s.metadata["min_new_tokens"]) == (["\n"], 1)
    assert "stop_tokens" not in get_task("trec").sample(3500, 0, 42, bpe_tokenizer).metadata
    exact = get_task("samsum")
    exact.set_protocol("exact-length")
    assert "stop_tokens" not in exact.sample(4096, 0, 42, bpe_tokenizer).metadata


# The README leaderboard (LongBench/README.md), per task: the headline groups must give its Avg columns.
README_TASKS = {
    "Llama2-7B-chat-4k": {
        "narrativeqa": 18.7,
        "qasper": 19.2,
        "multifieldqa_en": 36.8,
        "multifieldqa_zh": 11.9,
        "hotpotqa": 25.4,
        "2wikimqa": 32.8,
        "musique": 9.4,
        "dureader": 5.2,
        "gov_report": 27.3,
        "qmsum": 20.8,
        "multi_news": 25.8,
        "vcsum": 0.2,
        "trec": 61.5,
        "triviaqa": 77.8,
        "samsum": 40.7,
        "lsht": 19.8,
        "passage_count": 2.1,
        "passage_retrieval_en": 9.8,
        "passage_retrieval_zh": 0.5,
        "lcc": 52.4,
        "repobench-p": 43.8,
    },
    "ChatGLM3-6B-32k": {
        "narrativeqa": 26.0,
        "qasper": 43.3,
        "multifieldqa_en": 51.7,
        "multifieldqa_zh": 62.3,
        "hotpotqa": 54.4,
        "2wikimqa": 44.9,
        "musique": 40.4,
        "dureader": 44.78,
        "gov_report": 36.8,
        "qmsum": 23.9,
        "multi_news": 27.9,
        "vcsum": 17.8,
        "trec": 79.0,
        "triviaqa": 87.1,
        "samsum": 38.2,
        "lsht": 42.0,
        "passage_count": 2.0,
        "passage_retrieval_en": 99.0,
        "passage_retrieval_zh": 94.0,
        "lcc": 57.66,
        "repobench-p": 54.76,
    },
}
README_AVG = {
    "Llama2-7B-chat-4k": {"English": 31.0, "Chinese": 14.3},
    "ChatGLM3-6B-32k": {"English": 48.5, "Chinese": 52.8},
}


@pytest.mark.parametrize("model", README_TASKS)
def test_headline_groups_give_the_readme_avg(model):
    scores = README_TASKS[model]
    for group, cats in HEADLINE_GROUPS.items():
        cat_means = [sum(scores[t] for t in ts) / len(ts) for ts in cats.values()]
        assert len(cat_means) == 6
        # the README prints one decimal (its per-task scores are rounded too)
        assert abs(sum(cat_means) / 6 - README_AVG[model][group]) <= 0.05 + 1e-9, (model, group)
    assert sorted({t for cats in HEADLINE_GROUPS.values() for ts in cats.values() for t in ts}) == sorted(DATASETS)


@pytest.fixture(scope="module")
def model_4k(tiny_llama_dir, tmp_path_factory):
    """The tiny Llama with 4096 positions (a "4K model" to pred.py)."""
    cfg_dir = tmp_path_factory.mktemp("tiny-4k") / "m"
    shutil.copytree(tiny_llama_dir, cfg_dir)
    cfg = json.loads((cfg_dir / "config.json").read_text())
    cfg["max_position_embeddings"] = 4096
    (cfg_dir / "config.json").write_text(json.dumps(cfg))
    return cfg_dir


def _eval(model, out, lb_dir, *extra):
    args = ["eval", "--ckpts", str(model), "--out", str(out), "--no-progress", "--cache-dir", "none"]
    return main([*args, "--longbench", str(lb_dir), "--samples", "1", *extra])


def test_eval_cuts_to_3500_and_reports_the_mean_of_category_means(model_4k, lb_dir, tmp_path):
    words = " ".join(f"word{i % 97} stone{i % 13}." for i in range(2500))
    keep = ["trec", "triviaqa", "lcc"]  # Few-shot Learning (2 tasks) and Code Completion (1)
    for name in keep:
        _write(lb_dir, name, [_rec(name, ctx=words, classes=["A"] if name == "trec" else None)])
    out = tmp_path / "out"
    exclude = ",".join(d for d in DATASETS if d not in keep)
    assert _eval(model_4k, out, lb_dir, "--suite", "longbench", "--exclude", exclude, "--max-new-tokens", "4") == 0
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert sorted(r["task"] for r in recs) == sorted(keep)
    for r in recs:
        assert r["length"] == 3500 and r["metadata"]["truncation"]["max_length"] == 3500
        assert r["metadata"]["truncation"]["truncated"] and r["settings"].get("protocol") == "reference"
    results = json.loads((out / "results.json").read_text())
    block = results["suites"]["longbench"]
    score = {t: block["per_task"][t]["3500"]["mean"] for t in keep}
    english = block["headline"]["groups"]["English"]["per_length"]["3500"]
    want = ((score["trec"] + score["triviaqa"]) / 2 + score["lcc"]) / 2
    assert english["mean"] == pytest.approx(want, abs=1e-6) and english["categories_covered"] == 2


def test_eval_bad_max_length_is_one_line(model_4k, lb_dir, tmp_path, capsys):
    _write(lb_dir, "trec", [_rec("trec", classes=["A"])])
    out = tmp_path / "out"
    assert _eval(model_4k, out, lb_dir, "--tasks", "trec", "--max-length", "1") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --max-length 1") and err.count("\n") == 0
    assert not (out / "samples.jsonl").exists()


def test_eval_max_length_below_max_new_tokens_is_a_prompt_budget(model_4k, lb_dir, tmp_path):
    _write(lb_dir, "gov_report", [_rec("gov_report", ctx=" ".join(["stone"] * 900))])
    out = tmp_path / "out"
    assert _eval(model_4k, out, lb_dir, "--tasks", "gov_report", "--max-length", "300", "--max-new-tokens", "2") == 0
    (rec,) = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert rec["length"] == 300 and rec["metadata"]["truncation"]["max_length"] == 300
