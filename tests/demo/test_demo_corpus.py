"""The demo base model's corpus (training/demo_corpus.py): deterministic, and apart from RULER's samples."""

from __future__ import annotations

import json
import re

import pytest

from training import demo_corpus as dc

NEEDLE_RE = re.compile(r"One of the special magic (\w+) for (\S+) is: (\S+)\.")
QUESTION_RE = re.compile(r"The special magic (\w+) for (\S+) mentioned in the provided text is (\S+)\.")


def _docs(n=400, seed=0, **kw):
    return list(dc.documents(n, seed=seed, **kw))


def test_same_seed_same_corpus_and_hash(tmp_path):
    assert _docs(seed=5) == _docs(seed=5)
    assert _docs(seed=5) != _docs(seed=6)
    h1 = dc.write(tmp_path / "a.jsonl", 200, seed=1, short_share=0.5)
    h2 = dc.write(tmp_path / "b.jsonl", 200, seed=1, short_share=0.5)
    assert h1 == h2 and (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    assert len(lines) == 200 and {json.loads(x)["kind"] for x in lines} == {"facts", "dense", "chain"}


def test_every_recall_answers_a_stated_fact():
    asked = 0
    for doc in _docs(600, seed=2):
        if doc["kind"] == "chain":
            continue
        facts = {(m.group(2), m.group(3)) for m in NEEDLE_RE.finditer(doc["text"])}
        for m in QUESTION_RE.finditer(doc["text"]):
            assert (m.group(2), m.group(3)) in facts, doc["text"][-300:]
            asked += 1
        assert doc["text"].rstrip().endswith(".")
    assert asked > 300


def test_chain_answer_lists_the_chain_in_order():
    chains = [d["text"] for d in _docs(300, seed=3) if d["kind"] == "chain"]
    assert chains
    for text in chains:
        assigned = re.findall(r"^VAR (\w+) = ", text, flags=re.MULTILINE)
        answer = text.rsplit("they are: ", 1)[1].split()
        assert answer == assigned
        assert all(len(name) in (4, 6) for name in answer)  # RULER's vt uses 5 (query) and 3 (example)


def test_word_keys_are_never_ruler_keys():
    keys = {m.group(2) for d in _docs(1500, seed=1) for m in NEEDLE_RE.finditer(d["text"])}
    word_keys = {k for k in keys if not re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", k)}
    assert len(word_keys) > 1000
    assert not any(dc.is_ruler_word_key(k) for k in word_keys)


def test_no_key_of_the_demo_eval_samples_is_in_the_corpus(tmp_path):
    """The keys of the RULER samples the demo evaluates (seed 42, 1K) never occur in the corpus."""
    from harness.models.embedded import default_tokenizer_dir
    from harness.models.tokenization import load_tokenizer
    from tasks.generate import generate_samples
    from tasks.registry import get_task

    tok = load_tokenizer(str(default_tokenizer_dir()))
    eval_keys, eval_names = set(), set()
    for name in ("niah_single_1", "niah_multikey_2", "vt"):
        for s in generate_samples(get_task(name), 1024, range(8), tok, seed=42, cache_dir=False):
            eval_keys |= {m.group(2) for m in NEEDLE_RE.finditer(s.input)}
            eval_names |= set(re.findall(r"VAR (\w+) =", s.input))
    assert eval_keys and eval_names
    ruler_word_keys = {k for k in eval_keys if "-" in k and len(k) < 36}
    assert ruler_word_keys and all(dc.is_ruler_word_key(k) for k in ruler_word_keys)  # the check can fail
    text = "\n".join(d["text"] for d in _docs(2000, seed=1, short_share=0.6))
    corpus_keys = {m.group(2) for m in NEEDLE_RE.finditer(text)}
    corpus_names = set(re.findall(r"VAR (\w+) =", text))
    assert not eval_keys & corpus_keys
    assert not eval_names & corpus_names


@pytest.mark.parametrize("argv", [["--num-docs", "0"], ["--min-lines", "50"], ["--short-share", "2"]])
def test_cli_rejects_bad_arguments(tmp_path, argv):
    with pytest.raises(SystemExit) as exc:
        dc.main([str(tmp_path / "c.jsonl"), *argv])
    assert exc.value.code == 2


def test_cli_writes_and_prints_hash(tmp_path, capsys):
    assert dc.main([str(tmp_path / "c.jsonl"), "--num-docs", "30", "--seed", "4"]) == 0
    assert re.search(r"wrote 30 documents .* \(sha256 [0-9a-f]{16}\)", capsys.readouterr().out)


# ------------------------------------------------------------------ long-document upsampling (issue 25)


@pytest.fixture(scope="module")
def demo_tokenizer():
    from harness.demo.config import DEFAULT_MODEL
    from harness.models.tokenization import load_tokenizer

    return load_tokenizer(str(DEFAULT_MODEL))


def _lengths(tok, docs):
    """Tokens per document as training sees it (text + EOS)."""
    return [len(ids) + 1 for ids in tok([d["text"] for d in docs], add_special_tokens=False)["input_ids"]]


@pytest.mark.parametrize("window", [512, 2048])
def test_every_long_document_spans_the_window(demo_tokenizer, window):
    docs = _docs(60, seed=3, max_lines=4, long_share=1.0, long_lines=dc.long_lines_for(window))
    assert {d["kind"] for d in docs} == {"facts", "dense", "chain"}
    lengths = _lengths(demo_tokenizer, docs)
    assert min(lengths) >= window - 1, sorted(lengths)[:5]
    assert max(lengths) <= 5 * window  # 1-2 windows of filler; dense uuid documents run longer


def test_long_share_is_the_share_of_long_documents(demo_tokenizer):
    window = 512
    docs = _docs(400, seed=3, max_lines=4, long_share=0.35, long_lines=dc.long_lines_for(window))
    long = sum(x >= window - 1 for x in _lengths(demo_tokenizer, docs))  # short ones (<= 4 lines) never reach it
    assert 0.28 * 400 <= long <= 0.42 * 400  # binomial(400, 0.35): 5 standard deviations either way
    # Recalls still answer stated facts in long documents.
    for doc in docs:
        facts = {(m.group(2), m.group(3)) for m in NEEDLE_RE.finditer(doc["text"])}
        assert all((m.group(2), m.group(3)) in facts for m in QUESTION_RE.finditer(doc["text"]))


def test_without_long_share_the_stream_is_unchanged():
    """The option draws nothing unless used: the shipped base's corpora keep their sha256 (and
    test_shipped_base checks those); here, the documents equal the ones written with long_share=0."""
    kw = {"max_lines": 12, "short_share": 0.5, "short_lines": 3, "copy_share": 0.1, "repeat_share": 0.4}
    assert _docs(300, seed=1, **kw) == _docs(300, seed=1, long_share=0.0, long_lines=(40, 80), **kw)
    assert _docs(300, seed=1, **kw) != _docs(300, seed=1, long_share=0.2, long_lines=(40, 80), **kw)


def test_length_stats_against_brute_force():
    import random

    rng = random.Random(0)
    for _ in range(50):
        lengths = [rng.randint(2, 5000) for _ in range(rng.choice([1, 2, 9, 10, 11, 70, rng.randint(1, 200)]))]
        window = rng.choice([512, 1024, 2048])
        s = dc.length_stats(lengths, window)
        ordered = sorted(lengths)
        n = len(ordered)
        median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
        rank90 = next(k for k in range(1, n + 1) if k / n >= 0.9)  # smallest rank covering 90%
        spanning = [x for x in lengths if x + 1 >= window]
        assert s.median == median and s.p90 == ordered[rank90 - 1]
        assert s.spanning_docs == len(spanning) and s.docs == n and s.tokens == sum(lengths)
        assert s.spanning_share == pytest.approx(sum(spanning) / sum(lengths))
    with pytest.raises(ValueError):
        dc.length_stats([], 512)


@pytest.mark.parametrize(
    "argv",
    [
        ["--long-share", "0.3"],
        ["--long-share", "0.3", "--long-lines", "5"],
        ["--long-lines", "9,3"],
        ["--long-share", "2", "--long-lines", "4,8"],
    ],
)
def test_cli_rejects_bad_long_arguments(tmp_path, argv):
    with pytest.raises(SystemExit) as exc:
        dc.main([str(tmp_path / "c.jsonl"), "--num-docs", "5", *argv])
    assert exc.value.code == 2
    assert not (tmp_path / "c.jsonl").exists()


def test_cli_writes_the_demo_corpus(tmp_path, capsys):
    argv = ["--num-docs", "20", "--seed", "3", "--max-lines", "20", "--long-share", "0.5", "--long-lines", "21,42"]
    assert dc.main([str(tmp_path / "c.jsonl"), *argv]) == 0
    digest = re.search(r"sha256 ([0-9a-f]{16})", capsys.readouterr().out).group(1)
    assert digest == dc.write(tmp_path / "d.jsonl", 20, seed=3, max_lines=20, long_share=0.5, long_lines=(21, 42))
