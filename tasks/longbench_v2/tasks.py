"""LongBench v2 (THUDM/LongBench, v2): 503 four-choice questions over 8K-2M-word contexts.

    harness eval --ckpts M --chat --suite longbench-v2 --longbench-v2-data DIR          (pred.py)
    harness eval --ckpts M --chat --suite longbench-v2-cot ...                          (pred.py --cot)
    harness eval --ckpts M --chat --suite longbench-v2-nocontext ...                    (pred.py --no_context)
    harness eval --ckpts M --chat --suite longbench-v2-untruncated --max-length 1048576 ...  (no 120000 cap)

Each variant is six tasks, one per (difficulty, length class) cell, so that result.py's columns
come out exactly: the suite's categories Overall, Easy, Hard, Short, Medium, Long pool the samples
of their cells (the suite is "weighting": "samples"), i.e. the accuracy over their questions, as
result.py computes it. Sample `index` is the index-th item of the cell in data.json order.

Length: the length L is the whole budget of a sample (prompt + max_new_tokens), the model's context
unless --max-length says otherwise; with --chat the template's tokens are taken from it first (the
loop fits the sample to L minus them: pred.py sends the cut prompt as the user turn of the server's
chat template). Two protocols:
- "reference" (default): the prompt is cut with pred.py's middle truncation
  (tasks.longbench_v2.truncation) to min(120000, L - max_new_tokens [- template]): 120000 is
  config/model2maxlen.json's max_len for every open model it lists, counted with the model's own
  tokenizer, BOS included. pred.py has no rule for a model whose context is shorter: it would send
  the 120000-token prompt, the server would refuse it five times, query_llm would return '' and
  the item would be left out of the results file, so result.py's scores cover only the items that
  fit. Here the cap comes down to what the context allows instead, and every item is scored.
- "exact-length": the prompt is cut to L - max_new_tokens [- template], no 120000 cap.
Under --chat both wrap every prompt (pred.py always uses the chat route). metadata["truncation"]
records {rule, max_length (the prompt cap), original_tokens, truncated}, metadata["protocol"] the
protocol.

The chain of thought is pred.py's two steps: the model writes up to 1024 tokens after
0shot_cot.txt, then answers 0shot_cot_ans.txt, which holds the question, the choices and that
reasoning but not the document, in up to 128 tokens (Task.follow_up; the reasoning is kept in the
record's metadata). The no-context variant asks 0shot_no_context.txt (memorisation).

The untruncated variant (its own suite and headline, "LongBench v2 untruncated") asks pred.py's 0-shot
question with the prompt cut only where the context ends (L - max_new_tokens [- template]), under
either protocol: it is pred.py run with config/model2maxlen.json's max_len set to the model's context
instead of 120000, which keeps the Long subset whole up to 256K, 512K or 1M (THUDM/LongBench issue 93:
the 120000 cap cuts most of Long). A prompt still over the context is cut by pred.py's rule and its
record says so (metadata["truncation"]["truncated"]); the 0-shot suite keeps the published cap.

Differences from pred.py, on purpose: decoding is greedy (pred.py samples at temperature 0.1), and
an empty answer scores 0 (pred.py drops the item from its results file).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from harness.core.errors import UserError
from tasks.base import Sample, Task
from tasks.longbench_v2 import data
from tasks.longbench_v2.prompts import (
    ANSWER_TOKENS,
    COT_TOKENS,
    DIFFICULTIES,
    LENGTHS,
    TEMPLATE_0SHOT,
    TEMPLATE_COT,
    TEMPLATE_COT_ANSWER,
    TEMPLATE_NO_CONTEXT,
    extract_answer,
    fill,
)
from tasks.longbench_v2.truncation import middle_truncate

PROTOCOLS = ("reference", "exact-length")
# pred.py: maxlen_map[model], config/model2maxlen.json (every open model it lists: 120000)
REFERENCE_CAP = 120000
from harness.models.tokenization import count_tokens
from tasks.registry import Headline, register_suite, register_task

VARIANTS = {
    "": "LongBench v2",
    "cot": "LongBench v2 CoT",
    "nocontext": "LongBench v2 no context",
    "untruncated": "LongBench v2 untruncated",
}


class LongBenchV2Task(Task):
    kind = "generate"
    # 2: the reference protocol's 120000-token cap and metadata["protocol"]
    version: ClassVar[str] = "2"
    metric = "longbench_v2_choice"
    chance = 25.0  # four choices
    protocols: ClassVar[tuple[str, ...]] = PROTOCOLS
    length_controlled: ClassVar[bool] = False
    fit_chat_template: ClassVar[bool] = True
    variant: ClassVar[str]
    difficulty: ClassVar[str]
    length_class: ClassVar[str]

    def items(self) -> list[dict]:
        return [
            it for it in data.load_items() if it["difficulty"] == self.difficulty and it["length"] == self.length_class
        ]

    def check_available(self) -> None:
        data.load_items()

    def dataset_hash(self) -> str:
        return data.items_hash()

    def num_samples_available(self, length: int) -> int | None:
        return len(self.items())

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        items = self.items()
        if not 0 <= index < len(items):
            raise UserError(
                f"{self.name} has {len(items)} samples, index {index} asked: pass --samples {len(items)} or fewer"
            )
        item = items[index]
        meta: dict = {
            "_id": item["_id"],
            "domain": item["domain"],
            "sub_domain": item["sub_domain"],
            "difficulty": item["difficulty"],
            "length_class": item["length"],
            "protocol": self.protocol,
        }
        if self.variant == "nocontext":
            prompt = fill(TEMPLATE_NO_CONTEXT, item)
        else:
            template = TEMPLATE_COT if self.variant == "cot" else TEMPLATE_0SHOT
            cap = length - self.max_new_tokens
            if length > 0 and cap < 1:
                raise UserError(
                    f"{self.name}: length {length} leaves no prompt after {self.max_new_tokens} to generate"
                )
            prompt = fill(template, item, item["context"])
            if length > 0:
                # under reference: pred.py's cap, never more than the context allows (`cap`); the
                # untruncated variant (and exact-length) cut only where the context ends
                capped = self.protocol == "reference" and self.variant != "untruncated"
                cut = min(REFERENCE_CAP, cap) if capped else cap
                prompt, meta["truncation"] = middle_truncate(prompt, tokenizer, cut, limit=cap)
            if self.variant == "cot":  # the answer step, its $COT$ filled by follow_up
                meta["answer_prompt"] = fill(TEMPLATE_COT_ANSWER, item)
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt,
            answer_prefix="",
            references=(item["answer"],),
            max_new_tokens=self.max_new_tokens,
            num_tokens=count_tokens(tokenizer, prompt),
            dataset_hash=self.dataset_hash(),
            metadata=meta,
        )

    def uses_chat_template(self) -> bool:
        """pred.py always sends the prompt as a chat turn (messages=[{"role": "user", ...}])."""
        return True

    def follow_up(self, sample: Sample, first: str) -> Sample | None:
        """The CoT variant's answer step: 0shot_cot_ans.txt with the reasoning (stripped) in it."""
        if self.variant != "cot":
            return None
        prompt = sample.metadata["answer_prompt"].replace("$COT$", first.strip())
        return dataclasses.replace(sample, input=prompt, answer_prefix="", max_new_tokens=ANSWER_TOKENS)

    def score(self, prediction: str, sample: Sample) -> float:
        return 1.0 if extract_answer(prediction.strip()) == sample.references[0] else 0.0


