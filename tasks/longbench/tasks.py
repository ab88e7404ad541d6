"""The 21 LongBench v1 tasks, LongBench-E and its length buckets, and their suites.

Task names are the reference's dataset names (trec, 2wikimqa, repobench-p, ...); LongBench-E
variants are `<name>_e` and its eval.py buckets `<name>_e_0_4k`, `<name>_e_4_8k`, `<name>_e_8k_plus`.

Two input protocols (tasks.longbench.protocol says why each rule is what it is):
- "reference" (default): the record length L is pred.py's prompt budget, 1000 * (context // 1024)
  - 500 (3500 on a 4K model; `--max-length` sets it directly), the same for all 21 tasks; the prompt
  alone is cut to L with pred.py's middle rule, nothing more; under --chat six tasks stay unwrapped.
- "exact-length": L is the whole budget (prompt + max_new_tokens; the model's context or
  `--max-length`), the prompt is cut to L - max_new_tokens and trimmed until it re-encodes within
  it; --chat wraps every task.
Either way one L serves all tasks, so their results share a length and categories average across
tasks; `L <= 0` means no truncation. `metadata["truncation"]` records {rule, max_length (the prompt
budget), original_tokens, truncated}, `metadata["protocol"]` the protocol. Sample `index` is record
`index` of the dataset file, so `num_samples_available()` is the dataset size.

Headline (the README's leaderboard): per language, the mean of its category means. The README's
Chinese table holds the two code tasks too (its Code Completion column equals the English one, and
its Avg only comes out with it), so both groups have six categories.
Scoring follows LongBench/eval.py: first-line cut for trec/triviaqa/samsum/lsht, max over answers.
"""

from __future__ import annotations

from typing import ClassVar

from harness.core.errors import UserError
from harness.models.tokenization import count_tokens
from tasks.base import Sample, Task
from tasks.longbench import data
from tasks.longbench.metrics import DATASET2METRIC, score_sample
from tasks.longbench.prompts import (
    CATEGORIES,
    CATEGORY_DISPLAY,
    CHINESE,
    DATASET2MAXLEN,
    DATASET2PROMPT,
    DATASETS,
    E_BUCKET_SUFFIX,
    E_BUCKETS,
    E_DATASETS,
    FIRST_LINE_TASKS,
    NO_CHAT_TEMPLATE,
)
from tasks.longbench.protocol import PROTOCOLS, REFERENCE, check_budget, reference_budget
from tasks.longbench.truncation import default_max_length, middle_truncate
from tasks.registry import Headline, register_suite, register_task

_CATEGORY_OF = {d: cat for cat, ds in CATEGORIES.items() for d in ds}


class LongBenchTask(Task):
    family: ClassVar[str] = "longbench"
    kind = "generate"
    # 2: the reference protocol (pred.py's budget and cut) and metadata["protocol"]
    version: ClassVar[str] = "2"
    length_controlled: ClassVar[bool] = False
    protocols: ClassVar[tuple[str, ...]] = PROTOCOLS
    dataset: ClassVar[str]  # LongBench dataset (prompt, metric, max new tokens)
    data_name: ClassVar[str]  # file / hub config holding the records: "trec" or "trec_e"
    bucket: ClassVar[str | None] = None  # LongBench-E length bucket, e.g. "0-4k"

    def records(self) -> tuple[dict, ...]:
        recs = data.load_records(self.data_name)
        if self.bucket is None:
            return recs
        lo, hi = E_BUCKETS[self.bucket]
        return tuple(r for r in recs if r["length"] >= lo and (hi is None or r["length"] < hi))

    def check_available(self) -> None:
        data.load_records(self.data_name)

    def dataset_hash(self) -> str:
        return data.records_hash(self.data_name)

    def num_samples_available(self, length: int) -> int | None:
        return len(self.records())

    def default_max_length(self, model_context: int) -> int:
        """The prompt budget for a model context under the protocol in force."""
        if self.protocol == REFERENCE:
            return reference_budget(model_context)
        return default_max_length(model_context, self.max_new_tokens)

    def task_lengths(self, requested: list[int] | None, context: int, max_length: int | None) -> list[int]:
        """reference: [pred.py's prompt budget] (--max-length is that budget); exact-length: the
        whole budget, as the base class (--max-length, else the context)."""
        if self.protocol != REFERENCE:
            return super().task_lengths(requested, context, max_length)
        if max_length is not None:
            return [check_budget(max_length, context, self.name, self.max_new_tokens)]
        return [reference_budget(context)]

    def uses_chat_template(self) -> bool:
        """pred.py's policy under the reference protocol; exact-length wraps every task under --chat."""
        return self.protocol != REFERENCE or self.dataset not in NO_CHAT_TEMPLATE

    def prompt_budget(self, length: int) -> int:
        """The tokens the prompt is cut to at record length `length` (<= 0: not cut)."""
        if length <= 0:
            return 0
        return length if self.protocol == REFERENCE else length - self.max_new_tokens

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        recs = self.records()
        if not 0 <= index < len(recs):
            raise UserError(
                f"{self.name} has {len(recs)} samples, index {index} asked: pass --samples {len(recs)} or fewer"
            )
        rec = recs[index]
        prompt = DATASET2PROMPT[self.dataset].format(**rec)
        reference = self.protocol == REFERENCE
        prompt, trunc = middle_truncate(prompt, tokenizer, self.prompt_budget(length), refit=not reference)
        meta = {
            "category": CATEGORY_DISPLAY.get(_CATEGORY_OF[self.dataset], _CATEGORY_OF[self.dataset]),
            "all_classes": rec.get("all_classes"),
            "_id": rec.get("_id"),
            "longbench_length": rec.get("length"),
            "language": rec.get("language"),
            "bucket": self.bucket,
            "truncation": trunc,
            "chat_template": False,
            "protocol": self.protocol,
        }
        if reference and self.dataset == "samsum":
            # pred.py's samsum generation: eos_token_id=[EOS, the id of "\n"] and min_length one past
            # the prompt, i.e. it stops at a newline token and neither EOS nor that newline may be
            # the first token. Runners that read these keys do the same (see docs/longbench-parity.md).
            meta["stop_tokens"] = ["\n"]
            meta["min_new_tokens"] = 1
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt,
            answer_prefix="",
            references=tuple(rec["answers"]),
            max_new_tokens=self.max_new_tokens,
            num_tokens=count_tokens(tokenizer, prompt),
            dataset_hash=self.dataset_hash(),
            metadata=meta,
        )

    def score(self, prediction: str, sample: Sample) -> float:
        return score_sample(self.dataset, prediction, list(sample.references), sample.metadata.get("all_classes"))


