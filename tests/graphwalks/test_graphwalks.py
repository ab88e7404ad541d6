"""GraphWalks: the released-set loader, the reference's parses and set F1, rows fitted to a budget,
and the exact-length graphs (this project's protocol)."""

from __future__ import annotations

import itertools
import random
import re
import sys
from pathlib import Path

import pytest

from harness.core.errors import TaskUnavailable
from tasks.graphwalks import data, grading
from tasks.graphwalks.fitting import tokens_within
from tasks.registry import get_task
from tasks.ruler.fitting import counter_for

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"


@pytest.fixture
def fixture_data(monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(FIXTURES))
    data.clear_cache()
    yield FIXTURES
    data.clear_cache()


# -- the released sets ------------------------------------------------------------------------------
def test_fixture_files_are_the_script(fixture_data):
    sys.path.insert(0, str(FIXTURES))
    try:
        import make_fixtures
    finally:
        sys.path.remove(str(FIXTURES))
    for label, file in data.FILES.items():
        want = make_fixtures.rows(file)
        got = data.rows(label)
        assert [(r.prompt, list(r.answer_nodes), r.prompt_chars, r.problem_type) for r in got] == [
            (w["prompt"], w["answer_nodes"], w["prompt_chars"], w["problem_type"]) for w in want
        ]
        assert [r.row for r in got] == list(range(len(want)))
    assert any(not r.answer_nodes for r in data.rows("128k"))  # an empty gold set, as released rows have


def test_rows_by_problem_type_in_file_order(fixture_data):
    bfs = data.rows_of("128k", "bfs")
    assert [r.row for r in bfs] == [r.row for r in data.rows("128k") if r.problem_type == "bfs"]
    assert data.set_hash("128k") != data.set_hash("1m") and len(data.set_hash("1m")) == 16


