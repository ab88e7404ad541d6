"""HELMET's ICL category under the "reference" protocol: data.load_icl at 4526dfb, on tasks.icl's data.

HELMET evaluates max_test_samples=500 test items: the test split shuffled with datasets'
shuffle(seed) and then label-balanced by its balance_labels(seed) (when it has more than 500). Each
item gets `shots` label-balanced demos from the train split (balance_labels with the item's seed
(sha256(text) + seed) % 2**31) and a label -> integer mapping shuffled with python's random seeded
the same way; the prompt is user + "\\n" + "label:", and an overflow loses the end of the demos
(model_utils.tokenize). balance_labels is written here as HELMET has it (labels in order of first
appearance; `num_rounds % len(samples)` draws first), which tasks.icl's exact-length demos do not
follow.
"""

from __future__ import annotations

import hashlib
import math
import random
from functools import lru_cache

from harness.core.errors import UserError
from tasks.base import Sample
from tasks.helmet.draws import hf_shuffle
from tasks.icl import data as icl_data

USER = (
    "Use the provided mapping from the text to label to assign a label to the text. "
    'Only output "label: {{label}}" and nothing else. \n\n{context}\n\n{question}'
)
SYSTEM = "label:"
ITEM = "{text}\nlabel: {label}"
TEST_SAMPLES = 500  # configs/icl*.yaml max_test_samples


def balance_labels(rows, shots: int, seed: int) -> list[tuple[str, int]]:
    """data.load_icl's balance_labels: rounds of one row per label, each round shuffled."""
    rand = random.Random(seed)
    by_label: dict[int, list[tuple[str, int]]] = {}
    for row in rows:  # insertion order: a label's first appearance, as HELMET's dict comprehension
        by_label.setdefault(row[1], []).append(row)
    rounds = math.ceil(shots / len(by_label))
    groups: list[list[tuple[str, int]]] = [[] for _ in range(rounds)]
    for samples in by_label.values():
        picks = rand.sample(range(len(samples)), rounds % len(samples))
        while len(picks) < rounds:  # reuse rows only when a label has fewer than `rounds`
            picks += rand.sample(range(len(samples)), min(rounds - len(picks), len(samples)))
        for i, j in enumerate(picks):
            groups[i].append(samples[j])
    for g in groups:
        rand.shuffle(g)
    return [row for g in groups for row in g][:shots]


@lru_cache(maxsize=8)
def _test_items(dataset: str, digest: str, seed: int) -> tuple[tuple[str, int], ...]:
    test = icl_data.load(dataset).test
    if len(test) <= TEST_SAMPLES:
        return tuple(test)
    shuffled = [test[i] for i in hf_shuffle(len(test), seed)]
    return tuple(balance_labels(shuffled, TEST_SAMPLES, seed))


def item_seed(text: str, seed: int) -> int:
    return (int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) + seed) % 2**31


def sample(task, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
    from tasks.helmet import reference, released

    d = icl_data.load(task.dataset)
    items = _test_items(task.dataset, d.hash, seed)
    if not 0 <= index < len(items):
        raise UserError(f"{task.name} has {len(items)} test items, index {index} asked: pass --samples {len(items)}")
    text, label = items[index]
    local = item_seed(text, seed)
    shots = reference.run_for(task.name, length).k
    demos = balance_labels(d.train, shots, local)
    mapping = list(range(len(d.labels)))
    random.Random(local).shuffle(mapping)  # HELMET: random.seed(local_seed); random.shuffle(...)
    context = "\n\n".join(ITEM.format(text=t, label=str(mapping[lab])) for t, lab in demos)
    tail = "\n" + SYSTEM

    def render(ctx: str) -> str:
        return USER.format(context=ctx, question=text) + tail

    # no stop: the released code generates all 20 tokens (tasks.helmet.released's RELEASED_STOP)
    meta = {"demos": len(demos), "true_label": d.labels[label], "item_seed": local}
    return released.build(
        task,
        length,
        index,
        seed,
        tokenizer,
        render=render,
        context=context,
        tail=tail,
        refs=[str(mapping[label])],
        digest=d.hash,
        meta=meta,
        budget=budget,
    )


def score(prediction: str, sample: Sample) -> float:
    """data.load_icl's post_process: parse_output(system + output, "label:"), exact match."""
    from tasks.helmet import metrics

    out = prediction if "answer_prefix_removed" in sample.metadata else SYSTEM + prediction
    parsed = metrics.parse_output(out, SYSTEM)
    return metrics.exact_match(parsed or "", list(sample.references))
