"""Hand-written inputs the round-5 attack tests share (issue 49): a valid results.json and writers."""

from __future__ import annotations

import copy
import json
from pathlib import Path


def stats(mean: float, n: int = 2, **extra) -> dict:
    return {"mean": mean, "std": 1.0, "min": mean - 1, "max": mean + 1, "n": n, "steps": [10, 20], **extra}


GOOD = {
    "schema_version": 1,
    "run": {
        "name": "good",
        "model": "runs/good",
        "mode": "anchor",
        "checkpoints": [
            {"path": "runs/good/ckpt-10", "step": 10, "fingerprint": "a", "training": None},
            {"path": "runs/good/ckpt-20", "step": 20, "fingerprint": "b", "training": None},
        ],
    },
    "provenance": {"package_version": "0.1.0", "git_hash": "0123456789ab", "backend": "hf"},
    "suites": {
        "ruler": {
            "tasks": ["niah_single_1", "vt"],
            "evaluated": ["niah_single_1", "vt"],
            "excluded": [],
            "unavailable": {},
            "lengths": [4096, 8192],
            "per_task": {
                "niah_single_1": {"4096": stats(90.0), "8192": stats(80.0)},
                "vt": {"4096": stats(70.0), "8192": stats(60.0)},
            },
            "per_length": {
                "4096": stats(80.0, tasks_covered=2, tasks_total=2),
                "8192": stats(70.0, tasks_covered=2, tasks_total=2),
            },
            "summary": {
                "avg": stats(75.0),
                "effective_length": {"threshold": 85.6, "value": None, "label": "below the first length"},
                "tasks_covered": 2,
                "tasks_total": 2,
            },
        }
    },
}


def results(name: str = "good", edit=None) -> dict:
    """A copy of GOOD named `name`, changed by edit(data) when given."""
    data = copy.deepcopy(GOOD)
    data["run"]["name"] = name
    if edit is not None:
        edit(data)
    return data


def write_run(folder: Path, data: dict) -> Path:
    """folder/results.json holding data; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(data), encoding="utf-8")
    return folder
