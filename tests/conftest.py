"""Shared fixtures: tokenizers and tiny models built locally (no hub), once per session."""

from __future__ import annotations

import os

import pytest

# Tests never touch the network; the hub is unreachable on these machines anyway.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Sample and embedded caches live in a per-session temp dir, never in the user's home."""
    path = tmp_path_factory.mktemp("harness-cache")
    old = os.environ.get("HARNESS_CACHE")
    os.environ["HARNESS_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("HARNESS_CACHE", None)
    else:
        os.environ["HARNESS_CACHE"] = old


@pytest.fixture(autouse=True)
def _data_variables_restored():
    """A command run in-process with a data flag (--essays, --babilong-data, ...) sets its HARNESS_*
    variable (tasks/data_sources.py apply): each test's variables are put back as they were, so no
    test's data reaches the next one's tasks (a leaked --essays once changed every later haystack)."""
    before = {k: v for k, v in os.environ.items() if k.startswith("HARNESS_")}
    yield
    for k in [k for k in os.environ if k.startswith("HARNESS_") and k not in before]:
        del os.environ[k]
    os.environ.update(before)


@pytest.fixture(scope="session")
def bpe_tokenizer_dir(tmp_path_factory):
    """A small byte-level BPE (vocab 4096) that prepends BOS."""
    from harness.models.embedded import build_tokenizer

    return build_tokenizer(tmp_path_factory.mktemp("tok-bpe"))


@pytest.fixture(scope="session")
def byte_tokenizer_dir(tmp_path_factory):
    """A pure byte tokenizer that adds no BOS."""
    from harness.models.embedded import build_byte_tokenizer

    return build_byte_tokenizer(tmp_path_factory.mktemp("tok-byte"))


@pytest.fixture(scope="session")
def bpe_tokenizer(bpe_tokenizer_dir):
    from harness.models.tokenization import load_tokenizer

    return load_tokenizer(str(bpe_tokenizer_dir))


@pytest.fixture(scope="session")
def byte_tokenizer(byte_tokenizer_dir):
    from harness.models.tokenization import load_tokenizer

    return load_tokenizer(str(byte_tokenizer_dir))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory, bpe_tokenizer_dir):
    """A random 2-layer Llama (hidden 64, head_dim 32) with the BPE tokenizer beside it."""
    from harness.models.embedded import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), bpe_tokenizer_dir)
