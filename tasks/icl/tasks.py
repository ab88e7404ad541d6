"""HELMET-style many-shot ICL classification at controlled lengths; suites "icl" and "icl-natural".

    harness eval --suite icl --lengths 4k-128k ...   (offline: export HARNESS_ICL_DATA=DIR)

Tasks icl_trec_coarse, icl_trec_fine, icl_banking77, icl_clinic150, icl_nlu map labels to random
integers per test item (the model must learn the mapping from the demos); the `_natural` variants
keep the label names. Facts from princeton-nlp/HELMET (data.py load_icl, configs/icl*.yaml):
  - per-item seed = (int(sha256(text), 16) + seed) % 2**31 drives demo choice and label mapping;
  - demos are label-balanced: rounds of one example per label, each round shuffled;
  - demo "{text}\\nlabel: {label}", joined by "\\n\\n", in the prompt below (no chat template);
  - greedy, 20 new tokens, stop at newline; the answer is parsed after "label:" (else the first
    line) and scored by exact match after SQuAD normalisation.
Demo counts: HELMET's per-length table (DEMO_COUNTS) at 4K-128K; other lengths scale the nearest
entry proportionally. When the prompt plus 20 generated tokens exceed the length, demos are dropped
from the end (never the question); metadata records demos_target and demos_used.
Test item `index` is the index-th item of a label-balanced (round-robin), seed-0 shuffled order of
the test split.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from functools import lru_cache
from typing import ClassVar

from harness.core.errors import UserError
from harness.models.tokenization import count_tokens
from tasks.base import Sample, Task
from tasks.icl import data
from tasks.longbench.metrics import normalize_answer
from tasks.registry import register_suite, register_task

PROMPT = (
    "Use the provided mapping from the text to label to assign a label to the text. "
    'Only output "label: {{label}}" and nothing else. \n\n{context}\n\n{question}\nlabel:'
)
DEMO = "{text}\nlabel: {label}"
MAX_NEW_TOKENS = 20
DATASETS = ["trec_coarse", "trec_fine", "banking77", "clinic150", "nlu"]

# HELMET configs/icl_short.yaml (8K-64K) and configs/icl.yaml (128K). HELMET's configs start at
# 8K; the 4K counts are half the 8K ones (trec_coarse 200 at 4K, as its paper's 4K runs use).
DEMO_COUNTS: dict[str, dict[int, int]] = {
    "trec_coarse": {4096: 200, 8192: 400, 16384: 800, 32768: 1600, 65536: 3300, 131072: 6600},
    "trec_fine": {4096: 200, 8192: 400, 16384: 800, 32768: 1600, 65536: 3200, 131072: 6400},
    "banking77": {4096: 180, 8192: 360, 16384: 720, 32768: 1450, 65536: 2900, 131072: 5900},
    "clinic150": {4096: 220, 8192: 440, 16384: 880, 32768: 1750, 65536: 3525, 131072: 7050},
    "nlu": {4096: 255, 8192: 510, 16384: 1020, 32768: 2040, 65536: 4080, 131072: 8296},
}


def demo_count(dataset: str, length: int) -> int:
    table = DEMO_COUNTS[dataset]
    if length in table:
        return table[length]
    nearest = min(table, key=lambda k: abs(math.log(k / length)))
    return max(1, round(table[nearest] * length / nearest))


def item_seed(text: str, seed: int) -> int:
    return (int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) + seed) % 2**31


def balanced_demos(pool: tuple[tuple[str, int], ...], shots: int, rng: random.Random) -> list[tuple[str, int]]:
    """`shots` demos in rounds holding one example of each label (shuffled within the round)."""
    by_label: dict[int, list[tuple[str, int]]] = {}
    for row in pool:
        by_label.setdefault(row[1], []).append(row)
    rounds = math.ceil(shots / len(by_label))
    picks: dict[int, list[tuple[str, int]]] = {}
    for label in sorted(by_label):
        rows = by_label[label]
        chosen: list[tuple[str, int]] = []
        while len(chosen) < rounds:  # reuse examples only when a label has fewer than `rounds`
            chosen += [rows[i] for i in rng.sample(range(len(rows)), min(rounds - len(chosen), len(rows)))]
        picks[label] = chosen
    out: list[tuple[str, int]] = []
    for r in range(rounds):
        group = [picks[label][r] for label in sorted(picks)]
        rng.shuffle(group)
        out += group
    return out[:shots]


def parse_label(output: str, prefix: str = "label:") -> str:
    """HELMET's parse_output: text after the first `prefix` on its line, else the first line."""
    for pat in (re.compile(f"(?:{re.escape(prefix)})(.*)(?:\n|$)", re.IGNORECASE), re.compile(r"(?:^)(.*)(?:\n|$)")):
        m = pat.search(output)
        if m is not None:
            return re.sub(f"^{re.escape(prefix)}", "", m[1].strip(), flags=re.IGNORECASE).strip()
    return ""


def largest_fitting(n: int, fits, guess: int) -> int:
    """Largest k in 0..n with fits(k) (fits is monotone: true up to some k); -1 if fits(0) fails.

    Gallops away from `guess` in doubling steps to bracket the answer, then bisects: a few calls
    when the guess is close, O(log n) when it is not.
    """
    guess = min(max(guess, 0), n)
    if fits(guess):
        lo, step = guess, 1
        while lo < n:
            hi = min(n, lo + step)
            if not fits(hi):
                break
            lo, step = hi, step * 2
        else:
            return n
    else:
        hi, step = guess, 1
        while True:
            if hi == 0:
                return -1
            lo = max(0, hi - step)
            if fits(lo):
                break
            hi, step = lo, step * 2
    while hi - lo > 1:  # fits(lo) and not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


