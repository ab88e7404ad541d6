"""GraphWalks (openai/graphwalks): a directed graph as an edge list; BFS to a depth, or parents of a
node; the answer is a node list on the last line, scored by set F1.

    harness eval --ckpts M --suite graphwalks --graphwalks-data DIR              released rows, f1
    harness eval --ckpts M --suite graphwalks-flexible --graphwalks-data DIR     released rows, flexible_f1
    harness eval --ckpts M --suite graphwalks-exact-length --lengths 8k-128k     this project's graphs

`graphwalks` is lm-eval's task (lm_eval/tasks/graphwalks, the implementation every harness ports;
the dataset has no repository of its own): four tasks, the two released sets (128k:
graphwalks_128k_and_shorter.parquet, 1m: graphwalks_256k_to_1mil.parquet) times the two problem
types, each sample a released row in file order, its `prompt` sent verbatim (doc_to_text
"{{prompt}}"; under --chat as the user turn, as the dataset card says), up to 16384 new tokens
(max_gen_toks), scored by the last-line parse (lm-eval's `f1`). `graphwalks-flexible` scores the
same rows with the flexible parse (`flexible_f1`), reported as a suite of its own: lm-eval added it
because models other than OpenAI's seldom end on the answer line (its pull request 3377).

The record length is the run's budget (the context, or --max-length), as for the other released
sets; a row whose prompt plus the 16384 tokens to generate does not fit it, in the model's own
tokens (BOS included; under --chat the template's tokens come out of the budget first), is left
out, and the count of rows kept is the task's sample count (metadata["row"] names the released
row). lm-eval would send such a row and let its backend cut the prompt from the left. A model whose
budget is not above 16384 cannot run the set at that budget (the planner says so); --max-new-tokens N
(lm-eval's `--gen_kwargs max_gen_toks=N`) keeps the rows whose prompt plus N fit instead.

The headline is lm-eval's group: `f1` averaged over the samples of both sets (weight_by_size),
beside each set's own (GPT-5's card gives the 128k set per problem type: the tasks' own scores).

`graphwalks-exact-length` is this project's protocol, not the reference's (tasks.graphwalks.graph):
a graph drawn per (task, length, index, seed) to fill the length in the model's tokens; up to
min(16384, L // 4) new tokens; last-line F1.
"""

from __future__ import annotations

from typing import ClassVar

from harness.core.errors import TaskUnavailable, UserError
from harness.models.tokenization import count_tokens
from tasks.base import BudgetFittedRows, Sample, Task
from tasks.graphwalks import data
from tasks.graphwalks.fitting import fitting_rows, maximal_fit
from tasks.graphwalks.grading import f1
from tasks.graphwalks.graph import GraphPlan
from tasks.registry import Headline, register_suite, register_task
from tasks.ruler.fitting import counter_for

MAX_GEN_TOKS = 16384  # lm-eval graphwalks_128k.yaml / graphwalks_1M.yaml generation_kwargs.max_gen_toks
SET_LABELS = {"128k": "128k", "1m": "1M"}


class GraphWalksTask(Task):
    family: ClassVar[str] = "graphwalks"
    kind = "generate"
    version: ClassVar[str] = "1"
    max_new_tokens = MAX_GEN_TOKS
    problem_type: ClassVar[str]
    flexible: ClassVar[bool] = False

    def score(self, prediction: str, sample: Sample) -> float:
        return f1(prediction, sample.references, flexible=self.flexible)


class GraphWalksReleased(BudgetFittedRows, GraphWalksTask):
    """One released set's rows of one problem type."""

    protocols: ClassVar[tuple[str, ...]] = ("reference",)
    length_controlled: ClassVar[bool] = False
    fit_chat_template: ClassVar[bool] = True  # the row is the user turn: the template's tokens come first
    released_set: ClassVar[str]

    def check_available(self) -> None:
        data.rows(self.released_set)

    # (a lowered --max-new-tokens keeps the rows it has room for; lm-eval's `--gen_kwargs
    # max_gen_toks=N` sends them all, and the server cuts the answers at the window)
    def dataset_hash(self) -> str:
        return self.budget_hash(data.set_hash(self.released_set))

    def num_samples_available(self, length: int) -> int | None:
        return len(data.rows_of(self.released_set, self.problem_type))

    def _fitting(self, length: int, tokenizer) -> tuple[data.Row, ...]:
        rows = data.rows_of(self.released_set, self.problem_type)
        key = (self.released_set, self.problem_type, self.dataset_hash())
        return fitting_rows(rows, length - self.max_new_tokens, counter_for(tokenizer), key)

    def num_samples_with_tokenizer(self, length: int, tokenizer) -> int:
        kept = len(self._fitting(length, tokenizer))
        if not kept:
            raise TaskUnavailable(
                f"{self.name}: none of the {SET_LABELS[self.released_set]} set's {self.problem_type} rows fits "
                f"{length} tokens with {self.max_new_tokens} to generate: a longer length (a model with a longer context, "
                "or --max-length) or fewer tokens to generate (--max-new-tokens)"
            )
        return kept

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        rows = self._fitting(length, tokenizer)
        if not 0 <= index < len(rows):
            raise UserError(
                f"{self.name} has {len(rows)} rows that fit {length} tokens, index {index} asked: "
                f"pass --samples {len(rows)} or fewer"
            )
        row = rows[index]
        meta = {
            "protocol": self.protocol,
            "set": SET_LABELS[self.released_set],
            "problem_type": row.problem_type,
            "row": row.row,
            "prompt_chars": row.prompt_chars,
            "parse": "flexible" if self.flexible else "last line",
            **self.budget_meta(),
        }
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=row.prompt,
            answer_prefix="",
            references=row.answer_nodes,
            max_new_tokens=self.max_new_tokens,
            num_tokens=count_tokens(tokenizer, row.prompt),
            dataset_hash=self.dataset_hash(),
            metadata=meta,
        )


