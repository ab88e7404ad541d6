"""HELMET-style ICL: demo balancing, per-item label mapping, demo dropping at the length limit,
HELMET's demo counts, answer parsing and an end-to-end run with a fake runner."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest

from harness.core.errors import TaskUnavailable
from harness.models.runners.base import GenerationRequest
from tasks.generate import generate_samples
from tasks.icl import data
from tasks.icl.tasks import balanced_demos, demo_count, item_seed, parse_label
from tasks.registry import all_suites, get_task

from .helpers import FakeRunner

LABELS = ["ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"]
HEADER = 'Use the provided mapping from the text to label to assign a label to the text. Only output "label: {label}" and nothing else. \n\n'


@pytest.fixture
def icl_dir(tmp_path, monkeypatch):
    rng = random.Random(3)
    d = tmp_path / "trec_coarse"
    d.mkdir()
    train = [
        {"text": f"train question {i} about {LABELS[i % 6].lower()} {rng.randint(0, 999)}?", "label": i % 6}
        for i in range(60)
    ]
    test = [{"text": f"test question {i}?", "label": (i * 5) % 6} for i in range(12)]
    for name, rows in (("train", train), ("test", test)):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "labels.json").write_text(json.dumps(LABELS))
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    return {"train": {r["text"]: r["label"] for r in train}, "test": test}


def _demos_in(prompt):
    body = prompt[len(HEADER) :]
    blocks = body.split("\n\n")
    pairs = [tuple(b.split("\nlabel: ")) for b in blocks[:-1]]
    return pairs, blocks[-1]


def test_helmet_demo_counts():
    assert [demo_count("trec_coarse", 1024 * k) for k in (4, 8, 16, 32, 64, 128)] == [200, 400, 800, 1600, 3300, 6600]
    assert (
        demo_count("nlu", 131072) == 8296
        and demo_count("banking77", 32768) == 1450
        and demo_count("clinic150", 65536) == 3525
    )
    assert demo_count("trec_fine", 262144) == 12800  # beyond the table: proportional to the nearest entry


def test_balanced_demos_are_balanced_and_seeded():
    pool = tuple((f"t{i}", i % 6) for i in range(60))
    for shots in (6, 13, 200):
        demos = balanced_demos(pool, shots, random.Random(7))
        counts = Counter(lab for _, lab in demos)
        assert len(demos) == shots and max(counts.values()) - min(counts.values() or [0]) <= 1
        assert len(counts) == min(6, shots)
    assert balanced_demos(pool, 40, random.Random(7)) == balanced_demos(pool, 40, random.Random(7))
    assert balanced_demos(pool, 40, random.Random(7)) != balanced_demos(pool, 40, random.Random(8))
    # every round of 6 holds each label once
    demos = balanced_demos(pool, 36, random.Random(1))
    assert all(sorted(lab for _, lab in demos[r : r + 6]) == list(range(6)) for r in range(0, 36, 6))


def test_label_mapping_per_item(icl_dir, byte_tokenizer):
    task = get_task("icl_trec_coarse")
    mappings = []
    for idx in range(4):
        s = task.sample(8192, idx, 42, byte_tokenizer)
        pairs, last = _demos_in(s.prompt)
        question = last.removesuffix("\nlabel:")
        true = next(r["label"] for r in icl_dir["test"] if r["text"] == question)
        m = {}
        for text, shown in pairs:  # one integer per true label, and distinct labels get distinct integers
            assert m.setdefault(icl_dir["train"][text], shown) == shown
        assert len(set(m.values())) == len(m) == 6 and set(m.values()) <= {str(i) for i in range(6)}
        assert s.references == (m[true],)
        mappings.append(tuple(sorted(m.items())))
        assert s.metadata["label_mapping"] == "random_int" and s.metadata["item_seed"] == item_seed(question, 42)
    assert len(set(mappings)) > 1  # the mapping changes from item to item
    assert task.sample(8192, 0, 42, byte_tokenizer) == task.sample(8192, 0, 42, byte_tokenizer)
    assert task.sample(8192, 0, 43, byte_tokenizer).prompt != task.sample(8192, 0, 42, byte_tokenizer).prompt
    nat = get_task("icl_trec_coarse_natural").sample(8192, 0, 42, byte_tokenizer)
    pairs, _ = _demos_in(nat.prompt)
    assert all(shown == LABELS[icl_dir["train"][text]] for text, shown in pairs)
    assert nat.references[0] in LABELS


def test_test_order_is_label_balanced(icl_dir):
    task = get_task("icl_trec_coarse")
    assert task.num_samples_available(4096) == 12
    from tasks.icl.tasks import _test_order

    order = _test_order("trec_coarse", data.load("trec_coarse").hash)
    assert sorted(order) == list(range(12))
    assert sorted(icl_dir["test"][i]["label"] for i in order[:6]) == list(range(6))


def test_over_long_prompts_drop_demos_from_the_end(icl_dir, byte_tokenizer):
    from tasks.icl.tasks import ICLTask

    task = get_task("icl_trec_coarse")
    length = 2048  # byte tokenizer: ~2000 characters, far fewer than 200 demos
    s = task.sample(length, 3, 42, byte_tokenizer)
    d = data.load("trec_coarse")
    question = s.prompt.rsplit("\n\n", 1)[1].removesuffix("\nlabel:")
    seed = item_seed(question, 42)
    full = balanced_demos(d.train, demo_count("trec_coarse", length), random.Random(seed))
    k = s.metadata["demos_used"]
    assert s.metadata["demos_target"] == 100 and 0 < k < 100  # 2K: half the 4K count
    mapping = list(range(6))
    random.Random(seed).shuffle(mapping)
    assert s.prompt == ICLTask.render(task, full[:k], question, mapping)  # a prefix of the demos, question kept
    assert s.prompt.endswith(f"\n\n{question}\nlabel:")
    assert s.num_tokens + task.max_new_tokens <= length
    longer = ICLTask.render(task, full[: k + 1], question, mapping)
    assert len(byte_tokenizer(longer)["input_ids"]) + task.max_new_tokens > length  # one more would not fit
    assert len(re.findall(r"\nlabel: ", s.prompt)) == k


@pytest.mark.parametrize(
    "out,expected", [(" 3\nfoo", "3"), ("label: 4", "4"), ("Label: Foo bar\nx", "Foo bar"), ("", ""), ("\n5", "")]
)
def test_parse_label(out, expected):
    assert parse_label(out) == expected


def test_icl_end_to_end_fake_runner(icl_dir, bpe_tokenizer):
    task = get_task("icl_trec_coarse")
    samples = generate_samples(task, 4096, range(12), bpe_tokenizer, seed=42, cache_dir=False)
    truth = {s.prompt: s.references[0] for s in samples}
    # right answer for even items (with trailing junk after the newline), a wrong one for odd items
    runner = FakeRunner(
        lambda p: (
            f" {truth[p]}\nnext text" if samples.index(next(s for s in samples if s.prompt == p)) % 2 == 0 else " 99"
        )
    )
    preds = runner.generate([GenerationRequest(s.prompt, s.max_new_tokens, tuple(s.metadata["stop"])) for s in samples])
    scores = [task.score(p, s) for p, s in zip(preds, samples)]
    assert scores == [1.0 if i % 2 == 0 else 0.0 for i in range(12)]
    assert all(s.num_tokens + 20 <= 4096 for s in samples)
    assert all_suites()["icl"] == ["icl_trec_coarse", "icl_trec_fine", "icl_banking77", "icl_clinic150", "icl_nlu"]
    with pytest.raises(TaskUnavailable, match="banking77/train.jsonl"):
        get_task("icl_banking77").check_available()


def test_largest_fitting_matches_linear_scan():
    from tasks.icl.tasks import largest_fitting

    rng = random.Random(5)
    for _ in range(400):
        n = rng.randint(0, 60)
        true_k = rng.randint(-1, n)  # fits(k) <=> k <= true_k
        calls = []

        def fits(k, calls=calls, true_k=true_k):
            calls.append(k)
            return k <= true_k

        assert largest_fitting(n, fits, rng.randint(-3, n + 3)) == true_k
        assert all(0 <= c <= n for c in calls)
    calls = []
    assert (
        largest_fitting(6600, lambda k: calls.append(k) or k <= 4000, 4000) == 4000 and len(calls) == 2
    )  # a close guess is cheap