@lru_cache(maxsize=16)
def _test_order(dataset: str, digest: str) -> tuple[int, ...]:
    """Label-balanced order of the test split: round-robin over labels, each label seed-0 shuffled."""
    test = data.load(dataset).test
    rng = random.Random(0)
    by_label: dict[int, list[int]] = {}
    for i, (_, label) in enumerate(test):
        by_label.setdefault(label, []).append(i)
    queues = []
    for label in sorted(by_label):
        idx = by_label[label][:]
        rng.shuffle(idx)
        queues.append(idx)
    order = []
    for r in range(max(len(q) for q in queues)):
        order += [q[r] for q in queues if r < len(q)]
    return tuple(order)


class ICLTask(Task):
    family: ClassVar[str] = "icl"
    kind = "generate"
    version: ClassVar[str] = "1"
    metric: ClassVar[str] = "exact_match"
    max_new_tokens: ClassVar[int] = MAX_NEW_TOKENS
    dataset: ClassVar[str]
    natural: ClassVar[bool] = False

    def check_available(self) -> None:
        data.load(self.dataset)

    def dataset_hash(self) -> str:
        return data.load(self.dataset).hash

    def num_samples_available(self, length: int) -> int | None:
        return len(data.load(self.dataset).test)

    def render(self, demos: list[tuple[str, int]], question: str, mapping: list) -> str:
        context = "\n\n".join(DEMO.format(text=t, label=mapping[lab]) for t, lab in demos)
        return PROMPT.format(context=context, question=question)

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        d = data.load(self.dataset)
        order = _test_order(self.dataset, d.hash)
        if not 0 <= index < len(order):
            raise UserError(
                f"{self.name} has {len(order)} test items, index {index} asked: pass --samples {len(order)} or fewer"
            )
        text, label = d.test[order[index]]
        local = item_seed(text, seed)
        target = demo_count(self.dataset, length)
        demos = balanced_demos(d.train, target, random.Random(local))
        if self.natural:
            mapping: list = list(d.labels)
        else:
            mapping = list(range(len(d.labels)))
            random.Random(local).shuffle(mapping)
        budget = length - self.max_new_tokens

        counted: dict[int, int] = {}

        def fits(k: int) -> bool:
            if k not in counted:
                counted[k] = count_tokens(tokenizer, self.render(demos[:k], text, mapping))
            return counted[k] <= budget

        # Guess from per-demo token counts (cheap, one batch), then confirm on the exact prompt:
        # a 128K prompt costs ~0.3 s to tokenize, so a guided search beats a blind bisection.
        blocks = ["\n\n" + DEMO.format(text=t, label=mapping[lab]) for t, lab in demos]
        sizes = [len(ids) for ids in tokenizer(blocks, add_special_tokens=False)["input_ids"]] if blocks else []
        guess, total = 0, count_tokens(tokenizer, self.render([], text, mapping))
        while guess < len(sizes) and total + sizes[guess] <= budget:
            total += sizes[guess]
            guess += 1
        k = largest_fitting(len(demos), fits, guess)
        if k < 0:
            raise UserError(
                f"{self.name} item {index} does not fit in {length} tokens even without demos: use a longer length"
            )
        prompt = self.render(demos[:k], text, mapping)
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt,
            answer_prefix="",
            references=(str(mapping[label]),),
            max_new_tokens=self.max_new_tokens,
            num_tokens=counted[k] if k in counted else count_tokens(tokenizer, prompt),
            dataset_hash=d.hash,
            metadata={
                "demos_target": target,
                "demos_used": k,
                "label_mapping": "natural" if self.natural else "random_int",
                "true_label": d.labels[label],
                "item_seed": local,
                "stop": ["\n"],
            },
        )

    def score(self, prediction: str, sample: Sample) -> float:
        parsed = normalize_answer(parse_label(prediction))
        return float(any(parsed == normalize_answer(r) for r in sample.references))


def _make(dataset: str, natural: bool) -> type[ICLTask]:
    name = f"icl_{dataset}" + ("_natural" if natural else "")
    cls = type(
        f"ICL_{dataset}{'_natural' if natural else ''}",
        (ICLTask,),
        {
            "name": name,
            "dataset": dataset,
            "natural": natural,
            "family": "icl-natural" if natural else "icl",  # reported as its own suite (harness/pipeline/results.py)
            "__doc__": f"HELMET ICL {dataset}, {'natural labels' if natural else 'labels mapped to random integers'}",
        },
    )
    return register_task(cls)


TASKS = {t.name: t for ds in DATASETS for t in (_make(ds, False), _make(ds, True))}
register_suite(
    "icl",
    [f"icl_{d}" for d in DATASETS],
    "HELMET many-shot ICL (TREC coarse/fine, Banking77, Clinic150, NLU), random-integer labels",
    label="ICL",
    order=3,
)
register_suite("icl-natural", [f"icl_{d}_natural" for d in DATASETS], "HELMET many-shot ICL with natural label names")
