"""HELMET's judged categories: LongQA (NarrativeQA) and summarization (Multi-LexSum), scored by a
model judge behind an OpenAI-compatible API (harness/models/judge.py; flags --judge-base-url,
--judge-model). Without a judge they are unavailable with one line naming the flags.

Data (local folder, --helmet-data DIR; online: the hub datasets HELMET loads, through `datasets`):
    DIR/narrativeqa/test.jsonl, train.jsonl    the hub's narrativeqa rows (document.text,
                                               question.text, answers[].text)
    DIR/multi_lexsum/multi_lexsum_val.jsonl    validation rows (id, sources, summary/short,
                                               summary/long, summary/short_keypoints: HELMET's
                                               keypoints file joined with allenai/multi_lexsum)
    DIR/multi_lexsum/train.jsonl               train rows with summary/short (the demos)

Prompts and scores follow data.load_narrativeqa / load_multi_lexsum and scripts/eval_gpt4_*.py:
  - the document is cut from its end, in the evaluated model's tokens, until prompt + tokens to
    generate fit the length, with HELMET's " ... [the rest of the text is omitted]" (HELMET cuts in
    Llama-2 tokens first and keeps only documents over 128K of them; neither applies here);
  - 2 demos: HELMET draws them with an unseeded shuffle; here with datasets' shuffle seeded by
    the question's sha256 (deterministic, recorded in the sample);
  - NarrativeQA: judge_prompt with the question, the answers list and parse_output(output);
    score = fluency x correctness / 3 (HELMET reports gpt-4-score x 100/3);
  - Multi-LexSum: three judge calls (fluency, key-point recall, precision against the long
    summary); score = fluency x F1(recall, precision), HELMET's gpt-4-f1.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import ClassVar

from harness.core.errors import TaskUnavailable, UserError
from harness.models import judge as J
from tasks.base import Sample
from tasks.helmet import data, reference
from tasks.helmet import judge_prompts as JP
from tasks.helmet import prompts as P
from tasks.helmet.draws import SHOTS, hf_shuffle, question_seed
from tasks.helmet.tasks import HelmetTask, fit_count
from tasks.registry import register_task

NARRATIVEQA_MIN_TOKENS = 131072  # load_narrativeqa: input_length > 131072 (Llama-2 tokens, BOS counted)
MULTI_LEXSUM_MIN_TOKENS = 65536  # load_multi_lexsum: filter_length(test_data, 65536) keeps >=
LONGQA_JUDGE_TOKENS = 2048  # OpenAIModel's default generation_max_length (eval_gpt4_longqa.py)
SUMM_JUDGE_TOKENS = 4096  # eval_gpt4_summ.py: generation_max_length=4096


def _offline() -> bool:
    return any(
        os.environ.get(v, "").strip() not in ("", "0", "false", "False")
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def _rows(rel: str, hub, required: tuple[str, ...], what: str) -> tuple[tuple[dict, ...], str]:
    folder = data.data_dir()
    if folder is not None:
        return data.read_records(data.find(rel, what), required)
    if _offline():
        raise TaskUnavailable(f"HELMET {what} needs the file {rel} (offline): {data.FIX}")
    try:
        rows = tuple(dict(r) for r in hub())
    except Exception as exc:  # any hub failure becomes one TaskUnavailable line  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:150]
        raise TaskUnavailable(f"HELMET {what} could not be loaded from the hub ({first}): {data.FIX}") from None
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps(rows[:50], sort_keys=True, default=str).encode()).hexdigest()[:16]
    return rows, f"hub:{len(rows)}:{digest}"


def _text(value) -> str:
    return value["text"] if isinstance(value, dict) else str(value)


@lru_cache(maxsize=4)
def _narrativeqa(folder: str | None):
    def hub(split):
        from harness.core.hub import load_dataset

        return lambda: load_dataset("narrativeqa", split=split)

    need = ("document", "question", "answers")
    test, h1 = _rows("narrativeqa/test.jsonl", hub("test"), need, "LongQA (NarrativeQA)")
    train, h2 = _rows("narrativeqa/train.jsonl", hub("train"), ("question", "answers"), "LongQA demos (NarrativeQA)")
    return test, train, f"{h1}:{h2}"


@lru_cache(maxsize=4)
def _multi_lexsum(folder: str | None):
    def hub(split):
        from harness.core.hub import load_dataset

        return lambda: load_dataset("allenai/multi_lexsum", name="v20230518", split=split)

    need = ("id", "sources", "summary/short", "summary/long", "summary/short_keypoints")
    val, h1 = _rows("multi_lexsum/multi_lexsum_val.jsonl", hub("validation"), need, "summarization (Multi-LexSum)")
    val = tuple(r for r in val if r.get("summary/short") is not None)
    train, h2 = _rows("multi_lexsum/train.jsonl", hub("train"), ("summary/short",), "summarization demos")
    train = tuple(r for r in train if r.get("summary/short") is not None)
    return val, train, f"{h1}:{h2}"


def truncated(context: str, tokenizer, k: int, n_tokens: int, offsets) -> str:
    """The first k tokens of the context (+ HELMET's omission note when anything is cut)."""
    if k >= n_tokens:
        return context
    return context[: offsets[k][0]] + P.TRUNCATION_POSTFIX


class HelmetContextTask(HelmetTask):
    """A task over one long document cut from its end to fit the length (LongQA, summarization)."""

    joiner: ClassVar[str] = "\n"

    def check_available(self) -> None:
        self._data()
        if self.protocol == "reference":  # the unit of HELMET's document budgets
            reference.llama2_tokenizer()

    def _data(self):
        raise NotImplementedError

    def dataset_hash(self) -> str:
        return self._data()[2]

    def num_samples_available(self, length: int) -> int | None:
        return len(self._data()[0])

    def reference_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        # LongQA / Summ build the same item under both protocols; _build picks the rule
        return self.exact_sample(length, index, seed, tokenizer, budget)

    def exact_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        """The item's sample; `budget` (the reference's cut below the length) is passed to _build."""
        raise NotImplementedError

    def _build(self, length, index, seed, tokenizer, context, user, refs, meta, budget=None) -> Sample:
        # budget: the reference cut's tokens below the length (under --chat), never exact-length's
        if self.protocol == "reference":
            return self._build_reference(length, index, seed, tokenizer, context, user, refs, meta, budget)
        return self._build_exact(length, index, seed, tokenizer, context, user, refs, meta)

    def _build_reference(self, length, index, seed, tokenizer, context, user, refs, meta, budget=None) -> Sample:
        """data.truncate_llama2 to the config's Llama-2 budget, then model_utils.tokenize's cut."""
        from tasks.helmet import released

        tail = self.joiner + self.system
        llama2_tokens = reference.run_for(self.name, length).k
        return released.build(
            self,
            length,
            index,
            seed,
            tokenizer,
            render=lambda c: user(c) + tail,
            context=reference.truncate_llama2(context, llama2_tokens),
            tail=tail,
            refs=refs,
            digest=self.dataset_hash(),
            meta=meta,
            budget=budget,
        )

    def _build_exact(self, length, index, seed, tokenizer, context, user, refs, meta) -> Sample:
        # the Rust tokenizer's offsets (transformers' fast tokenizers and harness generate's light one)
        enc = tokenizer.backend_tokenizer.encode(context, add_special_tokens=False)
        offsets, n = enc.offsets, len(enc.ids)
        k, prompt, num = fit_count(
            lambda k: user(truncated(context, tokenizer, k, n, offsets)) + self.joiner + self.system,
            n,
            length,
            self.max_new_tokens,
            tokenizer,
            self.name,
        )
        tail = self.joiner + self.system
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt[: -len(tail)],
            answer_prefix=tail,
            references=tuple(refs),
            max_new_tokens=self.max_new_tokens,
            num_tokens=num,
            dataset_hash=self.dataset_hash(),
            metadata={
                **meta,
                "context_tokens": min(k, n),
                "context_tokens_available": n,
                "system": self.system,
                "category": self.category,
            },
        )


