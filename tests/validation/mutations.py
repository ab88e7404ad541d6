"""Hypothesis strategies that damage valid files the way hostile or careless users do.

    doc = draw(mutated_json(valid_doc))      # one value replaced, a key dropped or added, a number pushed out of range
    data = draw(mutated_bytes(valid_bytes))  # a byte flipped, bytes inserted (non-UTF-8 among them), a cut, a slice gone

Used by the property tests of every reader of stored and data files (tests/validation/): each
mutated file must give either a valid result or one UserError line, never another exception and
never a silently wrong value.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

# JSON values of every type, the non-finite numbers json.loads accepts included.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([-3, -1, 0, 1, 1.5, 100.5, -0.0, 2**63, "", "1", "4k", "NaN", "\r=1+1", "\uff11"])
    | st.text(max_size=6)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every (path to a container, key) in doc, depth first."""
    out: list[tuple] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((prefix, k))
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((prefix, i))
            out += _paths(v, prefix + (i,))
    return out


def _at(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def mutated_json(draw, doc: Any) -> Any:
    """doc (a parsed JSON document) with one or two damaging edits."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 2))):
        paths = _paths(doc)
        if not paths:
            return draw(VALUES)
        parent_path, key = draw(st.sampled_from(paths))
        parent = _at(doc, parent_path)
        value = parent[key]
        op = draw(st.sampled_from(["replace", "delete", "add", "number", "shorten", "duplicate", "retype"]))
        if op == "retype":  # the same value as another JSON type: 3 -> "3", 3.0, true; "x" -> ["x"]
            parent[key] = draw(st.sampled_from([str(value), [value], {"value": value}, value is not None]))
            if isinstance(value, int) and not isinstance(value, bool) and draw(st.booleans()):
                parent[key] = float(value)
        elif op == "replace":
            parent[key] = draw(VALUES)
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=4))] = draw(VALUES)
        elif op == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
            parent[key] = draw(
                st.sampled_from([-value, value + 1.5, value * 1000, -1, 1.5, float("nan"), float("inf")])
            )
        elif op == "shorten" and isinstance(value, list) and value:
            parent[key] = value[: draw(st.integers(0, len(value) - 1))]
        elif op == "duplicate" and isinstance(value, list) and value:
            parent[key] = value + [value[0]]
        else:
            parent[key] = draw(VALUES)
    return doc


def dumps(doc: Any) -> str:
    return json.dumps(doc, allow_nan=True)


@st.composite
def mutated_bytes(draw, data: bytes) -> bytes:
    """data with one byte-level edit: a flip, an insertion (maybe not UTF-8), a cut or a lost slice."""
    n = len(data)
    i = draw(st.integers(0, max(0, n - 1)))
    op = draw(st.sampled_from(["flip", "insert", "truncate", "delete", "invalid-utf8"]))
    if op == "flip" and n:
        return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
    if op == "insert":
        return data[:i] + draw(st.binary(min_size=1, max_size=8)) + data[i:]
    if op == "truncate":
        return data[:i]
    if op == "delete" and n:
        j = draw(st.integers(i, n))
        return data[:i] + data[j:]
    return data[:i] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\x80\x80", b"\xed\xa0\x80"])) + data[i:]


def one_line(exc: BaseException) -> None:
    """The contract of a UserError: one line (the CLI prints it as `error: <line>`)."""
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text, repr(text)
