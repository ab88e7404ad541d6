"""Sample generation that cannot meet a length (docs/failure-modes.md): one line, at once."""

from __future__ import annotations

import json
import time

from .conftest import records


def _squad(path) -> str:
    """A tiny SQuAD v2 file whose paragraphs are ~100 tokens each."""
    words = " ".join(f"word{i}" for i in range(80))
    data = {
        "version": "v2.0",
        "data": [
            {
                "title": f"A{a}",
                "paragraphs": [
                    {
                        "context": f"Paragraph {a}-{p}. {words}.",
                        "qas": [
                            {
                                "question": f"What is {a}-{p}?",
                                "id": f"q{a}{p}",
                                "is_impossible": False,
                                "answers": [{"text": f"item {a}-{p}", "answer_start": 0}],
                            }
                        ],
                    }
                    for p in range(6)
                ],
            }
            for a in range(4)
        ],
    }
    path.write_text(json.dumps(data))
    return str(path)


def test_qa_below_its_shortest_length_does_not_hang(tiny_llama_dir, run, tmp_path):
    """EleutherAI/lm-evaluation-harness issue 2963: RULER's QA tasks hung in a `while True` loop for
    max_seq_lengths below 4096. Fitting is bounded here: a length too short for the question's own
    documents is said in one line within seconds, and nothing is generated."""
    out = tmp_path / "out"
    t0 = time.monotonic()
    ev = run("eval", "--ckpts", str(tiny_llama_dir), "--tasks", "qa_1", "--lengths", "256", "--samples", "1",
             "--squad", _squad(tmp_path / "dev-v2.0.json"), "--out", str(out))  # fmt: skip
    assert time.monotonic() - t0 < 60
    assert ev.code == 2 and "256" in ev.last_error and not records(out)
