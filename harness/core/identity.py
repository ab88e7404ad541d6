"""A record's identity: which stored prediction answers which question under which settings.

    from harness.core.identity import record_key, settings_id, NEUTRAL_SETTINGS
    record_key(record)   # (fingerprint, task, task_version, length, index, seed, dataset_hash, settings_id)

A prediction depends on the model, the sample and every setting that went into producing it
(dtype, rope overrides, context, batch size, template, reasoning controls, served endpoint, ...).
`settings_id` hashes a record's whole `settings` dict except the few fields in NEUTRAL_SETTINGS,
so a setting anyone adds to the record settings joins the identity without touching this file,
and a run with a changed setting computes new records instead of reusing old ones.

Two rules keep stores written before a field existed readable with the same identity:
  - a field whose value is None is left out ("not set" and "not recorded" are the same claim);
  - the id is always computed from the stored settings, never stored itself, so old records
    (which have no id) and new ones are keyed alike, and editing NEUTRAL_SETTINGS re-keys both.
"""

from __future__ import annotations

import hashlib
import json

# Fields of record["settings"] that do not change a prediction, with the reason. Keep it short:
# a field missing here is part of the identity, which is the safe default.
NEUTRAL_SETTINGS: dict[str, str] = {
    # A function of the task (LongBench's middle truncation, "none" for every other task), and
    # its budget is the record's length: both already in the key.
    "truncation": "set by the task; its budget is the record's length",
}


def identity_settings(settings: dict | None) -> dict:
    """The part of a record's settings that its identity hashes."""
    return {k: v for k, v in (settings or {}).items() if k not in NEUTRAL_SETTINGS and v is not None}


def settings_id(settings: dict | None) -> str:
    """12 hex digits of sha256 over the identity settings, as canonical JSON (sorted keys)."""
    if settings is not None and not isinstance(settings, dict):
        raise TypeError("record settings must be an object")
    text = json.dumps(identity_settings(settings), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def record_key(record: dict) -> tuple:
    """(checkpoint fingerprint, task, task_version, length, index, seed, dataset_hash, settings_id).

    The dataset hash is the hash of the data the sample was made from (essays, a LongBench file, ...):
    a data file whose content changed makes new samples, and they must never be answered by the
    records of the old content ("" for tasks that read no data)."""
    c = record["checkpoint"]
    return (
        c["fingerprint"],
        record["task"],
        record["task_version"],
        record["length"],
        record["index"],
        record["seed"],
        record.get("dataset_hash") or "",
        settings_id(record.get("settings")),
    )


# provenance key -> how a record's settings state it. Each is checked by `check_claims`: results.json
# never states a setting its records were not computed with.
def _options(settings: dict) -> dict:
    return settings.get("options") or {}


_CLAIMS = {
    "backend": lambda s: s.get("backend"),
    "dtype": lambda s: s.get("dtype"),
    "batch_size": lambda s: s.get("batch_size"),
    "rope_theta": lambda s: s.get("rope_theta"),
    "rope_scaling": lambda s: s.get("rope_scaling"),
    "template": lambda s: s.get("template"),
    "tokenizer": lambda s: s.get("tokenizer"),
    "decode_rows": lambda s: s.get("decode_rows"),
    "decode_attention": lambda s: s.get("decode_attention"),
    "chat_template": lambda s: s.get("chat_template"),
    "tensor_parallel_size": lambda s: s.get("tensor_parallel_size") or 1,
    "answer_prefix": lambda s: _options(s).get("answer_prefix", True),
    "max_new_tokens": lambda s: _options(s).get("max_new_tokens"),
    "system_prompt": lambda s: _options(s).get("system_prompt"),
    "strip_thinking": lambda s: _options(s).get("strip_thinking", False),
    "max_thinking_tokens": lambda s: _options(s).get("max_thinking_tokens"),
}


def check_claims(records: list[dict], provenance: dict) -> None:
    """AssertionError when a record's settings contradict what the provenance states (a bug: the
    records of results.json are those whose identity matches the command, see harness.pipeline.evaluate)."""
    for r in records:
        s = r.get("settings") or {}
        for key, read in _CLAIMS.items():
            if key in provenance:
                assert read(s) == provenance[key], (
                    f"results.json would claim {key}={provenance[key]!r} over a record computed with "
                    f"{read(s)!r} ({r['task']} length {r['length']} index {r['index']})"
                )
        ctx = provenance.get("max_model_len")
        if ctx is not None:
            allowed = ctx if isinstance(ctx, list) else [ctx]
            assert s.get("max_model_len") in allowed, f"record context {s.get('max_model_len')} not in {allowed}"
        if "endpoint" in provenance:
            ep = s.get("endpoint") or {}
            claimed = provenance["endpoint"]
            assert (ep.get("model"), ep.get("root")) == (claimed.get("model"), claimed.get("root")), (
                f"record endpoint {ep} differs from the provenance's {claimed}"
            )
