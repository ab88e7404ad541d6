"""MRCR test fixtures: the released-layout parquet files beside this folder, the stand-in bin counter
(o200k_base cannot be had offline: benchmarks/mrcr_parity.py's count, which its pins were made with)
and the tests' BPE tokenizer with a chat template."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tasks.mrcr import data

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(HERE.parents[1]))


@pytest.fixture
def mrcr_data(monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(FIXTURES))
    data.clear_cache()
    yield FIXTURES
    data.clear_cache()


@pytest.fixture
def stand_in_counter(monkeypatch, tmp_path):
    """Our bins counted with the parity script's stand-in counter; the per-process counts reset, and
    the counts kept on disk (tasks.mrcr.counts) go to this test's own cache."""
    from benchmarks import mrcr_parity
    from tasks.mrcr import bins, tasks

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bins, "reference_counter", lambda: mrcr_parity.count)
    tasks._BIN_TOKENS.clear()
    tasks._PROMPT_TOKENS.clear()
    yield mrcr_parity.count
    tasks._BIN_TOKENS.clear()
    tasks._PROMPT_TOKENS.clear()


@pytest.fixture(scope="session")
def chat_tokenizer(bpe_tokenizer_dir):
    from benchmarks import mrcr_parity

    return mrcr_parity.tokenizer_with_template(str(bpe_tokenizer_dir))


@pytest.fixture(scope="session")
def tiny_chat_llama(tiny_llama_dir, tmp_path_factory):
    """The tiny Llama with the parity script's chat template in its tokenizer_config.json."""
    import json

    from benchmarks import mrcr_parity

    out = tmp_path_factory.mktemp("tiny-chat") / "model"
    shutil.copytree(tiny_llama_dir, out)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = mrcr_parity.CHAT_TEMPLATE
    cfg_path.write_text(json.dumps(cfg))
    return out
