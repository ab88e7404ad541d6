"""MRCR's token counts kept on disk: a second run reads them (no count, no tiktoken), anything else
in the file is counted again."""

from __future__ import annotations

import json
import os

import pytest

from tasks.mrcr import counts


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    return tmp_path / "mrcr-counts"


def _counter(values):
    calls = []

    def count():
        calls.append(1)
        return list(values)

    return count, calls


def test_counted_once_then_read(cache):
    count, calls = _counter([3, 1, 4])
    assert counts.cached_counts({"k": 1}, 3, count) == (3, 1, 4)
    assert counts.cached_counts({"k": 1}, 3, count) == (3, 1, 4) and len(calls) == 1
    assert counts.cached_counts({"k": 2}, 3, count) == (3, 1, 4) and len(calls) == 2  # another key


@pytest.mark.parametrize(
    "content",
    ["{torn", "[]", '{"key": {"k": 9}, "counts": [3, 1, 4]}', '{"key": {"k": 1}, "counts": [3, 1]}',
     '{"key": {"k": 1}, "counts": [3, -1, 4]}', '{"key": {"k": 1}, "counts": [3, true, 4]}'],
)  # fmt: skip
def test_anything_else_is_counted_again(cache, content):
    count, calls = _counter([3, 1, 4])
    counts.cached_counts({"k": 1}, 3, count)
    (path,) = cache.iterdir()
    path.write_text(content)
    assert counts.cached_counts({"k": 1}, 3, count) == (3, 1, 4) and len(calls) == 2
    assert json.loads(path.read_text()) == {"key": {"k": 1}, "counts": [3, 1, 4]}  # replaced


def test_a_fifo_in_the_cache_never_blocks(cache):
    count, calls = _counter([5])
    counts.cached_counts({"k": 1}, 1, count)
    (path,) = cache.iterdir()
    path.unlink()
    os.mkfifo(path)
    assert counts.cached_counts({"k": 1}, 1, count) == (5,) and len(calls) == 2


def test_a_second_eval_reads_the_counts(mrcr_data, stand_in_counter, chat_tokenizer, monkeypatch, capsys):
    """The bins and the fit come from disk in a fresh process (the per-process memo cleared), without
    the counter: a run needs tiktoken only the first time."""
    from tasks.mrcr import bins, tasks
    from tasks.registry import get_task

    def run():
        task = get_task("mrcr_2needle")
        task.set_protocol("reference")
        task.task_lengths(None, 8192, None)
        return task.num_samples_with_tokenizer(8192, chat_tokenizer), task.sample(8192, 0, 42, chat_tokenizer)

    first = run()
    assert "counting o200k_base tokens" in capsys.readouterr().err
    tasks._BIN_TOKENS.clear()
    tasks._PROMPT_TOKENS.clear()
    monkeypatch.setattr(bins, "reference_counter", lambda: pytest.fail("counted again"))
    again = run()
    assert again == first and "counting" not in capsys.readouterr().err