def _make(name: str, dataset: str, data_name: str, bucket: str | None = None) -> type[LongBenchTask]:
    cls = type(
        f"LongBench_{name}".replace("-", "_").replace("+", "plus"),
        (LongBenchTask,),
        {
            "name": name,
            "dataset": dataset,
            "data_name": data_name,
            "bucket": bucket,
            "metric": DATASET2METRIC[dataset],
            "max_new_tokens": DATASET2MAXLEN[dataset],
            # eval.py scores the first line (few-shot) or first code line (code_sim_score): pred.py runs on
            "runs_to_budget": dataset in FIRST_LINE_TASKS or DATASET2METRIC[dataset] == "code_sim",
            "__doc__": f"LongBench {dataset}"
            + (f" (LongBench-E{', ' + bucket if bucket else ''})" if data_name.endswith("_e") else ""),
        },
    )
    return register_task(cls)


TASKS: dict[str, type[LongBenchTask]] = {}
for _d in DATASETS:
    TASKS[_d] = _make(_d, _d, _d)
E_TASKS: dict[str, list[str]] = {"all": []}
for _d in E_DATASETS:
    TASKS[f"{_d}_e"] = _make(f"{_d}_e", _d, f"{_d}_e")
    E_TASKS["all"].append(f"{_d}_e")
    for _b, _suffix in E_BUCKET_SUFFIX.items():
        _n = f"{_d}_e_{_suffix}"
        TASKS[_n] = _make(_n, _d, f"{_d}_e", _b)
        E_TASKS.setdefault(_b, []).append(_n)


def _categories(suffix: str = "", datasets: list[str] | None = None) -> dict[str, list[str]]:
    keep = set(datasets if datasets is not None else DATASETS)
    out = {}
    for cat, ds in CATEGORIES.items():
        names = [d + suffix for d in ds if d in keep]
        if names:
            out[CATEGORY_DISPLAY.get(cat, cat)] = names
    return out


ICL = CATEGORIES["Few-shot Learning"]
ENGLISH = [d for d in DATASETS if d not in CHINESE]

# suite -> {category: [tasks]}; a category's score is the unweighted mean of its tasks.
SUITE_CATEGORIES: dict[str, dict[str, list[str]]] = {
    "longbench": _categories(),
    "longbench-en": _categories(datasets=ENGLISH),
    "longbench-icl": {"LongBench ICL": list(ICL)},
    "longbench-e": _categories("_e", E_DATASETS),
}
for _b, _suffix in E_BUCKET_SUFFIX.items():
    SUITE_CATEGORIES[f"longbench-e-{_suffix.replace('_', '-')}"] = _categories(f"_e_{_suffix}", E_DATASETS)

# The README leaderboard's column names for our categories, in its column order.
README_CATEGORY = {
    "Single-Doc QA": "Single-Doc QA",
    "Multi-Doc QA": "Multi-Doc QA",
    "Summarization": "Summarization",
    "Few-shot Learning": "Few-shot Learning",
    "Code": "Code Completion",
    "Synthetic": "Synthetic Tasks",
}
CODE = set(CATEGORIES["Code"])


def _language_group(chinese: bool) -> dict[str, list[str]]:
    """One README table: its language's tasks per category, the code tasks in both tables."""
    out = {}
    for cat, label in README_CATEGORY.items():
        names = [d for d in CATEGORIES[cat] if d in CODE or (d in CHINESE) == chinese]
        if names:
            out[label] = names
    return out


HEADLINE_GROUPS = {"English": _language_group(False), "Chinese": _language_group(True)}
HEADLINE_LABEL = "per language, the mean of its 6 category means (the README leaderboard's Avg)"

register_suite(
    "longbench",
    list(DATASETS),
    "LongBench v1: all 21 tasks, six categories (set HARNESS_LONGBENCH offline)",
    label="LongBench",
    order=2,
    headline=Headline(HEADLINE_LABEL, HEADLINE_GROUPS),
)
register_suite(
    "longbench-en",
    ENGLISH,
    "LongBench v1, English and code tasks only (16)",
    headline=Headline(HEADLINE_LABEL, {"English": HEADLINE_GROUPS["English"]}),
)
register_suite("longbench-icl", list(ICL), "LongBench few-shot (ICL) tasks: trec, triviaqa, samsum, lsht")
register_suite("longbench-e", E_TASKS["all"], "LongBench-E: 13 tasks with a uniform length distribution")
for _b, _suffix in E_BUCKET_SUFFIX.items():
    register_suite(f"longbench-e-{_suffix.replace('_', '-')}", E_TASKS[_b], f"LongBench-E, samples of length {_b} only")
