"""BABILong (booydar/babilong): bAbI facts hidden in PG19 text, qa1-qa20, under two input protocols.

    harness eval --ckpts M --suite babilong --babilong-data DIR              qa1-qa5, the released set
    harness eval --ckpts M --suite babilong --lengths 1k-32k --babilong-data DIR
    harness eval --ckpts M --suite babilong --protocol exact-length --lengths 4k-128k --babilong-data DIR

"reference" (the default): the rows of BABILong's released sets (RMT-team/babilong, 100 a length, or
RMT-team/babilong-1k-samples, read from DIR as the hub gives them: tasks.babilong.released), as
scripts/run_model_on_babilong.py evaluates them: every row of the file in file order, its `input`
and `question` put in the reference's prompt (get_formatted_input: DEFAULT_TEMPLATE with the task's
instruction, examples and post_prompt, the leaderboard's configuration), no truncation, 20 new
tokens greedy; under --chat every task's prompt is the user turn (its --use_chat_template applies to
all tasks; its HF path sends no system turn, so none is added unless --system-prompt is given). The
lengths are the released labels (0k, 1k, 2k, 4k, ... 128k; record length 4k = 4096, 0k = 0), by
default every label DIR holds for the task up to the model's context (or --max-length). A label is a
nominal size: create_tasks.py cut the context of a "4k" row to 3,700 GPT-2 tokens.
The score reads the output as the leaderboard reads it back from the reference's CSV (metrics.csv_output).

"exact-length": this project's rule, for comparisons across tokenizers. Sample `index` of a task at
length L: the questions of the task's bAbI test file are put in an order drawn from (task, seed);
those with more than (L - 300) // 8 lines (facts and question) are left out at L, as the reference's
create_tasks.py does (max_n_facts = message_length // 8, its message_length being the length minus
300 for the prompt), and the index-th of the rest is used. The same question therefore appears at
every length that admits it. The background text is drawn from (task, version, length, index, seed)
and fitted to L in the evaluated model's tokens (tasks.babilong.haystack). At 0K (the babilong-0k
tasks, run once at length 0) the context is the facts alone, as the reference's 0k split.

Both: the reference's prompt strings and compare_answers with TASK_LABELS (tasks.babilong.prompts,
tasks.babilong.metrics). The suites' headline is the mean of qa1-qa5 at each length, as the
reference's leaderboard and README report it (collect_results.get_results_table's "avg" row);
`babilong` is those five tasks.
"""

from __future__ import annotations

import random
from typing import ClassVar

