"""SQuAD v2 dev and HotpotQA dev (distractor), read the way RULER's qa.py reads them.

Sources, first found wins: an explicit path (`--squad PATH` / `--hotpotqa PATH`), the env
variables HARNESS_SQUAD / HARNESS_HOTPOTQA, or the hub when online (rajpurkar/squad_v2,
hotpotqa/hotpot_qa "distractor", validation split, via `datasets`). The files are the official
JSON (dev-v2.0.json, hotpot_dev_distractor_v1.json).

SQuAD: documents = sorted set of paragraph contexts; questions = answerable ones, in file order,
with the other paragraphs of the same article as preferred distractors. HotpotQA: documents =
sorted set of "{title}\\n{joined sentences}"; each question's 10 paragraphs are its context.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.errors import TaskUnavailable


@dataclass
class QaData:
    qas: list[dict]  # {"query", "outputs", "context": [doc ids], "more_context": [doc ids]}
    docs: list[str]
    hash: str
    source: str


FIXES = {
    "squad": "pass --squad PATH (SQuAD v2 dev-v2.0.json) or set HARNESS_SQUAD",
    "hotpotqa": "pass --hotpotqa PATH (hotpot_dev_distractor_v1.json) or set HARNESS_HOTPOTQA",
}
ENV = {"squad": "HARNESS_SQUAD", "hotpotqa": "HARNESS_HOTPOTQA"}


def read_squad(data: dict) -> tuple[list[dict], list[str]]:
    docs = sorted({p["context"] for d in data["data"] for p in d["paragraphs"]})
    ids = {c: i for i, c in enumerate(docs)}
    qas = []
    for d in data["data"]:
        more = [ids[p["context"]] for p in d["paragraphs"]]
        for p in d["paragraphs"]:
            for q in p["qas"]:
                if not q["is_impossible"]:
                    qas.append(
                        {
                            "query": q["question"],
                            "outputs": [a["text"] for a in q["answers"]],
                            "context": [ids[p["context"]]],
                            "more_context": [i for i in more if i != ids[p["context"]]],
                        }
                    )
    return qas, docs


def read_hotpotqa(data: list) -> tuple[list[dict], list[str]]:
    # each paragraph's text is built once (it is the slow part of loading: ~74k paragraphs)
    per_question = [[f"{t}\n{''.join(p)}" for t, p in d["context"]] for d in data]
    docs = sorted({c for texts in per_question for c in texts})
    ids = {c: i for i, c in enumerate(docs)}
    qas = [
        {"query": d["question"], "outputs": [d["answer"]], "context": [ids[c] for c in texts], "more_context": []}
        for d, texts in zip(data, per_question)
    ]
    return qas, docs


def _online() -> bool:
    """One quick connection attempt, so offline machines fail fast instead of retrying for 20 s."""
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=2).close()
        return True
    except OSError:
        return False


def _from_hub(name: str):
    """The hub copies converted to the official JSON layout (only when online)."""
    if os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1" or not _online():
        return None
    try:
        import datasets

        if name == "squad":
            ds = datasets.load_dataset("rajpurkar/squad_v2", split="validation")
            arts: dict[str, dict] = {}
            for r in ds:
                art = arts.setdefault(r["title"], {"paragraphs": {}})
                par = art["paragraphs"].setdefault(r["context"], {"context": r["context"], "qas": []})
                par["qas"].append(
                    {
                        "question": r["question"],
                        "is_impossible": not r["answers"]["text"],
                        "answers": [{"text": t} for t in r["answers"]["text"]],
                    }
                )
            return {"data": [{"paragraphs": list(a["paragraphs"].values())} for a in arts.values()]}
        ds = datasets.load_dataset("hotpotqa/hotpot_qa", "distractor", split="validation")
        return [
            {
                "question": r["question"],
                "answer": r["answer"],
                "context": list(zip(r["context"]["title"], r["context"]["sentences"])),
            }
            for r in ds
        ]
    except Exception:  # offline or hub error: the caller reports the task unavailable  # noqa: BLE001
        return None


@lru_cache(maxsize=4)
def _load(name: str, path: str | None) -> QaData:
    if path:
        p = Path(path).expanduser()
        if not p.is_file():
            raise TaskUnavailable(f"{name} data not found at {p}: {FIXES[name]}")
        raw_bytes = p.read_bytes()
        try:
            raw = json.loads(raw_bytes)
        except ValueError:
            raise TaskUnavailable(f"{p} is not JSON: {FIXES[name]}") from None
        source = str(p)
    else:
        raw = _from_hub(name)
        if raw is None:
            raise TaskUnavailable(
                f"{'SQuAD v2 dev' if name == 'squad' else 'HotpotQA dev (distractor)'} not found: {FIXES[name]}"
            )
        raw_bytes = json.dumps(raw, sort_keys=True).encode()
        source = "hub"
    try:
        qas, docs = read_squad(raw) if name == "squad" else read_hotpotqa(raw)
    except (KeyError, TypeError) as exc:
        raise TaskUnavailable(f"{source} does not look like {name} (missing field {exc}): {FIXES[name]}") from None
    if not qas:
        raise TaskUnavailable(f"{source} holds no answerable questions: {FIXES[name]}")
    return QaData(qas=qas, docs=docs, hash=hashlib.sha256(raw_bytes).hexdigest()[:16], source=source)


def load_qa(name: str, path: str | os.PathLike | None = None) -> QaData:
    path = path or os.environ.get(ENV[name])
    return _load(name, str(path) if path else None)