class HelmetJudgedTask(HelmetContextTask):
    """A context task scored by the model judge (harness/models/judge.py)."""

    judge_max_tokens: ClassVar[int]

    def judge(self) -> J.JudgeConfig:
        return J.configured(self.name)

    def judge_settings(self) -> dict:
        return J.judge_settings(self.judge(), self.judge_max_tokens)

    def check_available(self) -> None:
        self.judge()
        HelmetContextTask.check_available(self)


def no_answer(prediction: str, parsed: str | None = None) -> bool:
    """An empty prediction (or one whose parsed answer is empty) scores 0 without asking the judge: a
    judge shown no answer can grade it only wrongly above 0 (an AA-LCR checker graded empty answers
    CORRECT: scitix/sieval PR 44, NVIDIA-NeMo/Skills PR 935); a sound judge gives it 0 too, so the
    scores of HELMET's own judge are unchanged."""
    return not prediction.strip() or (parsed is not None and not parsed.strip())


def summary_f1(task: HelmetJudgedTask, text: str, kps: list[str], expert: str, prompts: tuple, what: str) -> float:
    """eval_gpt4_summ.py's score: fluency x F1(key-point recall, precision against the expert summary)."""
    fluency_prompt, recall_prompt, precision_prompt = prompts
    cfg, tokens = task.judge(), task.judge_max_tokens
    f = J.judged(cfg, fluency_prompt.format(text=text), tokens, lambda s: J.number(s.get("fluency"), 0, 1), what, True)
    keypoints = "\n".join(f"{i + 1}. {kp}" for i, kp in enumerate(kps))
    r = J.judged(
        cfg,
        recall_prompt.format(keypoints=keypoints, summary=text),
        tokens,
        lambda s: J.number(s.get("recall"), 0, len(kps)),
        what,
        True,
    )
    p = J.judged(
        cfg,
        precision_prompt.format(expert_summary=expert, summary=text),
        tokens,
        lambda s: J.number(s.get("sentence_count"), 0) and J.number(s.get("precision"), 0, s["sentence_count"]),
        what,
        True,
    )
    rec = r["recall"] / len(kps) if kps else 0.0
    prec = p["precision"] / p["sentence_count"] if p["sentence_count"] > 0 else 0.0
    return float(f["fluency"]) * 2 * rec * prec / (rec + prec) if rec + prec > 0 else 0.0