def task_name(variant: str, difficulty: str, length_class: str) -> str:
    return "_".join(p for p in ("longbench_v2", variant, difficulty, length_class) if p)


def suite_name(variant: str) -> str:
    return f"longbench-v2-{variant}" if variant else "longbench-v2"


TASKS: dict[str, type[LongBenchV2Task]] = {}
SUITE_CATEGORIES: dict[str, dict[str, list[str]]] = {}
for _variant, _label in VARIANTS.items():
    _names = []
    for _d in DIFFICULTIES:
        for _l in LENGTHS:
            _n = task_name(_variant, _d, _l)
            TASKS[_n] = register_task(
                type(
                    f"LongBenchV2_{_n}",
                    (LongBenchV2Task,),
                    {
                        "name": _n,
                        "family": suite_name(_variant),
                        "variant": _variant,
                        "difficulty": _d,
                        "length_class": _l,
                        "max_new_tokens": COT_TOKENS if _variant == "cot" else ANSWER_TOKENS,
                        "no_context": _variant == "nocontext",
                        "__doc__": f"{_label}: the {_d} questions of {_l} context",
                    },
                )
            )
            _names.append(_n)
    # result.py's columns: the accuracy over the questions of each group (sample-weighted)
    SUITE_CATEGORIES[suite_name(_variant)] = {
        "Overall": list(_names),
        **{c.capitalize(): [n for n in _names if TASKS[n].difficulty == c] for c in DIFFICULTIES},
        **{c.capitalize(): [n for n in _names if TASKS[n].length_class == c] for c in LENGTHS},
    }
    register_suite(
        suite_name(_variant),
        _names,
        f"{_label}: 503 multiple-choice questions, Overall/Easy/Hard/Short/Medium/Long"
        + (", prompts cut only at the model's context (no 120000 cap)" if _variant == "untruncated" else "")
        + " (--longbench-v2-data DIR offline)",
        label=_label,
        # result.py's six columns, each its own number: the accuracy over its questions
        headline=Headline(
            "result.py's Overall/Easy/Hard/Short/Medium/Long: accuracy over each group's questions",
            {cat: {cat: names} for cat, names in SUITE_CATEGORIES[suite_name(_variant)].items()},
            weighting="samples",
        ),
    )
