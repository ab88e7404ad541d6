"""HELMET's InfiniteBench tasks (data.load_infbench at 4526dfb): LongQA's En.QA (ROUGE-L F1) and
En.MC (exact match), and summarization's En.Sum (judged, the "_book" judge prompts).

Data: --helmet-data DIR with InfiniteBench's files as its release names them,
    DIR/infbench/longbook_qa_eng.jsonl, longbook_choice_eng.jsonl, longbook_sum_eng.jsonl
        rows {id, context, input, answer: [..], options: [..]}
    DIR/infbench/longbook_sum_eng_keypoints.jsonl    rows {id, keypoints} (HELMET's data)
or, online, the hub dataset xinrongzhang2022/infinitebench. As HELMET: the prompt is
user + "\\n\\n" + system; 2 demos are the items after datasets' shuffle(seed) of the others,
with the book replaced by "[story text]"; items in datasets' shuffle(seed) order. The book is cut
from its end in the model's tokens to fit the length (HELMET: Llama-2 tokens, then the model's).
"""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar

from harness.core.errors import TaskUnavailable, UserError
from tasks.base import Sample
from tasks.helmet import data, metrics, reference
from tasks.helmet import judge_prompts as JP
from tasks.helmet.draws import SHOTS, hf_shuffle
from tasks.helmet.judged import (
    SUMM_JUDGE_TOKENS,
    HelmetContextTask,
    HelmetJudgedTask,
    _rows,
    no_answer,
    summary_f1,
)
from tasks.registry import register_task

QA_USER = (
    "You are given a story and a question. Answer the question as concisely as you can, using a single phrase "
    "if possible.\n\n{demo}{context}\n\nQuestion: {question}"
)
CHOICE_USER = (
    "You are given a story and a question with multiple choices. Choose the best answer from the options "
    "provided. Only one of the following options is correct, output the answer using one single letter (A, B, "
    "C, or D). Don't say anything else.\n\n{demo}{context}\n\nQuestion: {question}\nOptions:\n{options}"
)
SUM_USER = (
    "You are given a book and you are tasked to summarize it. Write a summary of about 1000 to 1200 words. Only "
    "write about the plot and characters of the story. Do not discuss the themes or background of the book. Do "
    "not provide any analysis or commentary.\n\n{demo}{context}\n\nNow summarize the book."
)


@lru_cache(maxsize=8)
def _items(kind: str, folder: str | None) -> tuple[tuple[dict, ...], str]:
    def hub():
        from harness.core.hub import load_dataset

        return load_dataset("xinrongzhang2022/infinitebench", split=f"longbook_{kind}_eng")

    rows, digest = _rows(
        f"infbench/longbook_{kind}_eng.jsonl", hub, ("id", "context", "input", "answer"), f"InfiniteBench {kind}"
    )
    out = []
    for r in rows:  # data.load_infbench's process_example
        item = {"id": r["id"], "context": r["context"], "question": r["input"], "answer": list(r["answer"])}
        if kind == "choice":
            options = list(r.get("options") or [])
            if len(options) != 4 or r["answer"][0] not in options:
                raise TaskUnavailable(f"InfiniteBench choice item {r['id']}: needs 4 options holding the answer")
            letter = chr(ord("A") + options.index(r["answer"][0]))
            item["options"] = "A. {}\nB. {}\nC. {}\nD. {}".format(*options)
            item["answer"] = [letter, f"{letter}. {r['answer'][0]}"]
        out.append(item)
    return tuple(out), digest


def demo_text(kind: str, item: dict, items: tuple[dict, ...], seed: int) -> str:
    """data.load_infbench's add_demos: the others, shuffled with datasets' shuffle(seed), first 2."""
    others = [x for x in items if x["id"] != item["id"]]
    picks = [others[i] for i in hf_shuffle(len(others), seed)[:SHOTS]]
    if kind == "qa":
        demo = "\n\n".join(f"[story text]\nQuestion: {x['question']}\nAnswer: {x['answer'][0]}" for x in picks)
    elif kind == "choice":
        demo = "\n\n".join(
            f"[story text]\nQuestion: {x['question']}\nOptions:\n{x['options']}\nAnswer: {x['answer'][0]}"
            for x in picks
        )
    else:
        demo = "\n\n".join(f"[story text]\nSummary: {x['answer'][0].strip()}" for x in picks)
    return f"For example:\n\n{demo}\n\nNow, read the following story:\n\n"


