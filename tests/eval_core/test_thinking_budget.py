"""Thinking budgets apart from answer budgets (harness/pipeline/thinking.py, --max-thinking-tokens):
the split of an output, the budget enforced with a scripted runner, the flag's identity, its
planning check, and how results.json and the table count the cuts. The served end to end run is in
tests/failure_modes/test_thinking.py."""

from __future__ import annotations

import pytest

from harness.core.errors import UserError
from harness.core.identity import settings_id
from harness.models.runners.base import GenerationRequest
from harness.pipeline.reasoning import Options, strip_thinking
from harness.pipeline.thinking import FORCED_CLOSE, ThinkingBudget, split_thought


@pytest.mark.parametrize(
    "raw, opened, thinking, answer, closed",
    [
        ("no thought", False, "", "no thought", True),
        ("<think>a b</think> 42", False, "<think>a b</think>", "42", True),
        ("the template opened it</think>\n\n42", False, "the template opened it</think>", "42", True),
        ("<think>ran out", False, "<think>ran out", "", False),
        ("ran out, opened by the prompt", True, "ran out, opened by the prompt", "", False),
    ],
)
def test_split_agrees_with_strip_thinking(raw, opened, thinking, answer, closed):
    t = split_thought(raw, opened)
    assert (t.thinking, t.answer, t.closed) == (thinking, answer, closed)
    if not opened:
        assert t.answer == strip_thinking(raw)


class _Scripted:
    """A runner whose outputs are given; it records what it was asked."""

    def __init__(self, outputs):
        self.outputs, self.asked = list(outputs), []

    def generate(self, requests):
        self.asked += requests
        return [self.outputs.pop(0) for _ in requests]


def _words(n: int, word: str = "w") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def test_budget_closes_a_long_thought_and_keeps_the_answer_budget(bpe_tokenizer):
    budget = ThinkingBudget(thinking=16, tokenizer=bpe_tokenizer)
    r = GenerationRequest("PROMPT", 8, stop=("\n",), messages=({"role": "user", "content": "PROMPT"},))
    first = budget.request(r)
    assert first.max_new_tokens == 24 and first.stop == () and first.prompt == "PROMPT"
    long_thought = "<think>" + _words(40)  # never closed within 24 tokens
    runner = _Scripted([" 7381924\nmore"])
    (done,) = budget.finish(runner, [r], [long_thought], [False])
    (second,) = runner.asked
    kept = second.prompt.removeprefix("PROMPT").removesuffix(FORCED_CLOSE)
    assert len(bpe_tokenizer(kept, add_special_tokens=False)["input_ids"]) <= 17  # 16 tokens, re-encoded
    assert second.max_new_tokens == 8 and second.stop == ("\n",)  # the answer's own budget and stops
    assert second.messages[-1] == {"role": "assistant", "content": kept + FORCED_CLOSE}
    assert done.prediction == "7381924" and done.facts["thinking_cut"] and done.facts["thinking_tokens"] == 16
    assert not done.facts["answer_cut"] and done.raw.endswith(FORCED_CLOSE + " 7381924\nmore")


def test_budget_within_the_thinking_cuts_the_answer_to_its_budget(bpe_tokenizer):
    budget = ThinkingBudget(thinking=64, tokenizer=bpe_tokenizer)
    r = GenerationRequest("P", 5)
    runner = _Scripted([])
    short, long_answer, none = budget.finish(
        runner,
        [r, r, GenerationRequest("P", 50)],
        ["<think>short</think> 42", "<think>short</think> " + _words(30), "no thought at all"],
        [False, False, False],
    )
    assert not runner.asked  # nothing to force
    assert short.prediction == "42" and not short.facts["answer_cut"] and not short.facts["thinking_cut"]
    cut = bpe_tokenizer(long_answer.prediction, add_special_tokens=False)["input_ids"]
    assert long_answer.facts["answer_cut"] and long_answer.facts["answer_tokens"] == 5 and len(cut) <= 6
    assert none.prediction == "no thought at all" and none.facts["thinking_tokens"] == 0