@register_task
class HelmetNarrativeQA(HelmetJudgedTask):
    """HELMET LongQA: NarrativeQA, judged (fluency x correctness)."""

    name = "helmet_narrativeqa"
    category = "LongQA"
    metric = "judge_longqa"
    max_new_tokens = 100
    system = P.NARRATIVEQA_SYSTEM
    judge_max_tokens = LONGQA_JUDGE_TOKENS

    def _data(self):
        return _narrativeqa(str(data.data_dir()))

    def _pick(self, index: int, seed: int) -> dict:
        test = self._data()[0]
        order = hf_shuffle(len(test), seed)
        if self.protocol == "reference":
            # load_narrativeqa: shuffle(seed), then keep documents of more than 131,072 Llama-2
            # tokens; walked lazily (the index-th kept one), each document counted once
            kept = (i for i in order if reference.llama2_length(_text(test[i]["document"])) > NARRATIVEQA_MIN_TOKENS)
            pos = next((i for n, i in enumerate(kept) if n == index), None)
            if pos is None:
                raise UserError(
                    f"{self.name}: fewer than {index + 1} documents over {NARRATIVEQA_MIN_TOKENS} Llama-2 tokens"
                )
            return test[pos]
        if not 0 <= index < len(order):
            raise UserError(f"{self.name} has {len(order)} items, index {index} asked: pass --samples {len(order)}")
        return test[order[index]]

    def exact_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        train = self._data()[1]
        item = self._pick(index, seed)
        question = _text(item["question"])
        answers = [_text(a) for a in item["answers"]]
        picks = [train[i] for i in hf_shuffle(len(train), question_seed(question))[:SHOTS]]
        demo = (
            "For example:\n\n"
            + "\n\n".join(f"Question: {_text(ex['question'])}\nAnswer: {_text(ex['answers'][0])}" for ex in picks)
            + "\n\nNow, use the following story to answer the question:\n\n"
        )

        def user(context: str) -> str:
            return P.NARRATIVEQA_USER.format(demo=demo, context=context, question=question)

        return self._build(
            length,
            index,
            seed,
            tokenizer,
            _text(item["document"]),
            user,
            answers,
            {"question": question},
            budget=budget,
        )

    def score(self, prediction: str, sample: Sample) -> float:
        from tasks.helmet.metrics import parse_output

        out = self._output(prediction, sample).replace("\n", " ")  # eval_gpt4_longqa.parse_output
        parsed = parse_output(out)
        if no_answer(prediction, parsed):
            return 0.0
        prompt = JP.LONGQA_JUDGE.format(
            question=sample.metadata["question"],
            correct_answers=list(sample.references),
            parsed_output=parsed,
        )

        def read(s: dict) -> bool:
            return J.number(s.get("fluency"), 0, 1) and J.number(s.get("correctness"), 0, 3)

        s = J.judged(self.judge(), prompt, self.judge_max_tokens, read, f"{self.name} sample {sample.index}")
        return float(s["fluency"]) * float(s["correctness"]) / 3


