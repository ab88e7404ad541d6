"""The one schema of results.json (docs/contracts.md), used by every reader.

    from harness.core.results_schema import validate_results
    data = validate_results(json.loads(text), "results/anchor/results.json")   # UserError if malformed

`harness report`/`plan` (harness.pipeline.aggregate.load_results) and `harness leaderboard`
(leaderboards.build.load_runs) all call it, so a file one of them accepts the others accept too,
and nothing malformed reaches the table, the bootstrap or the page code as a KeyError, a TypeError
or a silently wrong number. The schema is the pydantic models below (one definition; its JSON
Schema is published as docs/schemas/results.schema.json, `python -m harness.core.results_schema`
rewrites it). Types are strict (an interval bound "12.5" is not a number, true is not an
integer), every number is finite, and ranges hold: counts and lengths are not negative, a
per-sample score lies in [0, 1] and its list is as long as the block's `index`, an interval's low
end is not above its high end, a score statistic lies in [0, 100]. Fields beyond these pass
through untouched (the schema grows by adding fields; a reader ignores what it does not know).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from harness.core.errors import UserError

# The newest results.json this harness writes and reads (older ones are read too). 2 added
# intervals (ci_low/ci_high), per-sample "samples" blocks, "depth_heatmap", "intervals" and
# provenance "throughput" -- all optional, so version-1 files still read.
SCHEMA_VERSION = 2
_FIX = "it does not follow the results.json schema (re-create it with `harness eval`)"


class Strict(BaseModel):
    """Base of every schema model: strict types, finite floats, unknown fields kept."""

    model_config = ConfigDict(strict=True, extra="allow", allow_inf_nan=False)


Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[float, Field(ge=0)]
Score = Annotated[float, Field(ge=0, le=1)]  # one sample's score
Percent = Annotated[float, Field(ge=0, le=100)]


def _tokens(value: int | str) -> int | str:
    """A length within the tokens any context holds (harness.core.validate.MAX_TOKENS): a key of
    10^20 is a damaged or hand-edited file, never a cell to average (tasks.length_rule says which
    lengths each task can have)."""
    from harness.core.validate import MAX_TOKENS

    if int(value) > MAX_TOKENS:
        raise ValueError(f"length {value} is beyond {MAX_TOKENS} tokens, the longest any run takes")
    return value


# A length as a JSON object key: ASCII digits (no sign: a length is never negative).
LengthKey = Annotated[str, Field(pattern=r"^[0-9]+$"), AfterValidator(_tokens)]
Length = Annotated[int, Field(ge=0), AfterValidator(_tokens)]

_SLACK = 1e-9  # float rounding of a mean of equal values
# Mean negative log-likelihood per token beyond which exp() (the perplexity) overflows a float:
# no model's windows come near it (a uniform guess over 1M tokens costs 14 nats).
MAX_NLL_PER_TOKEN = 700.0


def _within(low: float, value: float, high: float) -> bool:
    tol = _SLACK * max(1.0, abs(low), abs(high))
    return low - tol <= value <= high + tol


Share = Annotated[float, Field(ge=0, le=1)]


class DegenerateShares(Strict):
    """Shares of a cell's (or a run's) predictions that are empty, ran to max new tokens, or repeat
    one short span (harness/core/degenerate.py), over `n` predictions of every checkpoint."""

    empty: Share
    at_max: Share
    repeat: Share
    n: Positive
    # kinds the task's reference shows too (Task.runs_to_budget: "at_max"), never flagged
    expected: list[Literal["empty", "at_max", "repeat"]] = []


class BudgetCuts(Strict):
    """Under a thinking budget (--max-thinking-tokens, harness/pipeline/thinking.py): of a cell's `n`
    predictions, how many thoughts were closed at the thinking budget and how many answers reached
    the answer budget (cut there, not finished)."""

    thinking_cut: Count
    answer_cut: Count
    n: Positive

    @model_validator(mode="after")
    def _within(self) -> BudgetCuts:
        if self.thinking_cut > self.n or self.answer_cut > self.n:
            raise ValueError(f"more cut predictions than the cell's {self.n}")
        return self


class Stats(Strict):
    """A statistic over checkpoints: mean, spread, its 95% interval, what it covers."""

    mean: float
    std: NonNegative = 0.0
    min: float | None = None
    max: float | None = None
    n: Positive = 1
    steps: list[StrictInt | None] | None = None
    per_step: dict[str, float] | None = None
    num_samples: Count | None = None
    num_samples_range: list[Count] | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    tasks_covered: Count | None = None
    tasks_total: Count | None = None
    degenerate: DegenerateShares | None = None
    budget: BudgetCuts | None = None
    bound: Literal["floor", "ceiling", "floor and ceiling"] | None = None
    # the prompts' mean length in tokens, as the records (or an imported harness's files) counted them
    prompt_tokens: NonNegative | None = None
    # an imported aggregate's standard error (x100) and where its interval came from ("stderr": the
    # other harness's, normal approximation; absent: our bootstrap)
    stderr: NonNegative | None = None
    ci_from: Literal["stderr"] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Stats:
        if self.ci_low is not None and self.ci_high is not None and self.ci_low > self.ci_high:
            raise ValueError(f"interval low end {self.ci_low} is above its high end {self.ci_high}")
        if self.min is not None and self.max is not None and not _within(self.min, self.mean, self.max):
            raise ValueError(f"mean {self.mean} is outside min {self.min} .. max {self.max}")
        return self

    def numbers(self) -> list[float]:
        return [v for v in (self.mean, self.min, self.max, self.ci_low, self.ci_high) if v is not None]


class SamplesBlock(Strict):
    """Per-sample values of one (task, length): aligned with `index`, one list per checkpoint label."""

    task_version: StrictStr | StrictInt | None = None
    dataset_hash: str | None = None
    seed: StrictInt | StrictStr | None = None  # "mixed: ..." when records disagree
    index: list[Count]
    # one list per checkpoint label; a block exists because some checkpoint scored it
    scores: Annotated[dict[str, list[Score | None]], Field(min_length=1)] | None = None
    nll: Annotated[dict[str, list[NonNegative | None]], Field(min_length=1)] | None = None
    tokens: Annotated[dict[str, list[Positive | None]], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _aligned(self) -> SamplesBlock:
        if len(set(self.index)) != len(self.index):
            raise ValueError("its index list names a sample twice")
        perplexity = self.nll is not None or self.tokens is not None
        if perplexity == (self.scores is not None) or (perplexity and (self.nll is None or self.tokens is None)):
            raise ValueError('a block holds either "scores" or both "nll" and "tokens"')
        for field in ("scores", "nll", "tokens"):
            for label, values in (getattr(self, field) or {}).items():
                if len(values) != len(self.index):
                    raise ValueError(
                        f'"{field}" of {label!r} has {len(values)} values for {len(self.index)} samples in "index"'
                    )
        for label, nll in (self.nll or {}).items():
            tokens = (self.tokens or {}).get(label)
            if tokens is None:
                raise ValueError(f'"nll" of {label!r} has no "tokens" beside it')
            for a, b in zip(nll, tokens):
                if (a is None) != (b is None) or (a is not None and b is not None and a > MAX_NLL_PER_TOKEN * b):
                    raise ValueError(f'"nll" {a} over {b} tokens of {label!r} is no log-likelihood')
        return self

    @property
    def is_scores(self) -> bool:
        return self.scores is not None


class EffectiveLength(Strict):
    threshold: float | None = None
    value: Count | None = None
    label: str | None = None


class NolimaEffectiveLength(EffectiveLength):
    """NoLiMa's base-relative rule (harness/core/effective_length.py base_relative_effective_length)."""

    rule: str | None = None
    fraction: Annotated[float, Field(gt=0, le=1)] = 0.85
    base_lengths: list[Count] = []
    base_score: NonNegative | None = None