class InfBenchTask(HelmetContextTask):
    kind_name: ClassVar[str]
    user: ClassVar[str]
    joiner = "\n\n"

    def _data(self):
        items, digest = _items(self.kind_name, str(data.data_dir()))
        return items, None, digest

    def exact_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        items = self._data()[0]
        order = hf_shuffle(len(items), seed)
        if self.protocol == "reference":
            # load_infbench: filter_length(65536) ("a sanity step": every book passes), then shuffle(seed)
            keep = [i for i, x in enumerate(items) if reference.llama2_length(x["context"]) >= 65536]
            order = [keep[i] for i in hf_shuffle(len(keep), seed)]
        if not 0 <= index < len(order):
            raise UserError(f"{self.name} has {len(order)} items, index {index} asked: pass --samples {len(order)}")
        item = items[order[index]]
        demo = demo_text(self.kind_name, item, items, seed)

        def user(context: str) -> str:
            return self.user.format(demo=demo, context=context, question=item["question"], options=item.get("options"))

        meta = {"id": str(item["id"]), "question": item["question"]}
        return self._build(length, index, seed, tokenizer, item["context"], user, item["answer"], meta, budget=budget)


@register_task
class HelmetInfBenchQA(InfBenchTask):
    """HELMET LongQA: InfiniteBench En.QA (ROUGE-L F1)."""

    name = "helmet_infbench_qa"
    category = "LongQA"
    metric = "rougeL_f1"
    max_new_tokens = 10
    system = "Answer:"
    kind_name = "qa"
    user = QA_USER

    def score(self, prediction: str, sample: Sample) -> float:
        out = self._output(prediction, sample)
        return metrics.best_of_raw_and_parsed(metrics.rouge_l_f1, out, list(sample.references))


@register_task
class HelmetInfBenchChoice(InfBenchTask):
    """HELMET LongQA: InfiniteBench En.MC (exact match, or the "X. answer" option in the output)."""

    name = "helmet_infbench_choice"
    category = "LongQA"
    metric = "exact_match"
    max_new_tokens = 10
    system = "Answer:"
    kind_name = "choice"
    user = CHOICE_USER

    def score(self, prediction: str, sample: Sample) -> float:
        out = self._output(prediction, sample)
        refs = list(sample.references)
        if refs[1].lower() in out.lower():  # choice_post_process: the lettered option counts as exact
            return 1.0
        return metrics.best_of_raw_and_parsed(metrics.exact_match, out, refs)


@register_task
class HelmetInfBenchSum(InfBenchTask, HelmetJudgedTask):
    """HELMET summarization: InfiniteBench En.Sum, judged (fluency x key-point F1, book prompts)."""

    name = "helmet_infbench_sum"
    category = "Summ"
    metric = "judge_summ_f1"
    max_new_tokens = 1200
    system = "Summary:"
    kind_name = "sum"
    user = SUM_USER
    judge_max_tokens = SUMM_JUDGE_TOKENS

    def check_available(self) -> None:
        self.judge()
        HelmetContextTask.check_available(self)
        self._keypoints()

    def _keypoints(self) -> dict[str, list[str]]:
        return _sum_keypoints(str(data.data_dir()))

    def score(self, prediction: str, sample: Sample) -> float:
        if no_answer(prediction):  # nothing to judge (tasks/helmet/judged.py)
            return 0.0
        kps = self._keypoints().get(sample.metadata["id"])
        if kps is None:
            raise UserError(f"{self.name}: no keypoints for item {sample.metadata['id']}: {data.FIX}")
        text = self._output(prediction, sample).strip()
        prompts = (JP.BOOK_FLUENCY, JP.BOOK_RECALL, JP.BOOK_PRECISION)
        return summary_f1(self, text, kps, sample.references[0], prompts, f"{self.name} sample {sample.index}")


@lru_cache(maxsize=4)
def _sum_keypoints(folder: str | None) -> dict[str, list[str]]:
    path = data.find("infbench/longbook_sum_eng_keypoints.jsonl", "InfiniteBench summary key points")
    rows, _ = data.read_records(path, ("id", "keypoints"))
    return {str(r["id"]): list(r["keypoints"]) for r in rows}