def test_the_flag_is_identity_provenance_and_a_checked_number(tmp_path, capsys):
    base = {"backend": "hf"}
    plain = settings_id(base)
    budgeted = {o.max_thinking_tokens: settings_id({**base, "options": o.non_default()}) for o in
                (Options(max_thinking_tokens=512), Options(max_thinking_tokens=1024))}  # fmt: skip
    assert len({plain, *budgeted.values()}) == 3
    assert Options(max_thinking_tokens=512).provenance()["max_thinking_tokens"] == 512
    from harness.cli import main

    for bad in ("0", "-3"):
        assert main(["eval", "--ckpts", str(tmp_path), "--max-thinking-tokens", bad, "--no-progress"]) == 2
        assert "--max-thinking-tokens" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse's own one line
        main(["eval", "--ckpts", str(tmp_path), "--max-thinking-tokens", "x", "--no-progress"])
    assert exc.value.code == 2 and "--max-thinking-tokens" in capsys.readouterr().err
    from harness.pipeline.eval_config import EvalConfig, check_options

    with pytest.raises(UserError, match="--max-thinking-tokens"):
        check_options(EvalConfig(ckpts="x", max_thinking_tokens=0))


def test_planning_counts_the_thinking_budget(tiny_llama_dir, tmp_path, capsys):
    from harness.cli import main

    argv = ["eval", "--ckpts", str(tiny_llama_dir), "--tasks", "vt", "--lengths", "1k", "--samples", "1",
            "--max-model-len", "1100", "--no-progress", "--out", str(tmp_path / "o")]  # fmt: skip
    assert main([*argv, "--max-thinking-tokens", "200"]) == 2
    err = capsys.readouterr().err
    assert "to think (--max-thinking-tokens)" in err and "> context 1100" in err


def test_results_count_and_table_mark_the_cuts():
    from harness.core.results_schema import BudgetCuts, Stats
    from harness.pipeline.table import format_cell

    Stats.model_validate({"mean": 50.0, "budget": {"thinking_cut": 3, "answer_cut": 1, "n": 4}})
    with pytest.raises(ValueError, match="more cut predictions"):
        BudgetCuts.model_validate({"thinking_cut": 5, "answer_cut": 0, "n": 4})
    cell = format_cell({"mean": 50.0, "n": 1, "budget": {"thinking_cut": 3, "answer_cut": 1, "n": 4}}, 1)
    assert cell == "50.0 cut=1/4 think-cut=3/4"
    assert format_cell({"mean": 50.0, "n": 1, "budget": {"thinking_cut": 0, "answer_cut": 0, "n": 4}}, 1) == "50.0"


def test_answer_cut_is_what_at_max_reads():
    from harness.core.degenerate import at_max

    rec = {"metadata": {"max_new_tokens": 8, "answer_cut": False}, "compute": {"new_tokens": 300}}
    assert not at_max(rec)  # the 300 tokens were mostly thought
    assert at_max({"metadata": {"max_new_tokens": 8, "answer_cut": True}})


def test_hf_run_with_a_budget_is_its_own_identity_and_counted(tiny_llama_dir, tmp_path, capsys):
    """Through the hf backend (the tiny random model writes no thought): every record carries the
    budget's account, the cell counts it, and a run without the flag computes its own records."""
    import json

    from harness.cli import main
    from harness.pipeline.store import read_store

    out = tmp_path / "o"
    argv = ["eval", "--ckpts", str(tiny_llama_dir), "--tasks", "vt", "--lengths", "1k", "--samples", "2",
            "--no-progress", "--out", str(out), "--cache-dir", "none"]  # fmt: skip
    assert main([*argv, "--max-thinking-tokens", "8"]) == 0
    records = read_store(out / "samples.jsonl")[1]
    assert len(records) == 2 and all(r["settings"]["options"] == {"max_thinking_tokens": 8} for r in records)
    meta = [r["metadata"] for r in records]
    assert all(m["thinking_tokens"] == 0 and m["thinking_cut"] is False for m in meta)
    assert all(m["answer_tokens"] <= m["max_new_tokens"] for m in meta)
    cell = json.loads((out / "results.json").read_text())["suites"]["custom"]["per_task"]["vt"]["1024"]
    assert cell["budget"] == {"thinking_cut": 0, "answer_cut": sum(m["answer_cut"] for m in meta), "n": 2}
    capsys.readouterr()
    assert main(argv) == 0  # no budget: not one of the budgeted run's records
    assert len(read_store(out / "samples.jsonl")[1]) == 4
    assert "budget" not in json.loads((out / "results.json").read_text())["suites"]["custom"]["per_task"]["vt"]["1024"]
