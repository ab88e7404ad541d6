"""Loading documents (jsonl, parquet, token shards), the anchor rule, and the generated corpus."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from harness.core.errors import UserError
from training.corpus import DOMAINS, generate_documents, write_corpus
from training.data import anchor_id, load_documents


def test_anchor_is_bos_or_eos(bpe_tokenizer, byte_tokenizer):
    assert anchor_id(bpe_tokenizer) == bpe_tokenizer.bos_token_id  # prepends BOS
    assert anchor_id(byte_tokenizer) == byte_tokenizer.eos_token_id  # adds no BOS: EOS anchors (Qwen rule)


def test_jsonl_documents_no_bos_end_eos_with_tags(tmp_path, bpe_tokenizer):
    tok = bpe_tokenizer
    path = tmp_path / "d.jsonl"
    rows = [
        {"text": "The sky is blue.", "domain": "Wikipedia"},
        {"text": "   ", "domain": "C4"},
        {"text": "Here we go.", "domain": "C4"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    docs = list(load_documents(str(path), tok, domain_field="domain"))
    assert len(docs) == 2  # the blank text is skipped
    assert docs[0].ids == tok("The sky is blue.", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert tok.bos_token_id not in docs[0].ids
    assert docs[0].tag_ids == tok("Wikipedia", add_special_tokens=False)["input_ids"]
    assert [d.source for d in docs] == ["Wikipedia", "C4"]
    plain = list(load_documents(str(path), tok, limit=1))
    assert len(plain) == 1 and plain[0].tag_ids is None and plain[0].source == "d"


def test_parquet_and_directory(tmp_path, byte_tokenizer):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["abc", "de"], "src": ["x", "y"]}), tmp_path / "a.parquet")
    (tmp_path / "b.jsonl").write_text(json.dumps({"body": "f", "src": "x"}) + "\n")
    docs = list(load_documents(str(tmp_path), byte_tokenizer, text_field="body", source_field="src"))
    eos = byte_tokenizer.eos_token_id
    assert [len(d.ids) for d in docs] == [4, 3, 2] and all(d.ids[-1] == eos for d in docs)
    assert [d.source for d in docs] == ["x", "y", "x"]


@pytest.mark.parametrize("suffix", [".npy", ".bin"])
def test_token_shards_split_at_eos_and_drop_bos(tmp_path, bpe_tokenizer, suffix):
    tok = bpe_tokenizer
    bos, eos = tok.bos_token_id, tok.eos_token_id
    stream = [bos, 50, 51, eos, 60, eos, eos, bos, 70, 71, 72, eos]
    path = tmp_path / f"shard{suffix}"
    arr = np.array(stream, dtype=np.uint16)
    np.save(path, arr) if suffix == ".npy" else arr.tofile(path)
    docs = list(load_documents(str(path), tok))
    assert [d.ids for d in docs] == [[50, 51, eos], [60, eos], [70, 71, 72, eos]]  # bare EOS = empty doc, skipped
    assert docs[0].source == "shard"
    bad = tmp_path / f"bad{suffix}"
    arr = np.array([50, 51], dtype=np.uint16)
    np.save(bad, arr) if suffix == ".npy" else arr.tofile(bad)
    with pytest.raises(UserError, match="end with EOS"):
        list(load_documents(str(bad), tok))
    with pytest.raises(UserError, match="pre-tokenized"):
        list(load_documents(str(path), tok, domain_field="domain"))


def test_user_errors(tmp_path, byte_tokenizer):
    with pytest.raises(UserError, match="not found"):
        list(load_documents(str(tmp_path / "missing.jsonl"), byte_tokenizer))
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps({"content": "a"}) + "\n")
    with pytest.raises(UserError, match="--text-field"):
        list(load_documents(str(p), byte_tokenizer))
    p.write_text(json.dumps({"text": "a"}) + "\n")
    with pytest.raises(UserError, match="--domain-tags"):
        list(load_documents(str(p), byte_tokenizer, domain_field="domain"))
    with pytest.raises(UserError, match="hub dataset"):  # tests run offline: a hub name fails cleanly
        list(load_documents("nobody/no-such-dataset", byte_tokenizer))
    p.write_text("{not json\n")
    with pytest.raises(UserError, match="x.jsonl:1"):
        list(load_documents(str(p), byte_tokenizer))


def test_corpus_deterministic_and_jsonl(tmp_path, byte_tokenizer):
    path = write_corpus(tmp_path / "c.jsonl", 20, seed=3)
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows == list(generate_documents(20, seed=3)) and set(rows[0]) == {"text", "domain"}
    assert rows != list(generate_documents(20, seed=4))
    assert list(generate_documents(5, seed=3)) == rows[:5]  # doc i does not depend on num_docs
    docs = list(load_documents(str(path), byte_tokenizer, domain_field="domain"))
    assert len(docs) == 20


def test_corpus_lengths_many_short_few_long_and_facts_recalled():
    docs = list(generate_documents(600, seed=0))
    words = [len(d["text"].split()) for d in docs]
    median, mean = statistics.median(words), statistics.mean(words)
    assert mean > 1.8 * median  # heavy right tail (lognormal)
    assert sum(w < mean for w in words) > 0.7 * len(words)  # many short
    long = sum(w > 10 * median for w in words)
    assert 0 < long < 0.1 * len(words)  # a few long
    assert {d["domain"] for d in docs} == set(DOMAINS)
    for d in docs[:50]:
        head, tail = d["text"].split("\n")[0], d["text"].split("\n")[-1]
        facts = [s.strip() for s in head.split(".") if s.strip()]
        assert all(f"Recall: the code for {f[len('The code for ') :]}" in tail for f in facts)
