"""The 21 LongBench v1 tasks, LongBench-E and its length buckets, and their suites.

Task names are the reference's dataset names (trec, 2wikimqa, repobench-p, ...); LongBench-E
variants are `<name>_e` and its eval.py buckets `<name>_e_0_4k`, `<name>_e_4_8k`, `<name>_e_8k_plus`.

Length convention (LongBench samples are not length-controlled, Task.length_controlled = False):
the `length` L the evaluation loop passes to `sample()` is the whole budget of a sample, as
everywhere in this project (prompt tokens, BOS included, plus tokens to generate), counted with the
model's tokenizer. The prompt is then middle-truncated to L - max_new_tokens tokens, which is
LongBench/pred.py's max_length when L is the model's context (the default the loop should pass;
`--max-length` overrides it). One L serves all 21 tasks, so their results share a length and
categories average across tasks. `L <= 0` means no truncation. `Sample.length` records L and
`metadata["truncation"]` records {rule, max_length (the prompt budget), original_tokens,
truncated}. Sample `index` is record `index` of the dataset file, so `num_samples_available()` is
the dataset size.

No chat template is applied (base models; pred.py also uses none on the few-shot and code tasks).
Scoring follows LongBench/eval.py: first-line cut for trec/triviaqa/samsum/lsht, max over answers.
"""

from __future__ import annotations

from typing import ClassVar

from harness.errors import UserError
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
)
from tasks.longbench.truncation import default_max_length, middle_truncate
from tasks.registry import register_suite, register_task
from tasks.tokenization import count_tokens

_CATEGORY_OF = {d: cat for cat, ds in CATEGORIES.items() for d in ds}


class LongBenchTask(Task):
    family: ClassVar[str] = "longbench"
    kind = "generate"
    version: ClassVar[str] = "1"
    length_controlled: ClassVar[bool] = False
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
        """pred.py's prompt budget for a model context (what sample(model_context, ...) truncates to)."""
        return default_max_length(model_context, self.max_new_tokens)

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        recs = self.records()
        if not 0 <= index < len(recs):
            raise UserError(
                f"{self.name} has {len(recs)} samples, index {index} asked: pass --samples {len(recs)} or fewer"
            )
        rec = recs[index]
        prompt = DATASET2PROMPT[self.dataset].format(**rec)
        prompt, trunc = middle_truncate(prompt, tokenizer, length - self.max_new_tokens if length > 0 else 0)
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
            metadata={
                "category": CATEGORY_DISPLAY.get(_CATEGORY_OF[self.dataset], _CATEGORY_OF[self.dataset]),
                "all_classes": rec.get("all_classes"),
                "_id": rec.get("_id"),
                "longbench_length": rec.get("length"),
                "language": rec.get("language"),
                "bucket": self.bucket,
                "truncation": trunc,
                "chat_template": False,
            },
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

register_suite(
    "longbench",
    list(DATASETS),
    "LongBench v1: all 21 tasks, six categories (set HARNESS_LONGBENCH offline)",
    label="LongBench",
    order=2,
)
register_suite("longbench-en", ENGLISH, "LongBench v1, English and code tasks only (16)")
register_suite("longbench-icl", list(ICL), "LongBench few-shot (ICL) tasks: trec, triviaqa, samsum, lsht")
register_suite("longbench-e", E_TASKS["all"], "LongBench-E: 13 tasks with a uniform length distribution")
for _b, _suffix in E_BUCKET_SUFFIX.items():
    register_suite(f"longbench-e-{_suffix.replace('_', '-')}", E_TASKS[_b], f"LongBench-E, samples of length {_b} only")