@register_task
class HelmetMultiLexSum(HelmetJudgedTask):
    """HELMET summarization: Multi-LexSum, judged (fluency x key-point F1)."""

    name = "helmet_multi_lexsum"
    category = "Summ"
    metric = "judge_summ_f1"
    max_new_tokens = 400
    system = P.MULTI_LEXSUM_SYSTEM
    judge_max_tokens = SUMM_JUDGE_TOKENS
    joiner = "\n\n"

    def _data(self):
        return _multi_lexsum(str(data.data_dir()))

    def _kept(self) -> list[int]:
        """load_multi_lexsum's filter: the cases whose sources reach 65,536 Llama-2 tokens."""
        val = self._data()[0]
        return [
            i
            for i in range(len(val))
            if reference.llama2_length("\n\n".join(val[i]["sources"])) >= MULTI_LEXSUM_MIN_TOKENS
        ]

    def num_samples_available(self, length: int) -> int | None:
        # Under the reference protocol HELMET evaluates every case its filter keeps, up to 100:
        # the count after the filter, so a default run takes them all instead of asking past the end.
        return len(self._kept()) if self.protocol == "reference" else len(self._data()[0])

    def _pick(self, index: int, seed: int) -> dict:
        val = self._data()[0]
        if self.protocol == "reference":
            # shuffled (seed) only when more than max_test_samples remain, else in file order
            keep = self._kept()
            order = [keep[i] for i in hf_shuffle(len(keep), seed)] if len(keep) > reference.SAMPLES else keep
        else:
            order = hf_shuffle(len(val), seed)
        if not 0 <= index < len(order):
            raise UserError(f"{self.name} has {len(order)} items, index {index} asked: pass --samples {len(order)}")
        return val[order[index]]

    def exact_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        train = self._data()[1]
        item = self._pick(index, seed)
        picks = [train[i] for i in hf_shuffle(len(train), question_seed(item["id"]))[:SHOTS]]
        demo = (
            "Example summaries:\n\n"
            + "\n\n".join("Summary: {}".format(ex["summary/short"]) for ex in picks)
            + "\n\nNow, write a summary of the following legal documents.\n"
        )

        def user(context: str) -> str:
            return P.MULTI_LEXSUM_USER.format(demo=demo, context=context)

        keypoints = item["summary/short_keypoints"]
        if not isinstance(keypoints, list) or not all(isinstance(k, str) for k in keypoints):
            raise TaskUnavailable(f"{self.name}: item {item['id']} has no keypoint list: {data.FIX}")
        meta = {"id": str(item["id"]), "keypoints": keypoints, "expert_summary": item["summary/long"]}
        return self._build(
            length,
            index,
            seed,
            tokenizer,
            "\n\n".join(item["sources"]),
            user,
            [item["summary/short"]],
            meta,
            budget=budget,
        )

    def score(self, prediction: str, sample: Sample) -> float:
        if no_answer(prediction):
            return 0.0
        meta = sample.metadata
        text = self._output(prediction, sample).strip()
        prompts = (JP.SUMM_FLUENCY, JP.SUMM_RECALL, JP.SUMM_PRECISION)
        what = f"{self.name} sample {sample.index}"
        return summary_f1(self, text, meta["keypoints"], meta["expert_summary"], prompts, what)
