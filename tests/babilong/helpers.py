"""Small BABILong sources in the reference's layouts, built here: bAbI test files
(`<id> <statement>` and `<id> <question>\t<answer>\t<supporting ids>` lines, a story restarting at
id 1) and a pg19/ folder of text files."""

from __future__ import annotations

import random

from tasks.babilong.data import TASK_FILES
from tasks.babilong.prompts import TASK_LABELS

PEOPLE = ["Mary", "John", "Daniel", "Sandra"]
PLACES = ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"]
_VERBS = ["moved to", "went to", "travelled to", "journeyed to", "went back to"]
_WORDS = [
    "the",
    "old",
    "house",
    "stood",
    "near",
    "a",
    "river",
    "where",
    "the",
    "morning",
    "light",
    "fell",
    "across",
    "quiet",
    "fields",
    "and",
    "the",
    "children",
    "walked",
    "slowly",
    "toward",
    "the",
    "village",
    "with",
    "their",
    "baskets",
    "while",
    "a",
    "dog",
    "barked",
    "somewhere",
    "beyond",
    "the",
    "hill",
    "and",
    "nobody",
    "seemed",
    "to",
    "notice",
    "how",
    "the",
    "clouds",
    "gathered",
    "above",
    "the",
    "church",
    "tower",
    "that",
    "long",
    "afternoon",
]


def qa1_story(rng: random.Random, statements: int = 6, every: int = 2) -> list[str]:
    """A qa1-style story: moves, and a "Where is X?" after every `every` statements, answered right."""
    lines, where, n = [], {}, 0
    for k in range(statements):
        n += 1
        who, place = rng.choice(PEOPLE), rng.choice(PLACES)
        where[who] = (place, n)
        lines.append(f"{n} {who} {rng.choice(_VERBS)} the {place}.")
        if (k + 1) % every == 0:
            n += 1
            who = rng.choice(sorted(where))
            lines.append(f"{n} Where is {who}? \t{where[who][0]}\t{where[who][1]}")
    return lines


def write_babi(folder, tasks=tuple(TASK_FILES), stories: int = 4, seed: int = 0) -> None:
    """One test file per task. qa1's answers follow its facts; the other tasks reuse qa1's stories
    with an answer from their own label set (enough to drive prompts, fitting and scoring)."""
    folder.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        rng = random.Random(f"{seed}-{task}")
        lines = []
        for s in range(stories):
            story = qa1_story(rng, statements=4 + 2 * s)
            if task != "qa1":
                story = [
                    (ln.split("\t")[0] + "\t" + rng.choice(TASK_LABELS[task]) + "\t" + ln.split("\t")[2])
                    if "\t" in ln
                    else ln
                    for ln in story
                ]
            lines += story
        (folder / f"{TASK_FILES[task]}_test.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_pg19(folder, books: int = 3, sentences: int = 120, seed: int = 0) -> None:
    """Books of plain English-like sentences (12-24 words each, hard-wrapped like PG19's text)."""
    d = folder / "pg19"
    d.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for b in range(books):
        sents = []
        for _ in range(sentences):
            words = [rng.choice(_WORDS) for _ in range(rng.randint(12, 24))]
            sents.append(" ".join(words).capitalize() + rng.choice([".", ".", "!", "?"]))
        text, line = [], ""
        for w in " ".join(sents).split(" "):  # hard-wrap at about 70 characters, as Gutenberg texts are
            if len(line) + len(w) > 70:
                text.append(line)
                line = w
            else:
                line = f"{line} {w}" if line else w
        text.append(line)
        (d / f"{10000 + b}.txt").write_text(f"BOOK {b}\n\n" + "\n".join(text) + "\n", encoding="utf-8")
