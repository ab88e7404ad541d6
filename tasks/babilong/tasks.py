"""BABILong (booydar/babilong): bAbI facts hidden in PG19 text, qa1-qa20, at lengths in the model's tokens.

    harness eval --ckpts M --suite babilong --lengths 1k-128k --babilong-data DIR      qa1-qa10
    harness eval --ckpts M --suite babilong-0k --babilong-data DIR                     facts only (0K)

Sample `index` of a task at length L: the questions of the task's bAbI test file are put in an
order drawn from (task, seed); those with more than (L - 300) // 8 lines (facts and question) are
left out at L, as the reference's create_tasks.py does (max_n_facts = message_length // 8, its
message_length being the length minus 300 for the prompt), and the index-th of the rest is used.
The same question therefore appears at every length that admits it. The background text of the
sample is drawn from (task, version, length, index, seed) and fitted to L (tasks.babilong.haystack).
At 0K (the babilong-0k tasks, run once at length 0) the context is the facts alone, as the
reference's 0k split.

Prompt: the reference's DEFAULT_TEMPLATE with its instruction, examples and post_prompt (its
leaderboard configuration); no chat template unless --chat (the reference evaluates instruct
models with and without one). 20 tokens, greedy. Score: compare_answers with TASK_LABELS.
"""

from __future__ import annotations

import random
from typing import ClassVar

from harness.errors import UserError
from tasks.babilong import data
from tasks.babilong.haystack import BabilongPlan, sentence_stream
from tasks.babilong.metrics import score as babilong_score
from tasks.babilong.prompts import MAX_NEW_TOKENS, format_prompt
from tasks.base import Sample, Task
from tasks.registry import register_suite, register_task
from tasks.ruler.fitting import counter_for, fit, sample_rng
from tasks.tokenization import count_tokens

QA_TASKS = [f"qa{i}" for i in range(1, 21)]
PROMPT_RESERVE = 300  # create_tasks.py: message_length - 300 "to take prompt length into account"


def max_lines(length: int) -> int | None:
    """The most bAbI lines (facts + question) a question may have at length L; None at 0K (all)."""
    return None if length <= 0 else max(0, length - PROMPT_RESERVE) // 8


class BabilongTask(Task):
    version: ClassVar[str] = "1"
    kind = "generate"
    metric = "babilong_compare_answers"
    max_new_tokens = MAX_NEW_TOKENS
    qa: ClassVar[str]

    def check_available(self) -> None:
        data.questions(self.qa)
        if not self.no_context:
            data.books()

    def dataset_hash(self) -> str:
        h = data.questions(self.qa)[1]
        return h if self.no_context else f"{h}-{data.books().hash}"

    def _order(self, seed: int) -> list[int]:
        qs = data.questions(self.qa)[0]
        order = list(range(len(qs)))
        sample_rng("babilong-order", self.qa, seed).shuffle(order)
        return order

    def eligible(self, length: int, seed: int) -> list[int]:
        qs = data.questions(self.qa)[0]
        cap = max_lines(length)
        return [i for i in self._order(seed) if cap is None or len(qs[i].facts) + 1 <= cap]

    def num_samples_available(self, length: int) -> int | None:
        # the order depends on the seed, the count does not
        qs = data.questions(self.qa)[0]
        cap = max_lines(length)
        return sum(1 for q in qs if cap is None or len(q.facts) + 1 <= cap)

    def question(self, length: int, index: int, seed: int) -> tuple[int, data.Question]:
        """(question id in the bAbI file, question) of sample `index` at `length`."""
        self.check_available()
        ids = self.eligible(length, seed)
        if not 0 <= index < len(ids):
            raise UserError(
                f"{self.name} has {len(ids)} questions short enough for length {length}, index {index} asked: "
                f"pass --samples {len(ids)} or fewer"
            )
        return ids[index], data.questions(self.qa)[0][ids[index]]

    def build_plan(self, length: int, index: int, seed: int, tokenizer) -> tuple[BabilongPlan, list[int]]:
        """The fitting plan of sample `index` (tests render its neighbouring word counts) and the
        book each of its sentences comes from."""
        q = self.question(length, index, seed)[1]
        rng = sample_rng(self.name, self.version, length, index, seed)
        stream_rng = random.Random(rng.getrandbits(64))
        slots_u = [rng.random() for _ in q.facts]
        counter = counter_for(tokenizer)
        sentences, sources = sentence_stream(data.books().texts, stream_rng, counter, length)
        return BabilongPlan(self.qa, q, sentences, slots_u, counter), sources

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        qid, q = self.question(length, index, seed)
        meta: dict = {"question_id": qid, "question": q.question, "num_facts": len(q.facts)}
        if self.no_context:
            prompt = format_prompt(self.qa, " ".join(q.facts), q.question)
            tokens = count_tokens(tokenizer, prompt)
        else:
            plan, sources = self.build_plan(length, index, seed, tokenizer)
            n, prompt, _, tokens = fit(plan, counter_for(tokenizer), length, self.max_new_tokens, self.name)
            depths = plan.fact_depths(n)
            meta.update(
                haystack_units=n,
                fact_depths=depths,
                supporting_depths=[depths[i] for i in q.supporting],
                pg19_books=sorted(set(sources[: plan.slots(n)[0]])),
            )
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt,
            answer_prefix="",
            references=(q.answer,),
            max_new_tokens=self.max_new_tokens,
            num_tokens=tokens,
            dataset_hash=self.dataset_hash(),
            metadata=meta,
        )

    def score(self, prediction: str, sample: Sample) -> float:
        return babilong_score(self.qa, sample.references[0], prediction, sample.metadata["question"])


TASKS: dict[str, type[BabilongTask]] = {}
for _qa in QA_TASKS:
    for _zero in (False, True):
        _n = f"babilong_0k_{_qa}" if _zero else f"babilong_{_qa}"
        TASKS[_n] = register_task(
            type(
                f"Babilong_{'0k_' if _zero else ''}{_qa}",
                (BabilongTask,),
                {
                    "name": _n,
                    "qa": _qa,
                    "family": "babilong-0k" if _zero else "babilong",
                    "length_controlled": not _zero,
                    "no_context": _zero,
                    "__doc__": f"BABILong {_qa}" + (" at 0K (facts only)" if _zero else " in PG19 text"),
                },
            )
        )

register_suite(
    "babilong",
    [f"babilong_qa{i}" for i in range(1, 11)],
    "BABILong qa1-qa10: bAbI facts hidden in PG19 text at each length (--babilong-data DIR offline)",
    label="BABILong",
)
register_suite("babilong-qa1-5", [f"babilong_qa{i}" for i in range(1, 6)], "BABILong qa1-qa5 (the reference's average)")
register_suite("babilong-all", [f"babilong_qa{i}" for i in range(1, 21)], "BABILong qa1-qa20")
register_suite(
    "babilong-0k",
    [f"babilong_0k_qa{i}" for i in range(1, 11)],
    "BABILong qa1-qa10 at 0K: the facts alone",
    label="BABILong 0K",
)
register_suite("babilong-0k-all", [f"babilong_0k_qa{i}" for i in range(1, 21)], "BABILong qa1-qa20 at 0K")
