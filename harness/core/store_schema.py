"""The one schema of a samples.jsonl line (docs/contracts.md, "Per-sample results store").

    from harness.core.store_schema import check_record
    problem = check_record(rec)        # None, or one phrase naming the field: "score": ... (found 1.5)

harness.pipeline.store validates every "sample" line it reads (and every record it appends) against
`SampleRecord`, so what the aggregate averages, the bootstrap resamples and the heatmap bins is
typed and in range: a score in [0, 1], non-negative lengths, indices and seeds, finite numbers,
and the metadata fields the readers compute with (perplexity `nll`/`tokens`, needle
`answer_depths`) of their types. Keys beyond these (in the record, its `settings` and `metadata`)
are allowed: a record may gain fields (e.g. `settings_id`, `settings.options`) without a version
bump. The JSON Schema is published beside results.json's (docs/schemas/).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictInt, StrictStr, ValidationError, model_validator

from harness.core.results_schema import (
    MAX_NLL_PER_TOKEN,
    Count,
    NonNegative,
    Positive,
    RunName,
    Score,
    Strict,
    describe,
)


class StoreHeader(Strict):
    """Line 1 of samples.jsonl."""

    type: Literal["header"]
    schema_version: Positive
    created: str | None = None
    package_version: str | None = None
    git_hash: str | None = None


class RecordCheckpoint(Strict):
    path: str
    fingerprint: str
    step: StrictInt | None = None
    model: str | None = None  # the model it belongs to (run.model); absent in older stores


class RecordMetadata(Strict):
    """The metadata fields a reader computes with; others pass through."""

    nll: NonNegative | None = None  # perplexity: summed negative log-likelihood of the window
    tokens: Positive | None = None  # ... over this many scored tokens
    answer_depths: list[Annotated[float, Field(ge=0, le=100)]] | None = None
    needle_depths: list[Annotated[float, Field(ge=0, le=100)]] | None = None
    references: list[str] | None = None

    @model_validator(mode="after")
    def _perplexity(self) -> RecordMetadata:
        if (self.nll is None) != (self.tokens is None):
            raise ValueError('"nll" and "tokens" come together')
        if self.nll is not None and self.tokens is not None and self.nll > MAX_NLL_PER_TOKEN * self.tokens:
            raise ValueError(f"nll {self.nll} over {self.tokens} tokens is no log-likelihood")
        return self


class SampleRecord(Strict):
    """One evaluated sample (a line with "type": "sample")."""

    type: Literal["sample"]
    run: RunName | None = None
    checkpoint: RecordCheckpoint
    suite: str | None = None
    task: str
    task_version: StrictStr | StrictInt
    length: Count
    index: Count
    seed: Count
    dataset_hash: str | None = None
    prediction: str | None = None
    score: Score
    metric: str | None = None
    num_tokens: Count | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    settings_id: str | None = None
    metadata: RecordMetadata | None = None
    eval_seconds: NonNegative | None = None


def check_record(rec: Any) -> str | None:
    """None when rec follows SampleRecord, else one phrase naming the first bad field."""
    try:
        SampleRecord.model_validate(rec)
    except ValidationError as exc:
        return describe(exc)
    return None


def check_header(header: Any) -> str | None:
    try:
        StoreHeader.model_validate(header)
    except ValidationError as exc:
        return describe(exc)
    return None
