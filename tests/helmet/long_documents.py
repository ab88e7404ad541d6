"""LongQA / Summ fixture data, generated: NarrativeQA, InfiniteBench (En.QA, En.MC, En.Sum) and
Multi-LexSum rows in the hub datasets' layout, with documents sized in the tokens of a stand-in
"Llama-2 tokenizer" so that HELMET's length filters can be tried just above and just below
their bounds without a model download or megabytes of committed text.

    from tests.helmet.long_documents import build_llama2_standin, hub_rows, write_local
    build_llama2_standin(DIR)      # one token per character, BOS prepended (Llama-2 counts its BOS)
    rows = hub_rows()              # {"narrativeqa": {"train": [...], "test": [...], ...}, ...}
    write_local(FOLDER, rows)      # the same rows in --helmet-data's layout (tasks.helmet.judged)

With the stand-in, a document of n characters is n + 1 "Llama-2 tokens". The bounds HELMET's
data.py applies, and the documents here around them:
  NarrativeQA    more than 131,072: 131,073 (kept), 131,072 (dropped), a noise book (kept), a short one
  Multi-LexSum   at least 65,536:   65,536 (kept), 65,535 (dropped), 65,537 and a noise case (kept),
                 a long case without summary/short (dropped by the first filter), a short one
  InfiniteBench  at least 65,536:   65,536 (kept), 65,535 (dropped), a noise book and a 90K one (kept),
                 a short one (dropped); the three tasks share the books, as InfiniteBench's do
"Noise" text (rare characters, some of two UTF-8 bytes) is more test-BPE tokens than characters,
so HELMET's overflow cut (model_utils.tokenize) fires on it at every length; the prose compresses
and is not cut.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

from harness.models.embedded import SPECIALS, save_with_bos

NARRATIVEQA_BOUND = 131072  # data.load_narrativeqa: input_length > 131072
SUMM_BOUND = 65536  # data.filter_length(..., 65536): >= (Multi-LexSum, InfiniteBench)
TOPICS = ["river", "castle", "violin", "comet", "harbor", "glacier", "orchard", "lantern", "canyon", "meadow"]
NOISE = "QZXJKVWPqzxj#%&~^|;@$\u00e9\u00f8\u00df\u00f1"  # the last four: 2 UTF-8 bytes, 2 test-BPE tokens
ALPHABET = [chr(c) for c in range(32, 127)] + ["\n"] + [c for c in NOISE if not c.isascii()]


def build_llama2_standin(out_dir: str | Path) -> Path:
    """A character-level tokenizer (printable ASCII, newline and NOISE's letters; no merges, no pre-tokenizer) that
    prepends BOS, saved as a Hugging Face tokenizer folder: the unit HELMET's LongQA / Summ budgets
    are counted in, for both HELMET's data.py and ours (HARNESS_LLAMA2_TOKENIZER)."""
    from tokenizers import Tokenizer, models

    vocab = {ch: i for i, ch in enumerate(ALPHABET)}
    for s in [*SPECIALS, "<unk>"]:
        vocab[s] = len(vocab)
    return save_with_bos(Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")), out_dir)


def standin_tokens(text: str) -> int:
    """The stand-in's token count of `text` (BOS included), without loading it."""
    return len(text) + 1


def _prose(rng: random.Random, chars: int, who: str) -> str:
    parts, n = [], 0
    while n < chars:
        s = f"The {rng.choice(TOPICS)} keeper {who} walked past the {rng.choice(TOPICS)} at hour {rng.randrange(24)}. "
        parts.append(s)
        n += len(s)
    return "".join(parts)[:chars]


def _noise(rng: random.Random, chars: int) -> str:
    return "".join(" " if rng.random() < 0.15 else rng.choice(NOISE) for _ in range(chars))


def _document(rng: random.Random, tokens: int, who: str, noise: bool = False) -> str:
    """A document of exactly `tokens` stand-in tokens (BOS included)."""
    return _noise(rng, tokens - 1) if noise else _prose(rng, tokens - 1, who)


def _words(text: str) -> list[str]:
    return text.split()


def _book(doc_id: str, text: str) -> dict:
    """A NarrativeQA document as the hub holds it (HELMET reads its text only)."""
    return {
        "id": doc_id,
        "kind": "gutenberg",
        "url": f"http://example.org/{doc_id}.txt",
        "file_size": len(text),
        "word_count": len(_words(text)),
        "start": "START",
        "end": "END",
        "summary": {"text": f"A story, {doc_id}.", "tokens": ["A", "story"], "url": "", "title": doc_id},
        "text": text,
    }


def _qa_row(document: dict, question: str, answers: list[str]) -> dict:
    return {
        "document": document,
        "question": {"text": question, "tokens": _words(question)},
        "answers": [{"text": a, "tokens": _words(a)} for a in answers],
    }


def _narrativeqa(rng: random.Random) -> dict[str, list[dict]]:
    docs = [  # (stand-in tokens, noise, questions on it)
        (NARRATIVEQA_BOUND + 1, False, 2),
        (NARRATIVEQA_BOUND, False, 1),
        (NARRATIVEQA_BOUND + 40, True, 1),
        (3000, False, 1),
    ]
    test = []
    for d, (tokens, noise, questions) in enumerate(docs):
        document = _book(f"doc{d}", _document(rng, tokens, f"N{d}", noise))
        for q in range(questions):
            place = TOPICS[(d + q) % 10]
            test.append(
                _qa_row(document, f"Where did keeper N{d} walk at hour {q}?", [f"Past the {place}", f"the {place}"])
            )
    train = [
        _qa_row(
            _book(f"train{t}", _prose(rng, 400, f"T{t}")),
            f"Who walked in training story {t}?",
            [f"Keeper T{t}", f"T{t}"],
        )
        for t in range(5)
    ]
    return {"train": train, "test": test, "validation": train[:1]}


def _sources(rng: random.Random, tokens: int, who: str, parts: int, noise: bool = False) -> list[str]:
    """Source documents whose "\\n\\n" join is exactly `tokens` stand-in tokens."""
    chars = tokens - 1 - 2 * (parts - 1)
    sizes = [chars // parts] * parts
    sizes[-1] += chars - sum(sizes)
    return [_noise(rng, n) if noise else _prose(rng, n, who) for n in sizes]


def _multi_lexsum(rng: random.Random) -> dict[str, list[dict]]:
    cases = [  # (stand-in tokens, source documents, noise, has a short summary)
        (SUMM_BOUND, 2, False, True),
        (SUMM_BOUND - 1, 3, False, True),
        (SUMM_BOUND + 1, 1, False, True),
        (SUMM_BOUND + 500, 3, True, True),
        (SUMM_BOUND + 900, 2, False, False),
        (2000, 2, False, True),
    ]
    validation = []
    for c, (tokens, parts, noise, short) in enumerate(cases):
        validation.append(
            {
                "id": f"CR-TEST-{c:04d}",
                "sources": _sources(rng, tokens, f"M{c}", parts, noise),
                "summary/long": f"The long summary of case {c}: the city was sued, and the parties settled.",
                "summary/short": f"Case {c}: the city settled." if short else None,
                "summary/tiny": f"Case {c}.",
            }
        )
    train = [
        {
            "id": f"CR-TRAIN-{t:04d}",
            "sources": [_prose(rng, 300, f"S{t}")],
            "summary/long": f"The long summary of training case {t}.",
            "summary/short": None if t == 1 else f"Training case {t} was dismissed.",
            "summary/tiny": f"Training case {t}.",
        }
        for t in range(6)
    ]
    return {"train": train, "validation": validation, "test": train[:2]}


def _infinitebench(rng: random.Random) -> dict[str, list[dict]]:
    books = [
        _document(rng, SUMM_BOUND, "B0"),
        _document(rng, SUMM_BOUND - 1, "B1"),
        _document(rng, SUMM_BOUND + 300, "B2", noise=True),
        _document(rng, 90000, "B3"),
        _document(rng, 2500, "B4"),
    ]
    splits: dict[str, list[dict]] = {"longbook_qa_eng": [], "longbook_choice_eng": [], "longbook_sum_eng": []}
    for b, book in enumerate(books):
        place = TOPICS[b]
        options = [f"The {TOPICS[(b + i) % 10]}" for i in range(4)]
        splits["longbook_qa_eng"].append(
            {
                "id": b,
                "context": book,
                "input": f"Where did keeper B{b} walk first?",
                "answer": [f"past the {place}", f"the {place}"],
                "options": [],
            }
        )
        splits["longbook_choice_eng"].append(
            {
                "id": b,
                "context": book,
                "input": f"Which place did keeper B{b} pass?",
                "answer": [options[b % 4]],
                "options": options,
            }
        )
        splits["longbook_sum_eng"].append(
            {
                "id": b,
                "context": book,
                "input": "",
                "answer": [f"  Keeper B{b} walks past the {place} every hour. \n"],
                "options": [],
            }
        )
    return splits


@lru_cache(maxsize=1)
def hub_rows() -> dict[str, dict[str, list[dict]]]:
    """The three hub datasets' splits (rows as the hub's parquet holds them), the same on every run."""
    rng = random.Random(20240901)
    return {
        "narrativeqa": _narrativeqa(rng),
        "allenai/multi_lexsum": _multi_lexsum(rng),
        "xinrongzhang2022/infinitebench": _infinitebench(rng),
    }


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_local(folder: Path, rows: dict | None = None) -> Path:
    """The rows in --helmet-data's layout (tasks.helmet.judged, tasks.helmet.infbench): the hub's
    rows as JSON lines; Multi-LexSum's validation rows joined with key points (HELMET's
    multi_lexsum_val.jsonl), InfiniteBench's splits under their release names."""
    rows = rows or hub_rows()
    nqa, mls, inf = rows["narrativeqa"], rows["allenai/multi_lexsum"], rows["xinrongzhang2022/infinitebench"]
    _jsonl(folder / "narrativeqa" / "test.jsonl", nqa["test"])
    _jsonl(folder / "narrativeqa" / "train.jsonl", nqa["train"])
    keypoints = ["The city was sued.", "The parties settled."]
    _jsonl(
        folder / "multi_lexsum" / "multi_lexsum_val.jsonl",
        [{**r, "summary/short_keypoints": keypoints} for r in mls["validation"]],
    )
    _jsonl(folder / "multi_lexsum" / "train.jsonl", mls["train"])
    for split, split_rows in inf.items():
        _jsonl(folder / "infbench" / f"{split}.jsonl", split_rows)
    _jsonl(
        folder / "infbench" / "longbook_sum_eng_keypoints.jsonl",
        [{"id": r["id"], "keypoints": ["The keeper walks."]} for r in inf["longbook_sum_eng"]],
    )
    return folder