class Summary(Strict):
    avg: Stats | None = None
    wavg_inc: Stats | None = None
    wavg_dec: Stats | None = None
    effective_length: EffectiveLength = Field(default_factory=EffectiveLength)
    effective_length_nolima: NolimaEffectiveLength | None = None
    tasks_covered: Count | None = None
    tasks_total: Count | None = None
    lengths_covered: Count | None = None
    lengths_total: Count | None = None


class HeatCell(Strict):
    mean: Percent
    n: Count
    checkpoints: Count


class DepthHeatmap(Strict):
    tasks: list[str]
    bins: list[Annotated[list[Percent], Field(min_length=2, max_length=2)]]
    lengths: list[Count]
    cells: dict[LengthKey, list[HeatCell | None]]

    @model_validator(mode="after")
    def _grid(self) -> DepthHeatmap:
        for lo, hi in self.bins:
            if not lo < hi:
                raise ValueError(f"depth bin [{lo}, {hi}] is empty")
        for L in self.lengths:
            row = self.cells.get(str(L))
            if row is None:
                raise ValueError(f"length {L} has no row in cells")
            if len(row) != len(self.bins):
                raise ValueError(f"cells of length {L} hold {len(row)} values for {len(self.bins)} bins")
        return self


class Intervals(Strict):
    """How the ci_low/ci_high were made (harness/core/stats.py METHOD)."""

    method: str | None = None
    level: Annotated[float, Field(gt=0, lt=1)] = 0.95
    resamples: Positive | None = None
    design: str | None = None


class HeadlineGroup(Strict):
    per_length: dict[LengthKey, Stats] = {}
    avg: Stats | None = None