def generation_budget(length: int) -> int:
    """Tokens to generate at length L under the exact-length protocol."""
    return min(MAX_GEN_TOKS, length // 4)


class GraphWalksExact(GraphWalksTask):
    """This project's graphs, drawn to fill the length (tasks.graphwalks.graph)."""

    length_controlled: ClassVar[bool] = True

    def build_plan(self, length: int, index: int, seed: int, tokenizer) -> GraphPlan:
        parts = (self.name, self.version, length, index, seed)
        return GraphPlan(self.problem_type, parts, counter_for(tokenizer), length - generation_budget(length))

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        plan = self.build_plan(length, index, seed, tokenizer)
        budget = generation_budget(length)
        n, prompt, tokens = maximal_fit(plan, counter_for(tokenizer), length, budget, self.name)
        op = plan.graph(n)[1]
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt,
            answer_prefix="",
            references=tuple(plan.answer(n)),
            max_new_tokens=budget,
            num_tokens=tokens,
            dataset_hash="",
            metadata={
                "protocol": "exact-length (this project's GraphWalks graphs)",
                "problem_type": self.problem_type,
                "edges": n,
                "operation": op,
            },
        )


def _make(name: str, base: type, doc: str, **attrs) -> type:
    return register_task(type(f"GraphWalks_{name}", (base,), {"name": name, "__doc__": doc, **attrs}))


RELEASED: dict[str, list[str]] = {"graphwalks": [], "graphwalks-flexible": []}
for _suite, _flex in (("graphwalks", False), ("graphwalks-flexible", True)):
    for _set, _set_label in SET_LABELS.items():
        for _kind in data.PROBLEM_TYPES:
            _name = "_".join(["graphwalks", *(["flexible"] if _flex else []), _set, _kind])
            _parse = "flexible parse" if _flex else "last-line parse"
            _make(
                _name,
                GraphWalksReleased,
                f"GraphWalks {_set_label} set, {_kind} rows, {_parse}",
                released_set=_set,
                problem_type=_kind,
                flexible=_flex,
                metric="graphwalks_flexible_f1" if _flex else "graphwalks_f1",
            )
            RELEASED[_suite].append(_name)

EXACT = []
for _kind in data.PROBLEM_TYPES:
    _make(
        f"graphwalks_exact_{_kind}",
        GraphWalksExact,
        f"GraphWalks {_kind}, graphs drawn to the length (this project's protocol)",
        problem_type=_kind,
        metric="graphwalks_f1",
    )
    EXACT.append(f"graphwalks_exact_{_kind}")


def categories(suite: str) -> dict[str, list[str]]:
    """Each released set's tasks (a set's F1 pools its samples, as lm-eval's group does)."""
    names = RELEASED[suite]
    return {SET_LABELS[s]: [n for n in names if f"_{s}_" in n] for s in SET_LABELS}


SUITE_CATEGORIES = {s: categories(s) for s in RELEASED}

for _suite, _what in (("graphwalks", "f1 (last line)"), ("graphwalks-flexible", "flexible_f1")):
    register_suite(
        _suite,
        RELEASED[_suite],
        f"GraphWalks: openai/graphwalks' released rows, BFS and parents, 128k and 1M sets, lm-eval's {_what} "
        f"(--graphwalks-data DIR offline)",
        label="GraphWalks" if _suite == "graphwalks" else "GraphWalks (flexible parse)",
        headline=Headline(
            f"lm-eval's graphwalks group {_what}: the mean over the samples of both sets (weight_by_size), and each set's",
            {
                "Overall": {"Overall": list(RELEASED[_suite])},
                **{c: {c: ts} for c, ts in SUITE_CATEGORIES[_suite].items()},
            },
            weighting="samples",
        ),
    )
register_suite(
    "graphwalks-exact-length",
    EXACT,
    "GraphWalks graphs drawn to fill each length in the model's tokens (this project's protocol, not the released set)",
    label="GraphWalks exact-length (ours)",
)
