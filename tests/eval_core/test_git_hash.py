"""Provenance names the commit of the checkout the package runs from (harness.core.provenance)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.core import provenance

ROOT = Path(__file__).resolve().parents[2]


def test_git_hash_is_this_checkouts_head():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an sdist or a copied tree): there is no commit to name")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    provenance.git_hash.cache_clear()
    got = provenance.git_hash()
    assert got is not None and got.removesuffix("-dirty") == head.stdout.strip()
