"""The pinned output of benchmarks/babilong_parity.py (parity_pins.json), checked without the reference's
checkout: on the committed released-layout fixtures, every prompt of ours hashes to the prompt
booydar/babilong's get_formatted_input built, and our scores of the pinned predictions are the
reference's verdicts (its CSV round trip and compare_answers). Re-make the pins with

    python benchmarks/babilong_parity.py --reference <checkout> --pin tests/babilong/parity_pins.json

which also prints (and so checks) the token ids with and without a chat template."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tasks.babilong import released
from tasks.registry import get_task

from .helpers import RELEASED

PINS = json.loads((Path(__file__).parent / "parity_pins.json").read_text(encoding="utf-8"))["sets"]


def test_pins_cover_both_layouts_and_every_file():
    files = [(s, t, label) for s, tasks in PINS.items() for t, labels in tasks.items() for label in labels]
    assert sorted(PINS) == ["babilong", "babilong-1k-samples"]
    # the script's printed totals: 65 files, 225 prompts, 2475 predictions scored, 0 mismatches
    assert len(files) == 65
    assert sum(PINS[s][t][label]["rows"] for s, t, label in files) == 225
    assert sum(len(o) for s, t, label in files for o in PINS[s][t][label]["outputs"]) == 2475


@pytest.mark.parametrize("name", sorted(PINS))
def test_prompts_and_scores_match_the_reference(name, monkeypatch):
    monkeypatch.setenv(released._source().env, str(RELEASED / name))
    released.clear_caches()
    text = scores = csv_cases = 0
    for qa, labels in PINS[name].items():
        task = get_task(f"babilong_{qa}")
        for label, pin in labels.items():
            length = released.LABELS[label]
            assert task.default_samples(length) == pin["rows"], (qa, label)
            for i in range(pin["rows"]):
                s = task.sample(length, i, 42, _NoTokens())
                text += hashlib.sha256(s.prompt.encode()).hexdigest() != pin["prompt_sha256"][i]
                for output, correct in zip(pin["outputs"][i], pin["correct"][i], strict=True):
                    scores += (task.score(output, s) == 1.0) != correct
                    csv_cases += output == "None" and s.references[0] == "no"
    released.clear_caches()
    assert (text, scores) == (0, 0)
    assert csv_cases > 0  # the pins include outputs the CSV round trip decides


class _NoTokens:
    """A stand-in tokenizer: prompts and scores do not depend on it (num_tokens is not pinned)."""

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [0] * len(text.split())}