from harness.core.errors import TaskUnavailable, UserError
from harness.models.tokenization import count_tokens
from tasks.babilong import data, released
from tasks.babilong.haystack import BabilongPlan, sentence_stream
from tasks.babilong.metrics import score as babilong_score
from tasks.babilong.prompts import MAX_NEW_TOKENS, format_prompt
from tasks.base import Sample, Task
from tasks.registry import Headline, register_suite, register_task
from tasks.ruler.fitting import counter_for, fit, sample_rng

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
    protocols: ClassVar[tuple[str, ...]] = ("reference", "exact-length")
    qa: ClassVar[str]

    # Under "reference" the samples are released rows, a fixed dataset per label (the loop neither
    # fits them to L nor to L minus a chat template's tokens); "exact-length" fits them to L.
    @property
    def length_controlled(self) -> bool:  # type: ignore[override]
        return not self.no_context and self.protocol == "exact-length"

    @property
    def reference(self) -> bool:
        return self.protocol == "reference"

    def _labels(self) -> list[str]:
        """The released labels this task reads: 0k for the 0K tasks, else every one DIR holds."""
        return ["0k"] if self.no_context else released.labels(self.qa)

    def check_available(self) -> None:
        if self.reference:
            held = released.labels(self.qa)
            if not held or (self.no_context and "0k" not in held):
                raise TaskUnavailable(released.missing(self.qa, "0k" if self.no_context else "1k"))
            return
        data.questions(self.qa)
        if not self.no_context:
            data.books()

    def dataset_hash(self) -> str:
        if self.reference:
            return released.task_hash(self.qa, self._labels())
        h = data.questions(self.qa)[1]
        return h if self.no_context else f"{h}-{data.books().hash}"

    def task_lengths(self, requested: list[int] | None, context: int, max_length: int | None) -> list[int]:
        """Reference: the released labels (requested ones must be labels DIR holds); by default every
        label DIR holds up to the context (--max-length when given), 0k included."""
        if not self.reference:
            return super().task_lengths(requested, context, max_length)
        if self.no_context:
            return [0]
        held = released.labels(self.qa)
        if requested is None:
            cap = max_length or context
            return [released.LABELS[label] for label in held if released.LABELS[label] <= cap]
        for length in requested:
            label = released.label_of(length)
            if label is None:
                names = ", ".join(k for k in released.LABELS if k != "0k")
                raise UserError(
                    f"--lengths {length}: BABILong's released sets have lengths {names} (0k: --suite babilong-0k); "
                    "pass those, or --protocol exact-length for any length"
                )
            if label not in held:
                raise UserError(f"{released.missing(self.qa, label)}; or drop {label} from --lengths")
        return list(requested)

    def _rows(self, length: int) -> tuple[released.Item, ...]:
        label = released.label_of(length)
        if label is None:
            raise UserError(f"{self.name}: {length} is not a length of BABILong's released sets")
        return released.items(self.qa, label)

    def default_samples(self, length: int) -> int | None:
        # run_model_on_babilong.py evaluates every row of the file (100, or 1000 in babilong-1k-samples)
        return len(self._rows(length)) if self.reference else None

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
        if self.reference:
            return len(self._rows(length))
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

    def released_sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        """Row `index` of the released file, in the reference's prompt (the seed plays no part)."""
        rows = self._rows(length)
        if not 0 <= index < len(rows):
            raise UserError(
                f"{self.name} has {len(rows)} rows at length {length}, index {index} asked: pass --samples {len(rows)} or fewer"
            )
        row = rows[index]
        prompt = format_prompt(self.qa, row.input, row.question)
        label = released.label_of(length)
        meta = {"protocol": self.protocol, "question": row.question, "released": {"label": label, "row": index}}
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt,
            answer_prefix="",
            references=(row.target,),
            max_new_tokens=self.max_new_tokens,
            num_tokens=count_tokens(tokenizer, prompt),
            dataset_hash=self.dataset_hash(),
            metadata=meta,
        )

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        if self.reference:
            return self.released_sample(length, index, seed, tokenizer)
        qid, q = self.question(length, index, seed)
        meta: dict = {"protocol": self.protocol, "question_id": qid, "question": q.question, "num_facts": len(q.facts)}
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
        q = sample.metadata["question"]
        return babilong_score(self.qa, sample.references[0], prediction, q, via_csv=self.reference)


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
                    "no_context": _zero,
                    "__doc__": f"BABILong {_qa}" + (" at 0K (facts only)" if _zero else " in PG19 text"),
                },
            )
        )


def _headline(prefix: str) -> Headline:
    """qa1-qa5's mean at each length: the reference's leaderboard "avg" row (and README figure)."""
    return Headline(
        label="mean of qa1-qa5 at each length (BABILong leaderboard's avg)",
        groups={"qa1-qa5": {f"qa{i}": [f"{prefix}qa{i}"] for i in range(1, 6)}},
    )


def _register(name: str, prefix: str, last: int, help: str, label: str | None = None) -> None:
    tasks = [f"{prefix}qa{i}" for i in range(1, last + 1)]
    register_suite(name, tasks, help, label=label, headline=_headline(prefix))


_DATA = "--babilong-data DIR"
_register(
    "babilong",
    "babilong_",
    5,
    f"BABILong qa1-qa5, the leaderboard's tasks, at each released length ({_DATA})",
    "BABILong",
)
_register("babilong-qa1-5", "babilong_", 5, "BABILong qa1-qa5 (the same as babilong)")
_register("babilong-qa1-10", "babilong_", 10, "BABILong qa1-qa10 (the paper's first ten tasks)")
_register("babilong-all", "babilong_", 20, "BABILong qa1-qa20")
_register("babilong-0k", "babilong_0k_", 5, "BABILong qa1-qa5 at 0K: the facts alone", "BABILong 0K")
_register("babilong-0k-all", "babilong_0k_", 20, "BABILong qa1-qa20 at 0K")
