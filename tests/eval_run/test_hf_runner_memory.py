"""The transformers runner's memory rules (issue 16): generation one unpadded row at a time, token-budget
loglikelihood batches, no mask for one unpadded sequence, out-of-memory back-off, chunked
log-probabilities — and outputs unchanged by all of them.

References are independent of harness/models/runners/hf.py: a plain per-sample transformers generate loop
(one sequence, no padding) and a full-logits float32 log-softmax computed here.
"""

from __future__ import annotations

import pytest
import torch

from harness.core.errors import UserError
from harness.models.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings

PROMPTS = ["The grass is green. " * k + "The special number is" for k in (1, 7, 30, 3, 12, 2, 19, 45)]


def _runner(tiny_llama_dir, batch_size=8, **extra):
    from harness.models.runners.hf import HFRunner

    return HFRunner(
        str(tiny_llama_dir), RunnerSettings(backend="hf", batch_size=batch_size, dtype="float32", extra=extra)
    )


@pytest.fixture(scope="module")
def runner(tiny_llama_dir):
    r = _runner(tiny_llama_dir)
    yield r
    r.close()


def _plain_generate(model, tokenizer, prompt: str, max_new: int) -> str:
    """Reference: transformers generate on one sequence, no padding, as a user would call it."""
    ids = torch.tensor([tokenizer(prompt)["input_ids"]])
    with torch.no_grad():
        gen = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=max_new,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.eos_token_id,
        )
    toks = gen[0, ids.shape[1] :].tolist()
    if tokenizer.eos_token_id in toks:
        toks = toks[: toks.index(tokenizer.eos_token_id)]
    return tokenizer.decode(toks, skip_special_tokens=True)


def _reference_ll(model, tokenizer, runner, context: str, continuation: str) -> tuple[float, bool]:
    """Full [L, V] float32 log-softmax of one unpadded sequence."""
    ctx, cont = runner._encode_pair(context, continuation)
    with torch.no_grad():
        logits = model(torch.tensor([ctx + cont])).logits[0].float()
    lp = torch.log_softmax(logits, -1)[len(ctx) - 1 : len(ctx) + len(cont) - 1]
    target = torch.tensor(cont)
    return float(lp.gather(1, target[:, None]).sum()), bool((lp.argmax(-1) == target).all())


def test_generation_runs_one_row_per_prompt_and_matches_plain_generate(tiny_llama_dir, runner):
    reqs = [GenerationRequest(p, 8) for p in PROMPTS]
    got = runner.generate(reqs)
    assert got == [_plain_generate(runner.model, runner.tokenizer, q.prompt, 8) for q in reqs]
    runner.batch_log.clear()
    assert _runner(tiny_llama_dir, batch_size=1, max_batch_tokens=16).generate(reqs) == got
    r = _runner(tiny_llama_dir, max_batch_tokens=16)
    assert r.generate(reqs) == got and r.batch_log and all(rows == 1 for rows, _ in r.batch_log)
    r.close()


def test_loglikelihood_batches_are_sized_by_tokens(tiny_llama_dir, runner):
    reqs = [LoglikelihoodRequest(p, " blue sky") for p in PROMPTS]
    costs = sorted(sum(map(len, runner._encode_pair(q.context, q.continuation))) for q in reqs)
    budget = costs[-1] + costs[0]  # the longest alone; the shortest several together
    r = _runner(tiny_llama_dir, max_batch_tokens=budget)
    got = r.loglikelihood(reqs)
    expected = [_reference_ll(runner.model, runner.tokenizer, runner, q.context, q.continuation) for q in reqs]
    assert [g for _, g in got] == [g for _, g in expected]
    assert [v for v, _ in got] == pytest.approx([v for v, _ in expected], abs=1e-4)
    assert sum(rows for rows, _ in r.batch_log) == len(reqs)
    assert all(rows == 1 or rows * width <= budget for rows, width in r.batch_log)
    # Longest first: the batch shrinks as the length grows.
    by_width = sorted(r.batch_log, key=lambda b: b[1])
    assert by_width[0][0] > 1 and by_width[-1][0] == 1
    # The default budget keeps short requests in one --batch-size batch.
    runner.batch_log.clear()
    runner.loglikelihood(reqs)
    assert runner.batch_log == [(len(reqs), max(w for _, w in r.batch_log))]
    r.close()


