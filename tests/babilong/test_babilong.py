"""BABILong under the "exact-length" protocol: prompts, bAbI parsing, the 0K context and
compare_answers against booydar/babilong's own code (recorded in reference_expected.json); the
background fitted to each length in the model's tokens; data errors in one line. (The "reference"
protocol, on the released sets: test_released.py and test_parity.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import TaskUnavailable
from tasks.babilong import data
from tasks.babilong.metrics import compare_answers
from tasks.babilong.prompts import TASK_LABELS, format_prompt
from tasks.babilong.tasks import QA_TASKS, max_lines
from tasks.registry import all_suites
from tasks.registry import get_task as _get_task
from tasks.ruler.fitting import counter_for

from .helpers import write_babi, write_pg19


def get_task(name: str):
    """The task under the exact-length protocol (the reference protocol is the default)."""
    task = _get_task(name)
    task.set_protocol("exact-length")
    return task


EXPECTED = json.loads((Path(__file__).parent / "reference_expected.json").read_text(encoding="utf-8"))


@pytest.fixture
def bab_dir(tmp_path, monkeypatch):
    write_babi(tmp_path, seed=0)
    write_pg19(tmp_path)
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_caches()
    yield tmp_path
    data.clear_caches()


def test_prompts_are_the_references():
    ctx, q = EXPECTED["prompt_context"], EXPECTED["prompt_question"]
    assert sorted(EXPECTED["prompts"]) == sorted(QA_TASKS)
    for task, exp in EXPECTED["prompts"].items():
        prompt = format_prompt(task, ctx, q)
        assert hashlib.sha256(prompt.encode()).hexdigest() == exp["sha256"], task
        if "text" in exp:
            assert prompt == exp["text"]
    assert sorted(TASK_LABELS) == sorted(QA_TASKS)


def test_babi_parsing_is_task_datasets(tmp_path):
    write_babi(tmp_path, tasks=("qa1", "qa2"), seed=0)
    for task, expected in EXPECTED["parsed"].items():
        path = next(tmp_path.glob(f"{task}_*_test.txt"))
        qs = data.parse_babi(path.read_text(), str(path))
        got = [
            {
                "facts": list(q.facts),
                "question": q.question,
                "answer": q.answer,
                "references": [q.facts[i] for i in q.supporting],
            }
            for q in qs
        ]
        assert got == expected


def test_zero_k_context_is_the_references(bab_dir, bpe_tokenizer):
    for task, inputs in EXPECTED["zero_k_inputs"].items():
        t = get_task(f"babilong_0k_{task}")
        assert t.no_context and not t.length_controlled and t.num_samples_available(0) == len(inputs)
        for i in range(len(inputs)):
            s = t.sample(0, i, 42, bpe_tokenizer)
            q = s.metadata["question"]
            assert s.prompt == format_prompt(task, inputs[s.metadata["question_id"]], q)
            assert s.length == 0 and s.max_new_tokens == 20


def test_scores_are_compare_answers():
    rows = EXPECTED["scores"]
    assert len(rows) > 100 and 0 < sum(r["correct"] for r in rows) < len(rows)
    for r in rows:
        assert compare_answers(r["target"], r["output"], r["question"], TASK_LABELS[r["task"]]) == r["correct"], r


@pytest.mark.parametrize("length", [512, 1024, 3000])
def test_background_fits_the_length_in_model_tokens(bab_dir, bpe_tokenizer, length):
    task = get_task("babilong_qa1")
    budget = length - task.max_new_tokens
    counter = counter_for(bpe_tokenizer)
    for index in range(3):
        s = task.sample(length, index, 42, bpe_tokenizer)
        assert s.num_tokens == len(bpe_tokenizer(s.prompt)["input_ids"]) and s.num_tokens <= budget
        plan, _ = task.build_plan(length, index, 42, bpe_tokenizer)
        n = s.metadata["haystack_units"]
        assert 0 < n < plan.max_units
        assert plan.render(n)[0] == s.prompt
        assert counter.count(plan.render(n + 1)[0]) > budget  # one more word would not fit: slack < a word
        q = task.question(length, index, 42)[1]
        pos = [s.prompt.index(f) for f in q.facts]  # every fact, in story order, inside the context
        assert pos == sorted(pos) and s.prompt.index("<context>") < pos[0]
        assert s.prompt.endswith(f"</context>\n\nQuestion: {q.question.strip()}")
        depths = s.metadata["fact_depths"]
        assert depths == sorted(depths) and all(0 <= d <= 100 for d in depths)
        assert s == task.sample(length, index, 42, bpe_tokenizer)  # deterministic
    assert task.sample(length, 0, 42, bpe_tokenizer).prompt != task.sample(length, 0, 43, bpe_tokenizer).prompt


def test_plan_model_predicts_the_background_tokens(bab_dir, bpe_tokenizer):
    plan, _ = get_task("babilong_qa2").build_plan(2048, 1, 42, bpe_tokenizer)
    counter = counter_for(bpe_tokenizer)
    base = counter.count(plan.render(0)[0]) - int(plan.model(np.array([0]))[0])
    for n in (1, 50, 333, plan.max_units - 1):
        # exact for a byte-level BPE up to the seam after "<context>\n" (the context is stripped there)
        assert abs(counter.count(plan.render(n)[0]) - (base + int(plan.model(np.array([n]))[0]))) <= 1


def test_eligible_questions_follow_create_tasks_rule(bab_dir):
    task = get_task("babilong_qa1")
    qs = data.questions("qa1")[0]
    for length in (256, 400, 1024):
        cap = max_lines(length)
        assert task.num_samples_available(length) == sum(len(q.facts) + 1 <= cap for q in qs)
        assert all(len(qs[i].facts) + 1 <= cap for i in task.eligible(length, 42))
    assert max_lines(400) == 12 and max_lines(0) is None
    long_order = task.eligible(100_000, 42)
    short = set(task.eligible(400, 42))
    assert task.eligible(400, 42) == [i for i in long_order if i in short]  # one order for every length


def test_suites():
    """babilong is qa1-qa5, the tasks the leaderboard averages (and the only ones RMT-team/babilong-1k-samples
    holds above 0k); every suite's headline is their mean at each length."""
    from tasks.registry import suite_headline

    suites = all_suites()
    assert suites["babilong"] == suites["babilong-qa1-5"] == [f"babilong_qa{i}" for i in range(1, 6)]
    assert suites["babilong-qa1-10"] == [f"babilong_qa{i}" for i in range(1, 11)]
    assert len(suites["babilong-all"]) == 20 and len(suites["babilong-0k-all"]) == 20
    assert suites["babilong-0k"] == [f"babilong_0k_qa{i}" for i in range(1, 6)]
    for name in ("babilong", "babilong-qa1-10", "babilong-all"):
        head = suite_headline(name)
        assert head is not None and head.groups == {"qa1-qa5": {f"qa{i}": [f"babilong_qa{i}"] for i in range(1, 6)}}
    zero = suite_headline("babilong-0k")
    assert zero is not None and zero.groups["qa1-qa5"]["qa3"] == ["babilong_0k_qa3"]
    assert "qa1-qa5" in zero.label