def test_missing_set_is_one_line_naming_the_flag(tmp_path, monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    with pytest.raises(TaskUnavailable) as err:
        data.rows("1m")
    msg = str(err.value)
    assert "\n" not in msg and "--graphwalks-data DIR" in msg and "HARNESS_GRAPHWALKS" in msg
    assert "graphwalks_256k_to_1mil.parquet" in msg
    data.clear_cache()


def test_bad_rows_are_refused(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    path = tmp_path / data.FILES["128k"]
    row = {"prompt": "p", "answer_nodes": ["a"], "prompt_chars": 1, "problem_type": "dfs"}
    pq.write_table(pa.Table.from_pylist([row]), path)
    data.clear_cache()
    with pytest.raises(TaskUnavailable, match=r"row 0: problem_type 'dfs' is not bfs or parents"):
        data.rows("128k")
    pq.write_table(pa.Table.from_pylist([{"prompt": "p"}]), path)
    data.clear_cache()
    with pytest.raises(TaskUnavailable, match="lacks column"):
        data.rows("128k")
    path.write_bytes(b"not parquet")
    data.clear_cache()
    with pytest.raises(TaskUnavailable, match="is not a parquet file"):
        data.rows("128k")
    data.clear_cache()


# -- parses and F1 ----------------------------------------------------------------------------------
def _brute_f1(pred: list[str], gold: list[str]) -> float:
    """F1 from counts of the distinct nodes, written apart from grading.set_f1."""
    p, g = sorted(set(pred)), sorted(set(gold))
    tp = sum(1 for x in p if x in g)
    if tp == 0:
        return 0.0
    return 2 * tp / (len(p) + len(g))


def test_set_f1_against_brute_force():
    rng = random.Random(7)
    names = [f"n{i}" for i in range(8)]
    for _ in range(2000):
        pred = [rng.choice(names) for _ in range(rng.randrange(0, 7))]
        gold = rng.sample(names, rng.randrange(0, 6))
        assert grading.set_f1(pred, gold) == pytest.approx(_brute_f1(pred, gold), abs=1e-15)
    assert grading.set_f1([], []) == 0.0 and grading.set_f1(["a"], []) == 0.0  # the reference's empty gold


@pytest.mark.parametrize(
    ("response", "strict", "flexible"),
    [
        ("Final Answer: [a, b]", ["a", "b"], ["a", "b"]),
        ("work\nFinal Answer: ['a', \"b\"]\n\n", ["a", "b"], ["a", "b"]),
        ("Final Answer: [a, b]\nThat is all.", None, ["a", "b"]),  # lm-eval 3377: not on the last line
        ("Final Answer: [x]\nno, redo\nFinal Answer: [a]\ndone", None, ["a"]),  # the last one above
        ("Final Answer: a, b", None, None),
        ("final answer: [a]", None, None),
        ("Final Answer: []", [], []),
        ("", None, None),
    ],
)
def test_last_line_and_flexible_parses(response, strict, flexible):
    assert grading.parse_last_line(response) == ((strict, False) if strict is not None else ([], True))
    assert grading.parse_flexible(response) == ((flexible, False) if flexible is not None else ([], True))


def test_tasks_report_the_two_parses_apart(fixture_data, bpe_tokenizer):
    strict, loose = get_task("graphwalks_128k_parents"), get_task("graphwalks_flexible_128k_parents")
    s = strict.sample(131072, 0, 0, bpe_tokenizer)
    answer = "Final Answer: [" + ", ".join(s.references) + "]"
    assert strict.score(answer, s) == loose.score(answer, s) == 1.0
    below = answer + "\nI listed every parent."
    assert (strict.score(below, s), loose.score(below, s)) == (0.0, 1.0)
    assert strict.metric == "graphwalks_f1" and loose.metric == "graphwalks_flexible_f1"


# -- released rows fitted to a budget ---------------------------------------------------------------
def test_rows_kept_are_those_that_fit(fixture_data, bpe_tokenizer):
    task = get_task("graphwalks_1m_bfs")
    rows = data.rows_of("1m", "bfs")
    counts = [len(bpe_tokenizer(r.prompt)["input_ids"]) for r in rows]
    length = min(counts) + task.max_new_tokens  # the shortest row fits exactly; the other does not
    assert task.num_samples_with_tokenizer(length, bpe_tokenizer) == 1
    s = task.sample(length, 0, 0, bpe_tokenizer)
    assert s.metadata["row"] == rows[counts.index(min(counts))].row and s.num_tokens == min(counts)
    assert task.num_samples_with_tokenizer(max(counts) + task.max_new_tokens, bpe_tokenizer) == len(rows)
    with pytest.raises(TaskUnavailable, match="none of the 1M set's bfs rows fits"):
        task.num_samples_with_tokenizer(length - 1, bpe_tokenizer)


def test_a_lowered_answer_budget_keeps_the_rows_it_has_room_for(fixture_data, bpe_tokenizer):
    """--max-new-tokens N (the planner's set_answer_budget): rows whose prompt plus N fit are kept, as
    lm-eval's --gen_kwargs max_gen_toks=N sends them; the samples and their hash say so."""
    task = get_task("graphwalks_128k_bfs")
    rows = data.rows_of("128k", "bfs")
    length = max(len(bpe_tokenizer(r.prompt)["input_ids"]) for r in rows) + 64
    with pytest.raises(
        TaskUnavailable, match=r"with 16384 to generate: .*fewer tokens to generate \(--max-new-tokens\)"
    ):
        task.num_samples_with_tokenizer(length, bpe_tokenizer)
    released = task.dataset_hash()
    task.set_answer_budget(64)
    assert task.num_samples_with_tokenizer(length, bpe_tokenizer) == len(rows)
    s = task.sample(length, 0, 0, bpe_tokenizer)
    assert (s.max_new_tokens, s.metadata["max_new_tokens_default"]) == (64, 16384)
    assert s.dataset_hash == task.dataset_hash() != released  # other rows kept: another sample cache
    assert task.num_samples_with_tokenizer(length - 1, bpe_tokenizer) == len(rows) - 1  # the longest no longer fits
    assert get_task("graphwalks_128k_bfs").max_new_tokens == 16384  # the class keeps the reference's
    task.set_answer_budget(16384)
    assert (
        task.dataset_hash() == released
        and "max_new_tokens_default" not in task.sample(2 * 16384, 0, 0, bpe_tokenizer).metadata
    )


def test_prefix_count_agrees_with_a_whole_count(bpe_tokenizer):
    counter = counter_for(bpe_tokenizer)
    text = "\n".join(f"{i:010x} -> {i * 7:010x}" for i in range(3000))
    whole = counter.count(text)
    for cap in (5, 100, whole - 1, whole, whole + 1, 10 * whole):
        assert tokens_within(counter, text, cap) == (whole if whole <= cap else None), cap


# -- the exact-length graphs ------------------------------------------------------------------------
def _graph_from_prompt(prompt: str) -> tuple[list[tuple[str, str]], str]:
    body = prompt.split("Here is the graph to operate on:\nThe graph has the following edges:\n", 1)[1]
    edges_text, op = body.split("\n\nOperation:\n", 1)
    edges = [tuple(line.split(" -> ")) for line in edges_text.split("\n")]
    return edges, op.split("\n", 1)[0]


def _brute_answer(edges, op: str) -> list[str]:
    m = re.fullmatch(r"Find the parents of node (\w+)\.", op)
    if m:
        return sorted({s for s, t in edges if t == m.group(1) and s != m.group(1)})
    m = re.fullmatch(r"Perform a BFS from node (\w+) with depth (\d+)\.", op)
    assert m, op
    seen, frontier = {m.group(1)}, {m.group(1)}
    for _ in range(int(m.group(2))):
        frontier = {t for s, t in edges if s in frontier} - seen
        seen |= frontier
    return sorted(frontier)


@pytest.mark.parametrize(
    ("name", "length"),
    list(itertools.product(["graphwalks_exact_bfs", "graphwalks_exact_parents"], [2048, 3000, 8192])),
)
def test_exact_length_fills_the_budget(name, length, bpe_tokenizer):
    task = get_task(name)
    counter = counter_for(bpe_tokenizer)
    for index in range(2):
        s = task.sample(length, index, 0, bpe_tokenizer)
        assert s.num_tokens == len(bpe_tokenizer(s.prompt)["input_ids"])  # BOS included
        assert s.num_tokens + s.max_new_tokens <= length and s.max_new_tokens == length // 4
        n = s.metadata["edges"]
        plan = task.build_plan(length, index, 0, bpe_tokenizer)
        assert plan.render(n)[0] == s.prompt  # the sample is the plan's n-edge graph
        bigger = plan.render(n + 1)[0]
        assert counter.count(bigger) + s.max_new_tokens > length  # one more edge overflows
        edges, op = _graph_from_prompt(s.prompt)
        assert _graph_from_prompt(bigger)[0][:n] == edges  # it adds a line: the edge list is one stream
        line = max(counter.count(f"{a} -> {b}\n") for a, b in edges)
        assert length - (s.num_tokens + s.max_new_tokens) < line  # within one edge line of the budget
        assert len(edges) == n and op == s.metadata["operation"]
        assert sorted(s.references) == _brute_answer(edges, op) and s.references


def test_exact_length_is_deterministic_per_seed_and_index(bpe_tokenizer):
    task = get_task("graphwalks_exact_bfs")
    a = task.sample(2048, 3, 0, bpe_tokenizer)
    assert task.sample(2048, 3, 0, bpe_tokenizer) == a
    assert task.sample(2048, 4, 0, bpe_tokenizer).prompt != a.prompt
    assert task.sample(2048, 3, 1, bpe_tokenizer).prompt != a.prompt
    # the reference's budget from 64K up (max_gen_toks 16384)
    from tasks.graphwalks.tasks import generation_budget

    assert [generation_budget(L) for L in (4096, 65536, 1 << 20)] == [1024, 16384, 16384]
