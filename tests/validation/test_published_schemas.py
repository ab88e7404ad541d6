"""docs/schemas/ holds the JSON Schemas of the pydantic models the readers validate with: the one
definition, published. Regenerate with `python -m harness.core.published_schemas docs/schemas`."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.published_schemas import json_schemas

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


def test_published_schemas_are_current():
    for name, schema in json_schemas().items():
        published = json.loads((DOCS / name).read_text(encoding="utf-8"))
        assert published == schema, f"{name} is stale: run `python -m harness.core.published_schemas docs/schemas`"


def test_the_schemas_accept_extra_fields_where_records_grow():
    record = json_schemas()["samples-record.schema.json"]
    assert record.get("additionalProperties") is True  # e.g. settings_id
    assert record["properties"]["settings"]["additionalProperties"] is True  # e.g. options, endpoint, judge
    meta = record["$defs"]["RecordMetadata"]
    assert meta.get("additionalProperties") is True
