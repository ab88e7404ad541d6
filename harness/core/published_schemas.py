"""The published JSON Schemas (docs/schemas/): results.json's and the samples.jsonl lines'.

    python -m harness.core.published_schemas docs/schemas     # rewrite them after changing a model

The models live with their readers (harness.core.results_schema, harness.core.store_schema); this module only
renders them, so tests/validation/test_published_schemas.py can check the published files are current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.core.results_schema import Results
from harness.core.store_schema import SampleRecord, StoreHeader


def json_schemas() -> dict[str, dict]:
    """The published JSON Schemas (docs/schemas/): results.json and the samples.jsonl lines."""
    return {
        "results.schema.json": Results.model_json_schema(),
        "samples-record.schema.json": SampleRecord.model_json_schema(),
        "samples-header.schema.json": StoreHeader.model_json_schema(),
    }


def _write_docs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, schema in json_schemas().items():
        (folder / name).write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":  # python -m harness.core.published_schemas [DIR]: rewrite the published schemas
    _write_docs(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas"))
