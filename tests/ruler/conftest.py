"""Fixtures for the RULER tests: tiny SQuAD / HotpotQA files in the official JSON layouts."""

import json
import random

import pytest

from tasks.data.words import nouns


def _paragraph(rng, n_words=60):
    return " ".join(rng.choice(nouns()) for _ in range(n_words)) + "."


@pytest.fixture(scope="session")
def squad_file(tmp_path_factory):
    rng = random.Random(1)
    data = {"version": "v2.0", "data": []}
    for a in range(4):
        paragraphs = []
        for p in range(8):
            ctx = f"Paragraph {a}-{p}. " + _paragraph(rng)
            qas = [
                {
                    "question": f"What is item {a}-{p}?",
                    "id": f"q{a}{p}",
                    "is_impossible": False,
                    "answers": [
                        {"text": f"answer {a}-{p}", "answer_start": 0},
                        {"text": f"item {a}-{p}", "answer_start": 0},
                    ],
                },
                {
                    "question": f"Unanswerable {a}-{p}?",
                    "id": f"u{a}{p}",
                    "is_impossible": True,
                    "answers": [],
                    "plausible_answers": [{"text": "x", "answer_start": 0}],
                },
            ]
            paragraphs.append({"context": ctx, "qas": qas})
        data["data"].append({"title": f"Article{a}", "paragraphs": paragraphs})
    path = tmp_path_factory.mktemp("squad") / "dev-v2.0.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="session")
def hotpot_file(tmp_path_factory):
    rng = random.Random(2)
    data = []
    for q in range(12):
        ctx = [[f"Title {q}-{j}", [f"Sentence one of {q}-{j}. ", _paragraph(rng, 10)]] for j in range(10)]
        data.append(
            {
                "_id": f"h{q}",
                "question": f"Which title is {q}?",
                "answer": f"Title {q}-0",
                "supporting_facts": [[f"Title {q}-0", 0]],
                "context": ctx,
                "type": "bridge",
                "level": "easy",
            }
        )
    path = tmp_path_factory.mktemp("hotpot") / "hotpot_dev_distractor_v1.json"
    path.write_text(json.dumps(data))
    return path
