"""BABILong under the "reference" protocol (the default): the released sets read from --babilong-data
as the hub gives them (both layouts, tests/babilong/released/), the released labels as lengths, every
row of a file, the reference's prompt, its CSV reading of outputs, and bad input in one line."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import TaskUnavailable, UserError
from tasks.babilong import released
from tasks.babilong.prompts import format_prompt
from tasks.base import Sample
from tasks.registry import get_task

from .helpers import FIXTURE_SETS, RELEASED, write_fixtures, write_released

SETS = sorted(FIXTURE_SETS)


@pytest.fixture
def use(monkeypatch):
    """use(path): point HARNESS_BABILONG at a folder, caches cleared (and again afterwards)."""

    def point(path):
        monkeypatch.setenv(released._source().env, str(path))
        released.clear_caches()

    yield point
    released.clear_caches()


def test_committed_fixtures_are_the_helpers_output(tmp_path, use):
    """tests/babilong/released is write_fixtures()' output, so it can be re-made (row content; the
    parquet bytes name the pyarrow version that wrote them)."""
    made = write_fixtures(tmp_path)
    for name in SETS:
        for label, last, _, _ in FIXTURE_SETS[name]:
            for t in range(1, last + 1):
                use(RELEASED / name)
                ours = released.items(f"qa{t}", label)
                use(made[name])
                assert released.items(f"qa{t}", label) == ours, (name, label, t)


@pytest.mark.parametrize("name", SETS)
def test_layouts_are_detected(name, use):
    use(RELEASED / name)
    assert released.layout(str(RELEASED / name)) == (released.JSON if name == "babilong" else released.PARQUET)
    assert released.labels("qa1") == ["0k", "1k", "2k"] and released.labels("qa11") == ["0k"]
    if name == "babilong-1k-samples":  # 2k is in two shards, read in order
        assert len(released.files(RELEASED / name, "qa1", "2k")) == 2 and len(released.items("qa1", "2k")) == 4
    else:
        use(RELEASED / name / "data")  # DIR may be the set's data/ folder itself
        assert released.labels("qa6") == ["0k", "1k"]


def test_lengths_are_the_released_labels(use):
    use(RELEASED / "babilong")
    task = get_task("babilong_qa1")
    assert task.protocol == "reference" and not task.length_controlled
    assert task.task_lengths(None, 8192, None) == [0, 1024, 2048]  # every label held, 0k included
    assert task.task_lengths(None, 8192, 1024) == [0, 1024]  # capped by --max-length, else the context
    assert task.task_lengths(None, 1500, None) == [0, 1024]
    assert task.task_lengths([2048], 8192, None) == [2048]
    assert get_task("babilong_0k_qa1").task_lengths([1024, 2048], 8192, None) == [0]
    with pytest.raises(UserError, match=r"--lengths 3000: .*1k, 2k, 4k.*--protocol exact-length") as exc:
        task.task_lengths([3000], 8192, None)
    assert "\n" not in str(exc.value)
    with pytest.raises(UserError) as exc:
        task.task_lengths([1024, 4096], 8192, None)
    msg = str(exc.value)
    assert str(RELEASED / "babilong" / "data" / "qa1" / "4k.json") in msg and "drop 4k from --lengths" in msg
    assert "--babilong-data DIR" in msg and "HARNESS_BABILONG" in msg and "\n" not in msg
    ex = get_task("babilong_qa1")
    ex.set_protocol("exact-length")
    assert ex.length_controlled and ex.task_lengths(None, 8192, None) == [4096, 8192, 16384, 32768, 65536, 131072]


@pytest.mark.parametrize("name", SETS)
def test_samples_are_every_row_in_the_references_prompt(name, use, bpe_tokenizer):
    use(RELEASED / name)
    for task_name, length, label in (
        ("babilong_qa8", 0, "0k"),
        ("babilong_qa2", 1024, "1k"),
        ("babilong_0k_qa3", 0, "0k"),
    ):
        task = get_task(task_name)
        rows = released.items(task.qa, label)
        assert (
            task.default_samples(length) == task.num_samples_available(length) == len(rows) == FIXTURE_SETS[name][0][2]
        )
        for i, row in enumerate(rows):
            s = task.sample(length, i, 42, bpe_tokenizer)
            assert s.prompt == format_prompt(task.qa, row.input, row.question) and s.references == (row.target,)
            assert s.length == length and s.max_new_tokens == 20 and s.answer_prefix == ""
            assert s.num_tokens == len(bpe_tokenizer(s.prompt)["input_ids"])
            assert s.metadata["protocol"] == "reference" and s.metadata["released"] == {"label": label, "row": i}
            assert s.input == task.sample(length, i, 7, bpe_tokenizer).input  # rows, not draws: no seed
        with pytest.raises(UserError, match="pass --samples"):
            task.sample(length, len(rows), 42, bpe_tokenizer)
    assert get_task("babilong_qa1").uses_chat_template() and get_task("babilong_qa1").reference_system_prompt is None


def test_dataset_hash_follows_the_files(tmp_path, use):
    write_fixtures(tmp_path)
    use(tmp_path / "babilong")
    task, zero = get_task("babilong_qa1"), get_task("babilong_0k_qa1")
    h, h0 = task.dataset_hash(), zero.dataset_hash()
    write_released(
        tmp_path / "babilong", "qa1", "2k", [{"input": "x", "question": "q", "target": "garden"}], released.JSON
    )
    released.clear_caches()
    assert task.dataset_hash() != h and zero.dataset_hash() == h0  # the 0K task reads the 0k file alone


def test_score_reads_outputs_as_the_leaderboard_reads_its_csv(use):
    """read_csv turns a bare "None" into NaN, then "": compare_answers alone finds "no" in "none"."""
    use(RELEASED / "babilong")
    task = get_task("babilong_qa6")
    s = Sample("babilong_qa6", "1", 0, 0, 42, "p", "", ("no",), 20, 1, "", {"question": "Is Mary in the garden?"})
    assert task.score("None", s) == 0.0 and task.score("  no  ", s) == 1.0 and task.score("NA", s) == 0.0
    task.set_protocol("exact-length")
    assert task.score("None", s) == 1.0


def test_missing_data_is_one_line(tmp_path, use, monkeypatch):
    monkeypatch.delenv(released._source().env, raising=False)
    released.clear_caches()
    with pytest.raises(TaskUnavailable) as exc:
        get_task("babilong_qa1").check_available()
    msg = str(exc.value)
    assert "--babilong-data DIR" in msg and "HARNESS_BABILONG" in msg and "\n" not in msg
    use(tmp_path)
    with pytest.raises(TaskUnavailable, match="holds no BABILong released set"):
        get_task("babilong_qa1").check_available()
    write_released(tmp_path, "qa1", "0k", [{"input": "a", "question": "q", "target": "t"}], released.JSON)
    use(tmp_path)
    get_task("babilong_0k_qa1").check_available()
    with pytest.raises(TaskUnavailable) as exc:
        get_task("babilong_qa2").check_available()
    msg = str(exc.value)
    assert str(tmp_path / "data" / "qa2" / "1k.json") in msg and "HARNESS_BABILONG" in msg and "\n" not in msg


def test_wrong_layout_is_one_line(tmp_path, use):
    root = tmp_path / "json"
    write_released(root, "qa1", "0k", [{"input": "a", "question": "q"}], released.JSON)
    use(root)
    with pytest.raises(UserError) as exc:
        get_task("babilong_0k_qa1").default_samples(0)
    assert not isinstance(exc.value, TaskUnavailable)  # exit 2, never a task skipped in silence
    msg = str(exc.value)
    assert str(root / "data" / "qa1" / "0k.json") in msg and "input, question, target" in msg and "\n" not in msg
    (root / "data" / "qa1" / "0k.json").write_text(json.dumps({"input": ["a"]}), encoding="utf-8")
    use(root)
    with pytest.raises(UserError, match="not a JSON array of rows"):
        get_task("babilong_0k_qa1").default_samples(0)
    pq_root = tmp_path / "parquet"
    write_released(pq_root, "qa1", "1k", [{"text": "a", "question": "q", "answer": "t"}], released.PARQUET)
    use(pq_root)
    with pytest.raises(UserError, match=r"has columns \['answer', 'question', 'text'\], not input, question, target"):
        get_task("babilong_qa1").default_samples(1024)
    write_released(tmp_path / "both", "qa1", "0k", [{"input": "a", "question": "q", "target": "t"}], released.JSON)
    write_released(tmp_path / "both", "qa1", "0k", [{"input": "a", "question": "q", "target": "t"}], released.PARQUET)
    use(tmp_path / "both")
    with pytest.raises(UserError, match="holds both RMT-team/babilong and RMT-team/babilong-1k-samples"):
        get_task("babilong_qa1").check_available()
