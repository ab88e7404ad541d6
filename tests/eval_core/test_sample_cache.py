"""The sample cache is rebuilt, never trusted, when its file is torn or binary garbage."""

from __future__ import annotations

import os

import pytest

from tasks.generate import _cache_path, cache_key, generate_samples
from tasks.registry import get_task


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.write_bytes(os.urandom(4096)), id="random-bytes"),
        pytest.param(lambda p: p.write_bytes(b"\xff\xfe\x00garbage\n" * 50), id="invalid-utf8"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-40]), id="torn"),
        pytest.param(lambda p: p.write_text('["a list"]\n"text"\n'), id="foreign-json"),
    ],
)
def test_damaged_cache_is_rebuilt(tmp_path, bpe_tokenizer, damage):
    task = get_task("niah_single_1")
    fresh = generate_samples(task, 1024, range(3), bpe_tokenizer, seed=7, cache_dir=False)
    first = generate_samples(task, 1024, range(3), bpe_tokenizer, seed=7, cache_dir=tmp_path)
    path = _cache_path(tmp_path, task, 1024, cache_key(task, 1024, 7, bpe_tokenizer))
    good = path.read_bytes()
    damage(path)
    again = generate_samples(task, 1024, range(3), bpe_tokenizer, seed=7, cache_dir=tmp_path)
    assert [s.to_json() for s in again] == [s.to_json() for s in fresh] == [s.to_json() for s in first]
    assert path.read_bytes() == good  # rewritten whole
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left
