"""HELMET's ICL datasets: train (demo pool) and test rows as {"text", "label": int} plus label names.

Offline: HARNESS_ICL_DATA=DIR with, per dataset (trec_coarse, trec_fine, banking77, clinic150, nlu),
    DIR/<dataset>/train.jsonl   rows {"text": str, "label": int}
    DIR/<dataset>/test.jsonl    rows {"text": str, "label": int}
    DIR/<dataset>/labels.json   ["label name for id 0", "for id 1", ...]
Online (no folder set): the hub datasets HELMET uses - CogComp/trec (coarse_label / fine_label),
PolyAI/banking77, clinc_oos "plus" (validation as test, as HELMET does), and
xingkunliuxtracta/nlu_evaluation_data split 90/10 with datasets' train_test_split(seed=42).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import Field

from harness.core.errors import TaskUnavailable
from tasks.data.reader import Row, read_json, read_jsonl

ENV_VAR = "HARNESS_ICL_DATA"
NUM_LABELS = {"trec_coarse": 6, "trec_fine": 50, "banking77": 77, "clinic150": 151, "nlu": 68}


@dataclass(frozen=True)
class ICLData:
    train: tuple[tuple[str, int], ...]
    test: tuple[tuple[str, int], ...]
    labels: tuple[str, ...]
    hash: str


class IclRow(Row):
    text: str
    label: int = Field(ge=0)


_ROW_FIX = 'write rows {"text": str, "label": int} (label: the index of its name in labels.json)'
_LABELS_FIX = 'write labels.json as a list of label names, ["name of 0", "name of 1", ...]'


def _read_rows(path: Path) -> tuple[tuple[str, int], ...]:
    return tuple((r["text"], r["label"]) for r in read_jsonl(path, _ROW_FIX, row=IclRow))


def _local(folder: Path, name: str):
    d = folder / name
    files = [d / "train.jsonl", d / "test.jsonl", d / "labels.json"]
    missing = [str(f) for f in files if not f.exists()]  # anything else there: the reader says what
    if missing:
        raise TaskUnavailable(
            f"ICL data file {missing[0]} not found: {ENV_VAR} must hold {name}/train.jsonl, test.jsonl and labels.json"
        )
    labels = tuple(read_json(files[2], _LABELS_FIX, shape=list[str]))
    return _read_rows(files[0]), _read_rows(files[1]), labels


def _hub(name: str):
    from harness.core.hub import load_dataset

    def rows(ds, label_field):
        return tuple((r["text"], int(r[label_field])) for r in ds)

    if name.startswith("trec"):
        field = "coarse_label" if name == "trec_coarse" else "fine_label"
        ds = load_dataset("CogComp/trec")
        return rows(ds["train"], field), rows(ds["test"], field), tuple(ds["train"].features[field].names)
    if name == "banking77":
        ds = load_dataset("PolyAI/banking77")
        return rows(ds["train"], "label"), rows(ds["test"], "label"), tuple(ds["train"].features["label"].names)
    if name == "clinic150":
        ds = load_dataset("clinc_oos", "plus")
        return (
            rows(ds["train"], "intent"),
            rows(ds["validation"], "intent"),
            tuple(ds["train"].features["intent"].names),
        )
    ds = load_dataset("xingkunliuxtracta/nlu_evaluation_data")["train"]
    names = tuple(ds.features["label"].names)
    split = ds.train_test_split(test_size=0.1, seed=42)
    return rows(split["train"], "label"), rows(split["test"], "label"), names


@lru_cache(maxsize=16)
def _load(name: str, folder: str | None) -> ICLData:
    if folder:
        train, test, labels = _local(Path(folder), name)
    else:
        from harness.core import hub
        from tasks.data_sources import source

        try:
            train, test, labels = _hub(name)
        except hub.HubUnreachable as exc:
            raise TaskUnavailable(
                f"ICL data for {name} not found ({hub.first_line(exc)}): {source('icl').fix()}"
            ) from None
        except Exception as exc:  # any hub failure becomes one TaskUnavailable line  # noqa: BLE001
            raise TaskUnavailable(
                f"ICL data for {name} could not be loaded from the hub ({hub.first_line(exc)}): {source('icl').fix()}"
            ) from None
    bad = [lab for _, lab in train + test if not 0 <= lab < len(labels)]
    if bad:
        raise TaskUnavailable(f"ICL {name}: label {bad[0]} has no name in labels.json ({len(labels)} names)")
    if not train or not test:
        raise TaskUnavailable(f"ICL {name}: empty train or test split")
    digest = hashlib.sha256(json.dumps([train, test, labels], ensure_ascii=False).encode()).hexdigest()[:16]
    return ICLData(train, test, labels, digest)


def load(name: str) -> ICLData:
    return _load(name, os.environ.get(ENV_VAR))