class Headline(Strict):
    """The number the suite's reference publishes (tasks.registry.Headline) and how it is averaged."""

    label: str
    groups: dict[str, HeadlineGroup]
    weighting: str | None = None


class Suite(Strict):
    """One suite's block (docs/contracts.md, "Aggregated results")."""

    tasks: list[str]
    evaluated: list[str]
    excluded: list[str] = []
    unavailable: dict[str, str] = {}
    lengths: list[Length]
    per_task: dict[str, dict[LengthKey, Stats]]
    per_length: dict[LengthKey, Stats]
    summary: Summary
    per_task_summary: dict[str, dict[str, Stats]] = {}
    categories: dict[str, dict[LengthKey, Stats]] = {}
    unavailable_lengths: dict[str, dict[LengthKey, str]] = {}
    samples: dict[str, dict[LengthKey, SamplesBlock]] = {}
    depth_heatmap: DepthHeatmap | None = None
    length_controlled: bool | None = None
    score: str | None = None
    headline: Headline | None = None
    protocol: str | list[str] | None = None

    def _all_stats(self):
        yield from ((f"per_task.{t}.{L}", s) for t, by in self.per_task.items() for L, s in by.items())
        yield from ((f"per_length.{L}", s) for L, s in self.per_length.items())
        yield from ((f"categories.{c}.{L}", s) for c, by in self.categories.items() for L, s in by.items())
        yield from ((f"per_task_summary.{t}.{k}", s) for t, by in self.per_task_summary.items() for k, s in by.items())
        for g, block in (self.headline.groups if self.headline else {}).items():
            yield from ((f"headline.{g}.{L}", s) for L, s in block.per_length.items())
            if block.avg is not None:
                yield f"headline.{g}.avg", block.avg
        for key in ("avg", "wavg_inc", "wavg_dec"):
            stats = getattr(self.summary, key)
            if stats is not None:
                yield f"summary.{key}", stats

    @model_validator(mode="after")
    def _evaluated_have_scores(self) -> Suite:
        """A task is "evaluated" when it has a score (docs/contracts.md): its per_task entry exists."""
        missing = next((t for t in self.evaluated if not self.per_task.get(t)), None)
        if missing is not None:
            raise ValueError(f"evaluated task {missing!r} has no per_task scores")
        return self

    @model_validator(mode="after")
    def _scores_are_percentages(self) -> Suite:
        """A suite whose per-sample blocks are all scores (no perplexity) reports x100 scores: every
        statistic lies in [0, 100]. (Perplexities are unbounded; a file without per-sample blocks
        does not say which it holds.)"""
        blocks = [b for by in self.samples.values() for b in by.values()]
        if self.score == "perplexity" or not blocks or not all(b.is_scores for b in blocks):
            return self
        for where, stats in self._all_stats():
            bad = next((v for v in stats.numbers() if not _within(0.0, v, 100.0)), None)
            if bad is not None:
                raise ValueError(f"{where}: score {bad} is outside 0..100")
        return self


class Checkpoint(Strict):
    path: str = ""
    step: StrictInt | None = None
    fingerprint: str | None = None
    training: dict[str, Any] | None = None


