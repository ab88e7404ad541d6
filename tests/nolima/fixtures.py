"""A small NoLiMa data folder in the reference's layout, built by the tests (no download).

The needle set follows NoLiMa's needle_set.json format (id, needle with {CHAR} and {1}..,
questions by type, tests with input_args, character_set); its needles are our own, modelled on
the paper's example. The books are deterministic pseudo-text with newlines (NoLiMa places needles
after newline tokens).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

NEEDLE_SET = [
    {
        "id": "0401_landmark",
        "system_prompt": "",
        "needle": "Actually, {CHAR} lives next to the {1}.",
        "questions": {
            "onehop": "Which character has been to {2}?",
            "twohop": "Which character has been to the state of {3}?",
            "direct": "Which character lives next to the {1}?",
        },
        "tests": {
            "T01": {"input_args": ["Semper Opera House", "Dresden", "Saxony"]},
            "T02": {"input_args": ["Kiasma museum", "Helsinki", "Uusimaa"]},
        },
        "character_set": ["Yuki", "Stuart", "Katie", "Veronica", "Gary", "Megan", "Calvin", "Mandy", "Diana"],
    },
    {
        "id": "0502_diet",
        "system_prompt": "",
        "needle": "There was a vegan guest, named {CHAR}.",
        "questions": {"onehop": "Which character cannot eat {1}?"},
        "tests": {"T01": {"input_args": ["fish-based meals"]}, "T02": {"input_args": ["dairy desserts"]}},
        "character_set": ["Caroline", "Brandon", "Emma", "Yosef"],
    },
]

_WORD_TEXT = (
    "the river old house road light morning letter window garden village quiet small evening "
    "friend voice stone field winter summer door table bread water horse long short green "
    "walked looked said thought turned waited carried opened closed remembered slowly again "
    "under over before after while because never always often there here then when"
)
WORDS = _WORD_TEXT.split(" ")


def book(seed: int, lines: int = 300) -> str:
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        sentences = []
        for _ in range(rng.randint(1, 3)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(5, 12))]
            sentences.append(" ".join(words).capitalize() + ".")
        out.append(" ".join(sentences))
    return "\n".join(out) + "\n"


def write_nolima(folder: Path, needle_set=None, books=(1, 2)) -> Path:
    (folder / "needlesets").mkdir(parents=True, exist_ok=True)
    (folder / "needlesets" / "needle_set.json").write_text(json.dumps(NEEDLE_SET if needle_set is None else needle_set))
    hay = folder / "haystack" / "rand_shuffle"
    hay.mkdir(parents=True, exist_ok=True)
    for i in books:
        (hay / f"rand_book_{i}.txt").write_text(book(i))
    return folder