def _masks(monkeypatch, name: str) -> list:
    """Record the attention_mask every call of attention implementation `name` receives."""
    from transformers import AttentionInterface

    seen: list = []
    original = AttentionInterface._global_mapping[name]

    def recording(module, query, key, value, attention_mask, **kwargs):
        seen.append(None if attention_mask is None else tuple(attention_mask.shape))
        return original(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setitem(AttentionInterface._global_mapping, name, recording)
    return seen


def test_no_mask_for_a_row_of_one(runner, monkeypatch):
    from harness.models.runners.prefix import ATTENTION

    seen = _masks(monkeypatch, "sdpa")
    engine = _masks(monkeypatch, ATTENTION)
    runner.generate([GenerationRequest(PROMPTS[4], 4), GenerationRequest(PROMPTS[0], 4)])
    assert engine and all(m is None for m in engine), engine
    runner.loglikelihood([LoglikelihoodRequest(PROMPTS[4], " blue sky")])
    assert seen and all(m is None for m in seen), seen
    # A padded batch does get a [rows, 1, L, L] mask: the check above can fail.
    seen.clear()
    runner.loglikelihood([LoglikelihoodRequest(PROMPTS[4], " blue"), LoglikelihoodRequest(PROMPTS[0], " blue")])
    assert any(m is not None and m[0] == 2 and m[1] == 1 for m in seen), seen


def _inject_oom(monkeypatch, model, max_rows: int) -> list[int]:
    """Make the model's forward raise torch.OutOfMemoryError for batches above max_rows."""
    calls: list[int] = []
    forward = model.forward
    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError

    def guarded(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        rows = ids.shape[0] if ids is not None else kwargs["inputs_embeds"].shape[0]
        calls.append(rows)
        if rows > max_rows:
            raise oom("CUDA out of memory. Tried to allocate 127.91 GiB (injected)")
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", guarded)
    return calls


def test_out_of_memory_halves_the_batch_and_keeps_outputs(tiny_llama_dir, runner, monkeypatch):
    lreqs = [LoglikelihoodRequest(p, " blue sky") for p in PROMPTS]
    expected_ll = runner.loglikelihood(lreqs)
    r = _runner(tiny_llama_dir)
    calls = _inject_oom(monkeypatch, r.model, max_rows=3)
    got = r.loglikelihood(lreqs)
    assert max(calls) == 8 and all(rows <= 3 for rows, _ in r.batch_log)
    assert sum(rows for rows, _ in r.batch_log) == len(lreqs)
    assert r.batch_tokens < 32768  # the budget came down for the batches after the failure
    assert [g for _, g in got] == [g for _, g in expected_ll]
    assert [v for v, _ in got] == pytest.approx([v for v, _ in expected_ll], abs=1e-4)
    r.close()


def test_one_sequence_that_does_not_fit_is_a_user_error(tiny_llama_dir, monkeypatch):
    r = _runner(tiny_llama_dir)
    _inject_oom(monkeypatch, r.model, max_rows=0)
    with pytest.raises(UserError, match="--max-model-len.*--dtype") as info:
        r.generate([GenerationRequest(PROMPTS[2], 4), GenerationRequest(PROMPTS[3], 4)])
    assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="does not fit"):
        r.loglikelihood([LoglikelihoodRequest(PROMPTS[2], " blue")])
    r.close()


def test_loglikelihood_in_chunks_matches_full_log_softmax(runner, monkeypatch):
    from harness.models.runners import hf

    long_cont = " and the sky is blue" * 6
    reqs = [
        LoglikelihoodRequest(PROMPTS[2], long_cont),
        LoglikelihoodRequest(PROMPTS[0], " zebra"),
        LoglikelihoodRequest(PROMPTS[5], long_cont),
    ]
    expected = [_reference_ll(runner.model, runner.tokenizer, runner, q.context, q.continuation) for q in reqs]
    vocab = runner.model.config.vocab_size
    monkeypatch.setattr(hf, "LOGPROB_CHUNK_BYTES", 4 * vocab * 5)  # 5 positions per chunk
    shapes: list = []
    original = torch.log_softmax

    def recording(x, *a, **k):
        shapes.append(tuple(x.shape))
        return original(x, *a, **k)

    monkeypatch.setattr(torch, "log_softmax", recording)
    got = runner.loglikelihood(reqs)
    assert [g for _, g in got] == [g for _, g in expected]
    assert [v for v, _ in got] == pytest.approx([v for v, _ in expected], abs=1e-4)
    # Only 2-D [≤5 positions, V] float32 blocks, never [rows, L, V].
    assert shapes and all(len(s) == 2 and s[0] <= 5 and s[1] == vocab for s in shapes), shapes


def test_bad_token_budget(tiny_llama_dir):
    with pytest.raises(UserError, match="max_batch_tokens"):
        _runner(tiny_llama_dir, max_batch_tokens=-5)
