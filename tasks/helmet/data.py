"""HELMET's released files, read from a local folder: --helmet-data DIR / HARNESS_HELMET=DIR.

DIR is HELMET's data.tar.gz unpacked (hub dataset princeton-nlp/HELMET, about 34 GB), plus its
repository's prompts/ folder for ALCE:

    DIR/kilt/nq-dev-multikilt_1000_k1000_dep6.jsonl         RAG test items  {question, answers, ctxs}
    DIR/kilt/nq-train-multikilt_1000_k3_dep6.jsonl           RAG demos (popqa: popqa_test_1000_k3_dep6)
    DIR/msmarco/test_reranking_data_k1000_dep3.jsonl         re-ranking      {qid, query, ctxs[id, text, label]}
    DIR/msmarco/test_reranking_data_k10_dep3.jsonl           re-ranking demos
    DIR/alce/asqa_eval_gtr_top2000.json, qampari_...         ALCE items      {question, docs, qa_pairs | answers}
    DIR/prompts/asqa_revised.json, qampari_revised.json      ALCE instruction, doc format and demos
    DIR/narrativeqa/{test,train}.jsonl, DIR/multi_lexsum/..  judged tasks (see tasks.helmet.judged)

Under --protocol reference each length reads the file HELMET's config names for it (k50 at 8K ...
k1000 at 128K: tasks.helmet.reference.RUNS); under exact-length the one with the most passages is
used and the number shown is chosen per sample to fit the length (tasks.helmet.tasks).
The hub holds HELMET's data as one 34 GB archive, so there is no per-task online route: without
the folder a task is unavailable with one line naming the folder and the file it looks for.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path

from harness.core.errors import TaskUnavailable
from tasks.data.reader import read_bytes

ENV_VAR = "HARNESS_HELMET"
FIX = f"pass --helmet-data DIR (or set {ENV_VAR}) to HELMET's data.tar.gz unpacked (hub dataset princeton-nlp/HELMET)"


def data_dir() -> Path | None:
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else None


def find(pattern: str, what: str) -> Path:
    """The file under DIR matching `pattern` (a glob) with the most passages (largest _k<N>_)."""
    folder = data_dir()
    if folder is None:
        raise TaskUnavailable(f"HELMET {what} needs the file {pattern}: {FIX}")
    hits = sorted(folder.glob(pattern))
    if not hits:
        raise TaskUnavailable(f"HELMET {what}: no file {folder / pattern}: {FIX}")

    def k_of(p: Path) -> int:
        m = re.search(r"_k(\d+)_", p.name)
        return int(m.group(1)) if m else 0

    return max(hits, key=lambda p: (k_of(p), p.name))


@lru_cache(maxsize=32)
def _read(path: Path, mtime: float) -> tuple[tuple[dict, ...], str]:
    raw = read_bytes(path, "re-extract HELMET's data")  # a regular file: a FIFO never blocks the read
    try:
        text = raw.decode("utf-8")
        if path.suffix == ".json":
            data = json.loads(text)
            rows = data["data"] if isinstance(data, dict) and "data" in data else data
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (UnicodeDecodeError, ValueError, KeyError):
        raise TaskUnavailable(f"{path} is not UTF-8 JSON / JSON lines: re-extract HELMET's data") from None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise TaskUnavailable(f"{path} holds no records (a list of JSON objects): re-extract HELMET's data")
    return tuple(rows), hashlib.sha256(raw).hexdigest()[:16]


def read_records(path: Path, required: tuple[str, ...]) -> tuple[tuple[dict, ...], str]:
    """The records of a HELMET file and its content hash; each record must hold `required`."""
    rows, digest = _read(path, path.stat().st_mtime)
    for n, r in enumerate(rows):
        missing = [k for k in required if k not in r]
        if missing:
            raise TaskUnavailable(
                f"{path} record {n} lacks {', '.join(missing)}: it is not a HELMET file for this task"
            )
    return rows, digest


def read_json(path: Path) -> tuple[dict, str]:
    raw = read_bytes(path, "copy HELMET's prompts/ folder again")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise TaskUnavailable(f"{path} is not UTF-8 JSON: copy HELMET's prompts/ folder again") from None
    if not isinstance(data, dict):
        raise TaskUnavailable(f"{path} is not a JSON object: copy HELMET's prompts/ folder again")
    return data, hashlib.sha256(raw).hexdigest()[:16]
