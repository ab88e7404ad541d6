"""AA-LCR test fixtures: the released-layout questions and zip beside this folder, a configured
judge address, and the data caches cleared around each test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tasks.aa_lcr import data

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(HERE.parents[1]))


@pytest.fixture
def aa_lcr_data(monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(FIXTURES))
    data.clear_cache()
    yield FIXTURES
    data.clear_cache()
