"""Every RULER task: the length rule, landing slack, references in context, reference templates.

Length rule: tokens(input + answer_prefix, BOS counted) + max_new_tokens <= L, and one more
haystack unit (rendered by the task's own plan) would overflow L.
"""

import itertools
import re
from collections import Counter

import pytest

from harness.models.tokenization import count_tokens
from tasks.registry import all_suites, all_tasks, get_task
from tasks.ruler import RULER_TASKS

SYNTHETIC = [t for t in RULER_TASKS if not t.startswith("qa_")]


def check_length_rule(task, sample, tokenizer):
    assert sample.num_tokens == count_tokens(tokenizer, sample.prompt)
    assert sample.num_tokens + sample.max_new_tokens <= sample.length
    plan = task.build_plan(sample.length, sample.index, sample.seed, tokenizer)
    n = sample.metadata["haystack_units"]
    assert "".join(plan.render(n)) == sample.prompt  # the plan reproduces the sample
    if plan.max_units is None or n < plan.max_units:
        bigger = count_tokens(tokenizer, "".join(plan.render(n + 1)))
        assert bigger + sample.max_new_tokens > sample.length, "one more unit would still fit: landed short"


def check_references(name, sample):
    text = sample.input
    if name.startswith("niah"):
        singular = "multivalue" not in name and "multiquery" not in name
        for ref in sample.references:
            assert re.search(rf"One of the special magic (numbers|uuids) for .+? is: {ref}\.", text)
        assert text.startswith("A special magic" if singular else "Some special magic")
        if name == "niah_multikey_2" or name == "niah_multikey_3":
            # the queried key occurs once: distractors never reuse it
            key = sample.answer_prefix.split(" for ")[1].split(" mentioned")[0]
            assert text.count(f"for {key} is:") == 1
    elif name == "vt":
        names = sample.references
        task_part = text[text.rindex("Memorize and track") :]
        value = re.search(r"VAR " + names[0] + r" = (\d+)\n", task_part).group(1)
        for a, b in itertools.pairwise(names):
            assert f"VAR {b} = VAR {a} \n" in task_part or task_part.endswith(f"VAR {b} = VAR {a} ")
        assert f"assigned the value {value} in the text above" in task_part
        assert (
            f"5 variables are assigned the value {value}, they are: "
            == sample.answer_prefix[sample.answer_prefix.index("5 var") :]
        )
    elif name == "cwe":
        task_part = text[text.rindex("Below is a numbered list") :]
        entries = re.findall(r"(?:^|\s)(\d+)\. (\S+)", task_part.split("\n")[1])
        assert [int(i) for i, _ in entries] == list(range(1, len(entries) + 1))
        counts = Counter(w for _, w in entries)
        fc, fu = sample.metadata["common_freq"], sample.metadata["uncommon_freq"]
        assert {w: counts[w] for w in sample.references} == {w: fc for w in sample.references}
        assert all(c == fu for w, c in counts.items() if w not in sample.references)
        assert len(sample.references) == 10
    elif name == "fwe":
        ctx = text[text.index("coded words. ") + len("coded words. ") : text.index("\nQuestion:")]
        counts = Counter(ctx.split(" "))
        ranked = [w for w, _ in sorted(counts.items(), key=lambda kv: -kv[1])]
        assert ranked[0] == "..."
        assert ranked[1:4] == list(sample.references)
        assert counts[ranked[3]] > counts[ranked[4]]


@pytest.mark.parametrize("length", [1024, 4096, 16384])
@pytest.mark.parametrize("name", SYNTHETIC)
def test_task_bpe(name, length, bpe_tokenizer):
    task = get_task(name)
    s = task.sample(length, 0, 42, bpe_tokenizer)
    check_length_rule(task, s, bpe_tokenizer)
    check_references(name, s)
    assert s.version == task.version and s.dataset_hash == task.dataset_hash()


@pytest.mark.parametrize("name", ["niah_single_1", "niah_single_3", "niah_multikey_3", "vt", "cwe", "fwe"])
def test_task_byte_tokenizer_no_bos(name, byte_tokenizer):
    task = get_task(name)
    s = task.sample(16384, 1, 7, byte_tokenizer)  # cwe fixed parts alone need ~7k byte tokens
    check_length_rule(task, s, byte_tokenizer)
    check_references(name, s)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["niah_multikey_2", "fwe"])
def test_task_128k(name, bpe_tokenizer):
    task = get_task(name)
    s = task.sample(131072, 0, 42, bpe_tokenizer)
    check_length_rule(task, s, bpe_tokenizer)
    check_references(name, s)


def test_length_below_fixed_parts_names_the_limit(bpe_tokenizer):
    from harness.core.errors import UserError

    with pytest.raises(UserError, match="at least"):
        get_task("vt").sample(256, 0, 42, bpe_tokenizer)


