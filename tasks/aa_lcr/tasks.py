"""AA-LCR (Artificial Analysis Long Context Reasoning, hub dataset ArtificialAnalysis/AA-LCR): 100
questions, each over a set of real documents of ~100K tokens, graded by a model judge.

    harness eval --ckpts M --chat --suite aa-lcr --aa-lcr-data DIR \\
        --judge-base-url http://127.0.0.1:8001/v1 --judge-model Qwen/Qwen3-235B-A22B-Instruct-2507

AA-LCR has no code repository; its implementation here is NeMo-Skills' (nemo_skills/dataset/aalcr,
which the other harnesses follow), and benchmarks/aa_lcr_parity.py runs that code against ours.
One task, aa_lcr: each sample is a released question in CSV order, its prompt prepare.py's (every
document of its set, then the question: tasks.aa_lcr.prompts), sent as the one user turn (under
--chat through the model's chat template, as NeMo-Skills' generic/default prompt config sends it).

The record length is the run's budget (the context, or --max-length). A question whose prompt plus
the tokens to generate does not fit it, in the model's own tokens (under --chat the template's
tokens come out of the budget first), is left out and counted; the count kept is the task's sample
count (metadata["row"] names the released row). NeMo-Skills leaves such questions to the server
(its --max_context_window prepares a subset by cl100k_base count instead). Generation: up to
MAX_NEW_TOKENS; NeMo-Skills sets none (the server's rest of the window), so the budget is ours,
--max-new-tokens sets another (the fit rule keeps this default).

Grading (tasks.aa_lcr.grading): an empty answer, or one cut by the generation budget, is INCORRECT
before the judge is called; otherwise the judge (harness.models.judge, the --judge-* flags) is asked
the reference's prompt with NeMo-Skills' sampling (temperature 0, top_p 0.95, seed 0), and its reply
is read as NeMo-Skills reads it. A reply that says neither CORRECT nor INCORRECT first is asked
again, up to harness.models.judge.ATTEMPTS times, then graded as the reference grades it (INCORRECT).
The judge (server, model id and root, sampling, prompt source) goes into provenance and into every
record's settings["judge"]: another judge computes new records. The headline is the share of
questions graded CORRECT (AA publishes it x100), beside per-category means in the records' metadata.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import ClassVar

from harness.core.errors import TaskUnavailable, UserError
from harness.models import judge as J
from harness.models.tokenization import count_tokens
from tasks.aa_lcr import data, grading
from tasks.aa_lcr.prompts import SOURCE, judge_prompt
from tasks.base import BudgetFittedRows, Sample
from tasks.graphwalks.fitting import fitting_rows
from tasks.registry import Headline, register_suite, register_task
from tasks.ruler.fitting import counter_for

MAX_NEW_TOKENS = 4096  # ours: NeMo-Skills' tokens_to_generate is None (the server's rest of the window)
JUDGE_MAX_TOKENS = 2048  # ours: NeMo-Skills sends none; the reply asked for is one word
# NeMo-Skills' InferenceConfig defaults, under which its judge step runs (nemo_skills/inference/generate.py):
# temperature 0, top_p 0.95, random_seed 0


@register_task
class AALCR(BudgetFittedRows):
    """AA-LCR: the released questions over their document sets, judged CORRECT or INCORRECT."""

    name = "aa_lcr"
    family: ClassVar[str] = "aa_lcr"
    kind = "generate"
    version: ClassVar[str] = "1"
    metric = "aa_lcr_judge_correct"
    max_new_tokens = MAX_NEW_TOKENS
    protocols: ClassVar[tuple[str, ...]] = ("reference",)
    length_controlled: ClassVar[bool] = False
    fit_chat_template: ClassVar[bool] = True  # the prompt is the user turn: the template's tokens come first
    judge_max_tokens: ClassVar[int] = JUDGE_MAX_TOKENS

    def judge(self) -> J.JudgeConfig:
        return dataclasses.replace(J.configured(self.name), temperature=0.0, top_p=0.95, seed=0)

    def judge_settings(self) -> dict:
        return J.judge_settings(self.judge(), self.judge_max_tokens, prompts=SOURCE)

    def check_available(self) -> None:
        data.load_items()  # the data first: without it, the line names the data flag
        self.judge()

    def dataset_hash(self) -> str:
        return self.budget_hash(data.items_hash())

    def num_samples_available(self, length: int) -> int | None:
        return len(data.load_items())

    def _fitting(self, length: int, tokenizer) -> tuple[data.Item, ...]:
        key = ("aa_lcr", self.dataset_hash())
        return fitting_rows(data.load_items(), length - self.max_new_tokens, counter_for(tokenizer), key)

    def num_samples_with_tokenizer(self, length: int, tokenizer) -> int:
        kept, total = len(self._fitting(length, tokenizer)), len(data.load_items())
        if kept < total:
            print(
                f"AA-LCR: {total - kept} of {total} questions do not fit {length} tokens with {self.max_new_tokens} "
                "to generate (in the model's tokens): left out",
                file=sys.stderr,
            )
        if not kept:
            raise TaskUnavailable(
                f"{self.name}: none of the {total} questions fits {length} tokens with {self.max_new_tokens} to "
                "generate: a longer length (a model with a longer context, or --max-length)"
            )
        return kept

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        items = self._fitting(length, tokenizer)
        if not 0 <= index < len(items):
            raise UserError(
                f"{self.name} has {len(items)} questions that fit {length} tokens, index {index} asked: "
                f"pass --samples {len(items)} or fewer"
            )
        item, total = items[index], len(data.load_items())
        meta = {
            "protocol": self.protocol,
            "row": item.row,
            "question_id": item.question_id,
            "document_category": item.document_category,
            "document_set_id": item.document_set_id,
            "documents": len(item.filenames),
            "input_tokens": item.input_tokens,  # the released cl100k_base count
            "questions": total,
            "too_long": total - len(items),
            **self.budget_meta(),
        }
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=item.prompt,
            answer_prefix="",
            references=(item.answer,),
            max_new_tokens=self.max_new_tokens,
            num_tokens=count_tokens(tokenizer, item.prompt),
            dataset_hash=self.dataset_hash(),
            metadata=meta,
        )

    def score(self, prediction: str, sample: Sample) -> float:
        """The grade of an answer not known to be cut (harness.pipeline.engine calls score_cut)."""
        return self.score_cut(prediction, sample, False)

    def score_cut(self, prediction: str, sample: Sample, cut: bool) -> float:
        """1.0 CORRECT, 0.0 INCORRECT; `cut`: the answer ran to the generation budget."""
        if grading.before_judge(prediction, cut) is not None:
            return 0.0  # never shown to the judge (scitix/sieval issue 44)
        return 1.0 if grading.is_correct(self.ask_judge(prediction, sample)) else 0.0

    def ask_judge(self, prediction: str, sample: Sample) -> str:
        """The judge's reply to the reference's prompt, asked again while it says neither word first."""
        cfg, prompt = self.judge(), judge_prompt(sample.input, sample.references[0], prediction)
        reply = ""
        for _ in range(J.ATTEMPTS):
            reply = J.ask(cfg, prompt, self.judge_max_tokens)
            if grading.readable(reply):
                return reply
        head = " ".join(reply.split())[:80]
        print(
            f"AA-LCR: the judge {cfg.model!r} said neither CORRECT nor INCORRECT for sample {sample.index} in "
            f"{J.ATTEMPTS} replies (last: {head!r}): graded as NeMo-Skills grades it, INCORRECT",
            file=sys.stderr,
        )
        return reply


register_suite(
    "aa-lcr",
    ["aa_lcr"],
    "AA-LCR: 100 questions over ~100K-token document sets, judged CORRECT/INCORRECT by a model judge "
    "(--aa-lcr-data DIR offline; --judge-base-url URL --judge-model NAME)",
    label="AA-LCR",
    headline=Headline(
        "AA-LCR's figure: the share of questions the judge grades CORRECT (x100), over the questions that fit",
        {"AA-LCR": {"AA-LCR": ["aa_lcr"]}},
    ),
)