# A run name as `harness eval --name` allows it (harness.core.paths): printable, so a table, a CSV cell
# or a terminal never receives a control character (a CR starting a spreadsheet row, an escape
# sequence) from a file.
RunName = Annotated[str, Field(min_length=1, pattern=r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]+$")]


class Run(Strict):
    name: RunName
    model: str | list[str] | None = None
    mode: str | list[str] | None = None
    checkpoints: list[Checkpoint] = []


class Throughput(Strict):
    samples_per_s: NonNegative | None = None
    samples: Count | None = None
    seconds: NonNegative | None = None
    note: str | None = None
    seconds_per_sample: dict[str, dict[LengthKey, NonNegative]] = {}


class Provenance(Strict):
    package_version: str | None = None
    git_hash: str | None = None
    created: str | None = None
    throughput: Throughput | None = None
    # what the reports read from the provenance, typed (a hand-edited file of another shape is one line)
    dataset_hashes: dict[str, str | list[str]] = {}
    protocol: str | None = None
    doctor: str | None = None
    endpoint: dict[str, Any] | None = None
    chat_template: str | None = None
    answer_prefix: bool | None = None
    max_new_tokens: dict[str, Count] | None = None
    system_prompt: str | None = None
    strip_thinking: bool | None = None
    max_thinking_tokens: Positive | None = None
    # the flags the records were made with (harness/pipeline/against.py checks each field where used)
    eval_config: dict[str, Any] | None = None


class InconsistentRecords(Strict):
    """Records of a re-aggregated store left out of every average because their fields contradict
    themselves (a hand-edited line: a length, metric or suite its task cannot have), counted by reason."""

    count: Positive
    reasons: dict[str, Positive]


Verdict = Literal["better", "worse", "equivalent", "within width", "undecided"]


class SequentialCell(Strict):
    """One cell of a sequential evaluation (harness/pipeline/sequential_cells.py): the samples it drew
    (n), the ones its sequence has seen, its pool and the fixed protocol's count, the sequence's final
    interval (points: the paired difference, or one run's score), and the verdict."""

    n: Count
    seen: Count
    pool: Count
    fixed_n: Count
    interval: Annotated[list[float], Field(min_length=2, max_length=2)] | None = None
    estimate: float | None = None
    verdict: Verdict
    stopped: str
    suite: str | None = None
    tasks: list[str] | None = None
    form: Literal["i.i.d.", "without replacement"] | None = None  # which sequence (docs/sequential.md)

    @model_validator(mode="after")
    def _ordered(self) -> SequentialCell:
        if self.interval is not None and self.interval[0] > self.interval[1] + _SLACK:
            raise ValueError("the interval's low end is above its high end")
        if self.seen > self.n or self.n > self.pool:
            raise ValueError("a cell cannot have seen more samples than it drew, nor drawn more than its pool")
        return self


class SequentialSamples(Strict):
    used: Count  # samples drawn over the (task, length) cells
    fixed: Count  # samples the fixed protocol takes there


class Sequential(Strict):
    """results.json "sequential": the stopping rule and every cell's verdict (docs/sequential.md)."""

    mode: Literal["paired", "width"]
    rule: dict[str, Any]
    alpha: Annotated[float, Field(gt=0, lt=1)]
    alpha_per_cell: Annotated[float, Field(gt=0, lt=1)]
    cells_total: Count
    equivalence_margin: NonNegative | None = None
    width: NonNegative | None = None
    round_size: Positive
    max_samples: Positive | None = None
    # how a suite average is drawn and read (docs/sequential.md): "through tasks" (its own sequence on
    # the samples every task drew, intersected with its tasks' mean) or "held" (it keeps its tasks drawn)
    averages: Literal["through tasks", "held"] | None = None
    rounds: Count
    samples: SequentialSamples
    # task (or "average") -> length -> cell
    cells: dict[str, dict[LengthKey, SequentialCell]]
    against: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _rule_of_its_mode(self) -> Sequential:
        if self.mode == "width" and self.width is None:
            raise ValueError("a width-mode block names no width")
        if self.mode == "paired" and self.width is not None:
            raise ValueError("a paired block names a width")
        return self


class Results(Strict):
    """results.json."""

    schema_version: Annotated[int, Field(ge=1, le=SCHEMA_VERSION)]
    run: Run
    provenance: Provenance = Field(default_factory=Provenance)
    intervals: Intervals | None = None
    suites: Annotated[dict[str, Suite], Field(min_length=1)]
    degenerate: DegenerateShares | None = None  # every generated prediction of the run together
    # records that share an identity with a counted one but hold another prediction or score
    # (a hand-edited or merged store): the first written counts, and the reports say how many
    conflicting_records: Positive | None = None
    # records whose fields contradict themselves (a length or metric their task cannot have): left
    # out of the averages, counted by reason
    inconsistent_records: InconsistentRecords | None = None
    # a sequential evaluation's rule and verdicts (harness eval --against / --until-width)
    sequential: Sequential | None = None


def _part(p: Any) -> Any:
    return str(p) if isinstance(p, int) else p


def describe(exc: ValidationError) -> str:
    """The first problem of a ValidationError as one phrase: where, what, the value found."""
    err = exc.errors(include_url=False)[0]
    # a key from the file may hold anything (a line break, a dot): shown as JSON then
    where = ".".join(
        p if isinstance(p, str) and p.isprintable() and p else json.dumps(p) for p in map(_part, err["loc"])
    )
    if err["type"] == "missing":
        return f'"{where}" is missing'
    msg = re.sub(r" or instance of \w+", "", err["msg"].removeprefix("Value error, "))
    msg = msg[:1].lower() + msg[1:]
    got = err.get("input")
    shown = "" if err["type"] == "value_error" else f" (found {json.dumps(got, default=str)[:60]})"
    return f'"{where}": {msg}{shown}' if where else f"{msg}{shown}"


def validate_results(data: Any, path: str | Path) -> dict:
    """data (parsed JSON) if it is a results.json this harness can read; else a UserError naming path."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(
            f"{path} is not a harness results file (no schema_version/suites): pass a results.json written by harness eval"
        )
    if version > SCHEMA_VERSION:
        raise UserError(
            f"{path} has results schema_version {version}, this harness reads {SCHEMA_VERSION}: upgrade the harness"
        )
    try:
        Results.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{path}: {describe(exc)}; {_FIX}") from None
    except RecursionError:  # nesting deeper than any results file
        raise UserError(f"{path}: nested too deeply; {_FIX}") from None
    return data
