"""Fixtures for the training-loop tests: a generated corpus, tokenized once, and small jobs.

The tests build their Pipeline from pre-tokenized documents (`docs_pipeline`) so that the loop is
tested on its own; the CLI test goes through training.data like a user's run.
"""

from __future__ import annotations

import pytest

from .helpers import docs_pipeline

GOLDEN_NUM_DOCS = 120


@pytest.fixture(scope="session")
def corpus_path(tmp_path_factory):
    from training.corpus import write_corpus

    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    write_corpus(path, GOLDEN_NUM_DOCS, seed=0, max_words=1500)
    return path


@pytest.fixture(scope="session")
def corpus_docs(corpus_path, bpe_tokenizer):
    """The corpus as token lists: no BOS, EOS at the end (the packing rule)."""
    import json

    docs = []
    for line in corpus_path.read_text().splitlines():
        rec = json.loads(line)
        ids = bpe_tokenizer(rec["text"], add_special_tokens=False)["input_ids"] + [bpe_tokenizer.eos_token_id]
        docs.append((ids, rec["domain"]))
    return docs


@pytest.fixture
def run_job(corpus_docs, bpe_tokenizer):
    """run_job(job, docs=None, **train_kwargs) -> summary, over the tokenized corpus (or `docs`)."""
    from training.loop import train

    def _run(job, docs=None, **kw):
        pipeline = docs_pipeline(job, corpus_docs if docs is None else docs, bpe_tokenizer.bos_token_id)
        return train(job, pipeline=pipeline, progress=False, **kw)

    return _run
