"""Fixtures for the LongBench / ICL / short / ppl tests: the tiny Llama behind a minimal runner."""

from __future__ import annotations

import pytest

from .helpers import TinyHFRunner, write_short_files


@pytest.fixture(scope="session")
def tiny_runner(tiny_llama_dir):
    return TinyHFRunner(tiny_llama_dir)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_llama_dir):
    from harness.models.tokenization import load_tokenizer

    return load_tokenizer(str(tiny_llama_dir))


@pytest.fixture
def short_dirs(tmp_path, monkeypatch):
    """Tiny MMLU (anatomy, astronomy: 2 test questions each) and HellaSwag (3) as local files."""
    from tasks.short import data

    files = write_short_files(tmp_path)
    monkeypatch.setenv(data.MMLU_ENV, str(files["mmlu"]))
    monkeypatch.setenv(data.HELLASWAG_ENV, str(files["hellaswag"]))
    data.clear_caches()
    yield files
    data.clear_caches()


@pytest.fixture
def lb_dir(tmp_path, monkeypatch):
    """An empty LongBench data folder (HARNESS_LONGBENCH); tests write <name>.jsonl files into it."""
    from tasks.longbench import data

    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.load_records.cache_clear()
    yield tmp_path
    data.load_records.cache_clear()