def test_suites():
    suites = all_suites()
    assert suites["ruler"] == RULER_TASKS and len(RULER_TASKS) == 13
    assert suites["ruler-llama2"] == [t for t in RULER_TASKS if t not in ("niah_multikey_3", "cwe")]


def test_cwe_frequencies_switch_at_4096(bpe_tokenizer):
    small, big = get_task("cwe").sample(4000, 0, 42, bpe_tokenizer), get_task("cwe").sample(4096, 0, 42, bpe_tokenizer)
    assert (small.metadata["common_freq"], small.metadata["uncommon_freq"]) == (6, 1)
    assert (big.metadata["common_freq"], big.metadata["uncommon_freq"]) == (30, 3)


def test_fwe_zeta_matches_scipy():
    scipy_special = pytest.importorskip("scipy.special")
    from tasks.ruler.fwe import ZETA_2, vocab_size

    assert ZETA_2 == scipy_special.zeta(2.0)
    assert vocab_size(4096) == (4096 - 50) // 50


def test_light_tokenizer_counts_like_transformers(bpe_tokenizer, bpe_tokenizer_dir):
    from tasks.ruler.fitting import light_tokenizer

    light = light_tokenizer(str(bpe_tokenizer_dir))
    a = get_task("niah_single_2").sample(2048, 0, 42, light)
    b = get_task("niah_single_2").sample(2048, 0, 42, bpe_tokenizer)
    assert a == b and a.num_tokens == count_tokens(bpe_tokenizer, a.prompt)


def test_cwe_extends_its_word_pool_when_wonderwords_run_out(bpe_tokenizer, monkeypatch):
    from tasks.ruler import cwe

    small = tuple(cwe.cwe_words()[:200])
    monkeypatch.setattr(cwe, "cwe_words", lambda: small)
    s = get_task("cwe").sample(16384, 0, 42, bpe_tokenizer)
    assert s.metadata["word_pool"] == "wonderwords+essays" and s.metadata["words"] > 200
    assert s.num_tokens == count_tokens(bpe_tokenizer, s.prompt) and s.num_tokens + s.max_new_tokens <= 16384
    check_references("cwe", s)


def test_cwe_refuses_a_length_its_whole_word_pool_cannot_fill(bpe_tokenizer, monkeypatch):
    """At 1M the embedded tokenizer's sample held every distinct word and about 215K tokens, and was
    scored as a 1M sample; now such a length is refused, naming the length it can fill."""
    from harness.core.errors import UserError
    from tasks.ruler import cwe

    small = tuple(cwe.cwe_words()[:200])
    monkeypatch.setattr(cwe, "cwe_words", lambda: small)
    monkeypatch.setattr(cwe, "_extended_pool", lambda essays_path: small + tuple(f"{w}s" for w in small))
    task = get_task("cwe")
    fits = task.sample(4096, 0, 42, bpe_tokenizer)  # 400 words fill 4K: a sample as before
    assert fits.metadata["words"] < 400 and fits.num_tokens + fits.max_new_tokens <= 4096
    with pytest.raises(UserError, match=r"cwe: length 65536 needs more distinct words than its pool holds \(400") as e:
        task.sample(65536, 0, 42, bpe_tokenizer)
    most = int(str(e.value).rsplit(" ", 1)[1])
    at_most = task.sample(most, 0, 42, bpe_tokenizer)  # the length it names is one it builds
    assert most < 65536 and at_most.num_tokens + at_most.max_new_tokens <= most


def test_vectorised_values_match_the_reference_formats():
    import uuid

    import numpy as np

    from tasks.data.words import adjectives, nouns
    from tasks.ruler.niah import draw_values

    g = np.random.default_rng(0)
    for u in draw_values("uuids", g, 200):
        assert str(uuid.UUID(u)) == u and uuid.UUID(u).version == 4 and uuid.UUID(u).variant == uuid.RFC_4122
    nums = draw_values("numbers", g, 2000)
    assert all(len(x) == 7 and x[0] != "0" for x in nums) and len(set(nums)) > 1990
    adj, noun = set(adjectives()), set(nouns())
    for w in draw_values("words", g, 200):
        assert any(w[:i] in adj and w[i + 1 :] in noun for i in range(len(w)) if w[i] == "-")


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_every_task_pickles(name):
    """Local --data-parallel workers receive tasks by pickle: every registered task must round-trip
    (the niah classes are built in a loop, so they need module-level names)."""
    import pickle

    task = get_task(name)
    again = pickle.loads(pickle.dumps(task))
    assert type(again) is type(task) and again.name == task.name and again.version == task.version