def test_missing_data_is_one_line(tmp_path, monkeypatch, bpe_tokenizer):
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_caches()
    with pytest.raises(TaskUnavailable) as exc:
        get_task("babilong_qa3").check_available()
    msg = str(exc.value)
    assert "qa3_three-supporting-facts_test.txt" in msg and "--babilong-data DIR" in msg and "HARNESS_BABILONG" in msg
    write_babi(tmp_path, tasks=("qa3",))
    data.clear_caches()
    with pytest.raises(TaskUnavailable, match=r"no PG19 text \(pg19/\*\.txt\)") as exc:
        get_task("babilong_qa3").check_available()
    assert "\n" not in str(exc.value)
    get_task("babilong_0k_qa3").check_available()  # the facts alone need no PG19
    monkeypatch.delenv(data.ENV_VAR)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data.clear_caches()
    with pytest.raises(TaskUnavailable, match="offline: HF_HUB_OFFLINE is set"):
        get_task("babilong_qa3").check_available()
    data.clear_caches()


def test_dataset_hash_covers_both_sources(bab_dir):
    h = get_task("babilong_qa1").dataset_hash()
    h0 = get_task("babilong_0k_qa1").dataset_hash()
    assert h.startswith(h0) and h != h0
    book = next((bab_dir / "pg19").glob("*.txt"))
    book.write_text(book.read_text() + "One more sentence of the book that changes its hash for sure.\n")
    data.clear_caches()
    assert get_task("babilong_qa1").dataset_hash() != h and get_task("babilong_0k_qa1").dataset_hash() == h0


def test_a_binary_pg19_book_is_refused_never_decoded_with_replacements(tmp_path):
    """A book that is not UTF-8 (binary garbage in pg19/) is one line naming the file (issue 40),
    as NoLiMa refuses the same file, instead of haystacks full of replacement characters."""
    from tasks.data.reader import DataFileError

    write_pg19(tmp_path)
    (tmp_path / "pg19" / "zz-binary.txt").write_bytes(bytes(range(256)) * 64)
    with pytest.raises(DataFileError, match=r"zz-binary\.txt is not UTF-8 text"):
        data._books(str(tmp_path))
