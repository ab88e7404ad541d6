"""A small LongBench v2 data.json in the released file's layout (THUDM/LongBench-v2), built here."""

from __future__ import annotations

import json
import random

CELLS = [(d, l) for d in ("easy", "hard") for l in ("short", "medium", "long")]
# How many items each (difficulty, length) cell gets: unequal, so sample-weighted and task-weighted
# averages differ.
PER_CELL = {("easy", "short"): 3, ("easy", "medium"): 1, ("easy", "long"): 2, ("hard", "short"): 1}
PER_CELL.update({("hard", "medium"): 2, ("hard", "long"): 1})
_WORDS = [
    "river",
    "stone",
    "cloud",
    "lamp",
    "harbor",
    "violet",
    "engine",
    "meadow",
    "signal",
    "copper",
    "quiet",
    "ladder",
]


def make_items() -> list[dict]:
    rng = random.Random(7)
    items = []
    for d, l in CELLS:
        for k in range(PER_CELL[(d, l)]):
            i = len(items)
            body = " ".join(rng.choice(_WORDS) for _ in range(120 + 40 * i))
            items.append(
                {
                    "_id": f"lbv2-{i:03d}",
                    "domain": "Single-Document QA" if i % 2 else "Long In-context Learning",
                    "sub_domain": "Academic",
                    "difficulty": d,
                    "length": l,
                    # stray spaces and newlines: pred.py strips every value it fills in
                    "question": f"  Which word opens passage {i} of the {d} {l} set?\n",
                    "choice_A": " river",
                    "choice_B": "stone ",
                    "choice_C": "cloud $Q$",  # a placeholder inside a value: pred.py's replace order shows
                    "choice_D": "\nlamp",
                    "answer": "ABCD"[(i + k) % 4],
                    "context": f"\n Passage {i}.\n{body}\n\nThe end of passage {i}. ",
                }
            )
    return items


def write_data(folder) -> list[dict]:
    items = make_items()
    (folder / "data.json").write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return items
