"""Long-document perplexity against a brute-force loss computed on the document's own tokens."""

from __future__ import annotations

import math

import pytest

from harness.core.errors import TaskUnavailable, UserError
from tasks import ppl
from tasks.registry import all_suites, get_task

DOC = " ".join(
    f"The river {w} runs past the old mill and the green field number {i}."
    for i, w in enumerate(["quietly", "slowly", "north", "under", "bright", "cold"] * 12)
)


@pytest.fixture
def ppl_doc(tmp_path, monkeypatch):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "short one."}\n' + '{"text": ' + __import__("json").dumps(DOC) + "}\n")
    monkeypatch.setenv(ppl.ENV_VAR, str(path))
    return path


def test_ppl_matches_brute_force_loss(ppl_doc, tiny_runner, tiny_tokenizer):
    import torch

    length = 256
    task = get_task("ppl")
    out = task.evaluate_with_runner(tiny_runner, length, [0, 1, 10_000], 42, tiny_tokenizer)
    assert [r["index"] for r in out] == [0, 1]  # windows that do not exist are skipped
    doc_ids = tiny_tokenizer(DOC, add_special_tokens=False)["input_ids"]
    size = length - 1  # the BPE tokenizer adds BOS: window + BOS = the length
    assert len(doc_ids) >= 2 * size
    for rec in out:
        window = doc_ids[rec["index"] * size : (rec["index"] + 1) * size]
        ids = torch.tensor([[tiny_tokenizer.bos_token_id] + window])
        with torch.no_grad():
            logits = tiny_runner.model(ids).logits[0].double()
        # loss on every window token after the first (the first is the context)
        nll = float(torch.nn.functional.cross_entropy(logits[1:-1], ids[0, 2:], reduction="sum"))
        n = len(window) - 1
        assert rec["metadata"]["tokens"] == n
        assert rec["metadata"]["nll"] == pytest.approx(nll, rel=1e-6)
        assert rec["metadata"]["ppl"] == pytest.approx(math.exp(nll / n), rel=1e-6)
        assert rec["score"] == pytest.approx(1 / rec["metadata"]["ppl"]) and 0 < rec["score"] <= 1
        assert rec["metadata"]["document"] == 1  # the short document holds no window
    s = task.sample(length, 0, 42, tiny_tokenizer)
    assert s.num_tokens == length
    assert all_suites()["ppl"] == ["ppl"]


def test_ppl_limits_and_missing(ppl_doc, tiny_tokenizer, monkeypatch, tmp_path):
    with pytest.raises(UserError, match="windows of 4096 tokens"):
        get_task("ppl").sample(4096, 0, 42, tiny_tokenizer)
    # The loop asks when planning (before any model load); a direct call past the documents gives
    # no records instead of aborting a run whose other work is done.
    with pytest.raises(TaskUnavailable, match="no perplexity document has 4096 tokens"):
        get_task("ppl").num_samples_with_tokenizer(4096, tiny_tokenizer)
    assert get_task("ppl").num_samples_with_tokenizer(256, tiny_tokenizer) >= 2
    assert get_task("ppl").evaluate_with_runner(None, 4096, [0], 42, tiny_tokenizer) == []
    monkeypatch.setenv(ppl.ENV_VAR, str(tmp_path / "nope"))
    with pytest.raises(TaskUnavailable, match="HARNESS_PPL_DATA"):
        get_task("ppl").check_available()
