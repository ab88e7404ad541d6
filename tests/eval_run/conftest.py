"""Fixtures for the eval-loop tests: a series of tiny checkpoints sharing one tokenizer."""

from __future__ import annotations

import pytest
import toytasks  # noqa: F401  (registers the toy tasks and suite)


@pytest.fixture(scope="session")
def ckpt_series(tmp_path_factory, bpe_tokenizer_dir):
    """run/ckpt-10, ckpt-20, ckpt-30: random 2-layer Llamas (context 2048) with different seeds."""
    from harness.models.embedded import build_tiny_llama

    root = tmp_path_factory.mktemp("run")
    for step in (10, 20, 30):
        build_tiny_llama(root / f"ckpt-{step}", bpe_tokenizer_dir, seed=step, max_position_embeddings=2048)
    return root


@pytest.fixture
def isolated_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path
