"""Fixtures of the follower tests (helpers.py holds the shared constants and functions)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    from training.corpus import write_corpus

    path = tmp_path_factory.mktemp("follow-corpus") / "corpus.jsonl"
    write_corpus(path, 30, seed=0, max_words=400)
    return path
