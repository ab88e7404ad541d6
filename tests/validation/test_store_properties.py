"""samples.jsonl readers on damaged stores: a line that does not follow the record schema is an error
naming the file and the line; a store that reads is aggregated and printed without any other
exception, and every record it yields is in range (what the averages and the bootstrap use)."""

from __future__ import annotations

import json
import math
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.errors import UserError
from harness.pipeline.store import StoreError, read_store

from .mutations import dumps, mutated_bytes, mutated_json, one_line
from .test_results_properties import _records

HEADER = {
    "type": "header",
    "schema_version": 1,
    "created": "2026-01-01T00:00:00",
    "package_version": "0",
    "git_hash": None,
}
RECORDS = _records()
VALID_TEXT = "".join(json.dumps(r) + "\n" for r in [HEADER, *RECORDS])


def _store(text: bytes) -> str:
    d = tempfile.mkdtemp()
    path = os.path.join(d, "samples.jsonl")
    with open(path, "wb") as f:
        f.write(text)
    return path


def _check_records(records: list[dict]) -> None:
    """In range, checked by hand (not by the schema under test)."""
    for r in records:
        assert 0 <= r["score"] <= 1 and math.isfinite(r["score"]) and not isinstance(r["score"], bool)
        for key in ("length", "index", "seed"):
            assert isinstance(r[key], int) and not isinstance(r[key], bool) and r[key] >= 0
        assert isinstance(r["checkpoint"]["fingerprint"], str) and isinstance(r["task"], str)
        meta = r.get("metadata") or {}
        if "nll" in meta:
            assert math.isfinite(meta["nll"]) and meta["nll"] >= 0 and isinstance(meta["tokens"], int)


def _consume(path: str) -> None:
    from harness.pipeline.reaggregate import results_from_store
    from harness.pipeline.table import format_table
    from tasks.registry import all_suites

    _, records = read_store(path)
    _check_records(records)
    if records:
        format_table(results_from_store(path, suite_tasks=all_suites()))


def _run(text: bytes) -> None:
    path = _store(text)
    try:
        _consume(path)
    except StoreError as exc:
        one_line(exc)
        assert path in str(exc)
    except UserError as exc:  # e.g. "no records yet"
        one_line(exc)


def test_the_valid_store_reads():
    path = _store(VALID_TEXT.encode())
    assert len(read_store(path)[1]) == len(RECORDS)
    _consume(path)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=st.integers(0, len(RECORDS) - 1), data=st.data())
def test_a_damaged_record_is_refused_by_line_or_read_safely(line, data):
    rec = data.draw(mutated_json(RECORDS[line]))
    lines = [json.dumps(HEADER)] + [json.dumps(r) for r in RECORDS]
    lines[line + 1] = dumps(rec)
    _run(("\n".join(lines) + "\n").encode())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_bytes(VALID_TEXT.encode()))
def test_damaged_bytes_are_refused_or_read_safely(text):
    _run(text)
