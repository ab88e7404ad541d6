"""Fixtures for the LongBench / ICL / short / ppl tests: the tiny Llama behind a minimal runner."""

from __future__ import annotations

import pytest

from .helpers import TinyHFRunner


@pytest.fixture(scope="session")
def tiny_runner(tiny_llama_dir):
    return TinyHFRunner(tiny_llama_dir)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_llama_dir):
    from tasks.tokenization import load_tokenizer

    return load_tokenizer(str(tiny_llama_dir))
