"""Small BABILong sources in the reference's layouts, built here: bAbI test files
(`<id> <statement>` and `<id> <question>\t<answer>\t<supporting ids>` lines, a story restarting at
id 1) and a pg19/ folder of text files."""

from __future__ import annotations

import random
from pathlib import Path

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


# ------------------------------------------------------------------------------------------------
# The released sets (the "reference" protocol): rows {"input", "question", "target"} in the hub's
# two layouts. The committed fixtures under tests/babilong/released/ are write_fixtures()' output.
# ------------------------------------------------------------------------------------------------
RELEASED = Path(__file__).parent / "released"
# (label, tasks, rows per file, shards): RMT-team/babilong has qa1-qa20 at 0k and qa1-qa10 above;
# RMT-team/babilong-1k-samples qa1-qa20 at 0k and qa1-qa5 above. The fixtures hold a few of each.
FIXTURE_SETS = {
    "babilong": [("0k", 20, 3, 1), ("1k", 10, 3, 1), ("2k", 5, 3, 1)],
    "babilong-1k-samples": [("0k", 20, 4, 1), ("1k", 5, 4, 1), ("2k", 5, 4, 2)],
}
# Text the reference's prompt must carry through unchanged: braces (str.format fills the template,
# the context is a value), curly quotes, accents, a newline inside the context, outer whitespace.
_ODD = ["{context} and {0} stayed in braces.", "Her ’quiet’ café was closed.", "A line\nbroken by the scan."]


def released_row(task: str, label: str, n: int, scale: int = 8) -> dict:
    """A row in the released sets' shape: qa1-style facts hidden among book-like sentences (about
    (label tokens - 300) / scale words of them, as create_tasks.py leaves 300 tokens for the prompt),
    a question about a person of the facts and a target."""
    rng = random.Random(f"released-{task}-{label}-{n}")
    story = [ln for ln in qa1_story(rng, statements=2 + 2 * (n % 3), every=99) if "\t" not in ln]
    facts = [ln.split(" ", 1)[1] for ln in story]
    noise: list[str] = []
    words = (int(label.rstrip("k")) * 1024 - 300) // scale if label != "0k" else 0
    while sum(len(s.split()) for s in noise) < words:
        noise.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(12, 24))).capitalize() + ".")
    if noise:
        noise.insert(rng.randrange(len(noise)), _ODD[n % len(_ODD)])
    for f in facts:  # in story order, at random slots
        noise.insert(rng.randrange(len(noise) + 1), f)
    body = " ".join(noise) if noise else " ".join(facts)
    text = (" " if n % 2 else "") + body + ("\n" if n % 3 == 0 else "")
    last = {ln.split()[0]: ln.split()[-1].rstrip(".") for ln in facts}  # each person's latest place
    who = rng.choice(sorted(last))
    # qa1's target is the answer; the other tasks reuse qa1's facts with a label of their own
    target = last[who] if task == "qa1" else rng.choice(TASK_LABELS[task])
    if task == "qa8" and n % 2:
        target = "apple,milk"
    return {"input": text, "question": f"Where is {who}? " if n % 2 else f"Where is {who}?", "target": target}


def write_fixtures(root: Path = RELEASED, scale: int = 8, rows: int | None = None) -> dict[str, Path]:
    """Both released layouts under root/<set>/; rows overrides the rows per file (the real-model
    parity uses more, at scale 1: contexts of about the label's size)."""
    from tasks.babilong.released import JSON, PARQUET

    out = {}
    for name, spec in FIXTURE_SETS.items():
        form = JSON if name == "babilong" else PARQUET
        for label, last, count, shards in spec:
            for t in range(1, last + 1):
                task = f"qa{t}"
                data = [released_row(task, label, n, scale) for n in range(rows or count)]
                if form == PARQUET:  # the hub's 1k-samples files order the columns question, target, input
                    data = [{"question": r["question"], "target": r["target"], "input": r["input"]} for r in data]
                write_released(root / name, task, label, data, form, shards)
        out[name] = root / name
    return out


def write_released(root: Path, task: str, label: str, rows: list[dict], form: str, shards: int = 1) -> list[Path]:
    """rows as the hub gives them: data/qaN/<label>.json (one JSON array, as create_tasks.py's
    json.dump writes it) or <label>/qaN-0000k-of-0000m.parquet shards."""
    import io
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tasks.babilong.released import JSON

    if form == JSON:
        path = root / "data" / task / f"{label}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rows), encoding="utf-8")
        return [path]
    paths = []
    size = -(-len(rows) // shards)
    for k in range(shards):
        path = root / label / f"{task}-{k:05d}-of-{shards:05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows[k * size : (k + 1) * size]), buf)
        path.write_bytes(buf.getvalue())
        paths.append(path)
    return paths
