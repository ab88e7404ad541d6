"""The MRCR loader on fixtures in openai/mrcr's released layout: whole files and shards read alike,
bad files refused in one line naming --mrcr-data, and `harness eval --suite mrcr` without data ends in
one line (exit 2)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.cli import main
from harness.core.errors import TaskUnavailable
from tasks.mrcr import data

from .conftest import FIXTURES


def test_fixture_files_are_the_generators():
    """The checked-in parquet files hold exactly what make_fixtures.py writes."""
    from tests.mrcr.fixtures import make_fixtures

    for n in data.NEEDLES:
        assert pq.read_table(FIXTURES / f"{n}needle.parquet").to_pylist() == make_fixtures.rows(n)


def test_items_are_the_released_rows(mrcr_data):
    for n in data.NEEDLES:
        rows = pq.read_table(FIXTURES / f"{n}needle.parquet").to_pylist()
        items = data.load_items(n)
        assert [it.row for it in items] == list(range(len(rows))) and len(items) == 8
        for it, r in zip(items, rows):
            assert list(it.messages) == json.loads(r["prompt"])
            assert (it.answer, it.random_string_to_prepend, it.n_needles) == (
                r["answer"],
                r["random_string_to_prepend"],
                n,
            )
            assert it.answer.startswith(it.random_string_to_prepend)
            assert it.messages[it.desired_msg_index]["role"] == "assistant"
            assert it.total_messages == len(it.messages)


def test_shards_read_as_the_whole_file(tmp_path, monkeypatch, mrcr_data):
    whole, whole_hash = data.load_items(2), data.items_hash(2)
    table = pq.read_table(FIXTURES / "2needle.parquet")
    (tmp_path / "2needle").mkdir()
    pq.write_table(table.slice(0, 3), tmp_path / "2needle" / "2needle_0.parquet")
    pq.write_table(table.slice(3), tmp_path / "2needle" / "2needle_1.parquet")
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    assert data.load_items(2) == whole and data.items_hash(2) == whole_hash


def _write(folder, rows):
    pq.write_table(pa.Table.from_pylist(rows), folder / "2needle.parquet")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda r: r.pop("answer"), "lacks column(s) answer"),
        (lambda r: r.update(prompt="not json"), "prompt is not JSON"),
        (lambda r: r.update(prompt="[]"), "non-empty JSON list"),
        (lambda r: r.update(prompt=json.dumps([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])), "last message"),
        (lambda r: r.update(prompt=json.dumps([{"role": "robot", "content": "a"}])), "role: system|user|assistant"),
        (lambda r: r.update(n_needles=4), "n_needles 4 in the 2-needle file"),
        (lambda r: r.update(random_string_to_prepend=""), "random_string_to_prepend is empty"),
    ],
)  # fmt: skip
def test_bad_rows_are_one_line(tmp_path, monkeypatch, change, words):
    rows = pq.read_table(FIXTURES / "2needle.parquet").to_pylist()
    for r in rows:
        change(r)
    _write(tmp_path, rows)
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    with pytest.raises(TaskUnavailable) as err:
        data.load_items(2)
    data.clear_cache()
    text = str(err.value)
    assert words in text and "--mrcr-data DIR" in text and "\n" not in text


def test_not_parquet_and_missing_file(tmp_path, monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    with pytest.raises(TaskUnavailable, match="2needle.parquet not found: pass --mrcr-data DIR or set HARNESS_MRCR"):
        data.load_items(2)
    (tmp_path / "2needle.parquet").write_text("nope")
    data.clear_cache()
    with pytest.raises(TaskUnavailable, match="is not a parquet file"):
        data.load_items(2)
    data.clear_cache()


def test_eval_without_data_is_one_line(tiny_llama_dir, tmp_path, monkeypatch, capsys):
    """Offline, no --mrcr-data: exit 2, one line that names the flag."""
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data.clear_cache()
    rc = main(
        ["eval", "--ckpts", str(tiny_llama_dir), "--suite", "mrcr", "--out", str(tmp_path / "o"), "--no-progress"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ")
    assert "--mrcr-data DIR" in err[0] and "mrcr_2needle" in err[0]
