"""The transformers runner against independent references: unbatched greedy decoding by hand."""

from __future__ import annotations

import pytest

from harness.models.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings

PROMPTS = ["The grass is green. " * k + "The special number is" for k in (1, 7, 30, 3, 12, 2, 19)]


@pytest.fixture(scope="module")
def runner(tiny_llama_dir):
    from harness.models.runners.registry import get_runner

    r = get_runner("hf", str(tiny_llama_dir), RunnerSettings(backend="hf", batch_size=3, dtype="float32"))
    yield r
    r.close()


def _greedy_by_hand(runner, prompt, max_new):
    """Reference: one sequence, full forward pass per step, argmax; no generate(), no cache, no padding."""
    import torch

    ids = runner.tokenizer(prompt)["input_ids"]
    new, steps = [], []
    for _ in range(max_new):
        with torch.no_grad():
            logits = runner.model(torch.tensor([ids + new])).logits[0, -1].float()
        tok = int(logits.argmax())
        steps.append(torch.log_softmax(logits, -1))
        if tok == runner.tokenizer.eos_token_id:
            break
        new.append(tok)
    return new, steps


def test_batched_generation_equals_unbatched_greedy(runner):
    reqs = [GenerationRequest(p, 10 if i % 2 else 6) for i, p in enumerate(PROMPTS)]
    batched = runner.generate(reqs)  # batches of 3 mixing lengths, sorted and restored
    for req, got in zip(reqs, batched):
        toks, _ = _greedy_by_hand(runner, req.prompt, req.max_new_tokens)
        assert got == runner.tokenizer.decode(toks, skip_special_tokens=True)
    assert batched == [runner.generate([r])[0] for r in reqs]


def test_stop_strings_cut_the_continuation(runner):
    full = runner.generate([GenerationRequest(PROMPTS[1], 12)])[0]
    assert len(full.strip()) > 2
    stop = full.strip()[1]
    cut = runner.generate([GenerationRequest(PROMPTS[1], 12, stop=(stop,))])[0]
    assert cut == full[: full.index(stop)]


def test_loglikelihood_matches_manual_sum_and_greedy_flag(runner):
    toks, steps = _greedy_by_hand(runner, PROMPTS[2], 5)
    greedy_text = runner.tokenizer.decode(toks)
    cont_ids = runner.tokenizer(PROMPTS[2] + greedy_text)["input_ids"][len(runner.tokenizer(PROMPTS[2])["input_ids"]) :]
    assert cont_ids == toks  # the split re-tokenizes to the same ids, so the reference applies
    expected = sum(float(steps[i][t]) for i, t in enumerate(toks))
    other = " zebra"
    (lp, greedy), (lp2, greedy2) = runner.loglikelihood(
        [LoglikelihoodRequest(PROMPTS[2], greedy_text), LoglikelihoodRequest(PROMPTS[2], other)]
    )
    assert lp == pytest.approx(expected, abs=1e-4)
    assert greedy is True
    assert greedy2 is False and lp2 < 0
    # Batched (right-padded, sorted) equals one at a time.
    many = [LoglikelihoodRequest(p, " blue sky") for p in PROMPTS]
    batched, single = runner.loglikelihood(many), [runner.loglikelihood([m])[0] for m in many]
    assert [g for _, g in batched] == [g for _, g in single]
    assert [v for v, _ in batched] == pytest.approx([v for v, _ in single], abs=1e-4)


def test_context_and_rope_overrides(tiny_llama_dir):
    from harness.core.errors import UserError
    from harness.models.runners.registry import get_runner

    r = get_runner(
        "hf",
        str(tiny_llama_dir),
        RunnerSettings(backend="hf", max_model_len=64, rope_theta=5e5, rope_scaling={"type": "linear", "factor": 2.0}),
    )
    assert r.max_model_len == 64
    params = r.model.config.rope_parameters
    assert params["rope_theta"] == 5e5 and params["rope_type"] == "linear" and params["factor"] == 2.0
    with pytest.raises(UserError, match="exceeds the context 64"):
        r.generate([GenerationRequest(PROMPTS[2], 16)])  # never silently truncated
    r.close()
    default = get_runner("hf", str(tiny_llama_dir), RunnerSettings(backend="hf"))
    assert default.max_model_len == 8192  # the config's max_position_embeddings
    default.close()


def test_unknown_backend_and_missing_vllm(tiny_llama_dir, monkeypatch):
    from harness.core.errors import MissingExtra, UserError
    from harness.models.runners import registry

    with pytest.raises(UserError, match="unknown backend"):
        registry.get_runner("tgi", str(tiny_llama_dir), RunnerSettings(backend="tgi"))
    monkeypatch.setattr(registry, "backend_available", lambda name: name != "vllm")
    with pytest.raises(MissingExtra, match="setup_vllm_env.sh"):
        registry.get_runner("vllm", str(tiny_llama_dir), RunnerSettings(backend="vllm"))
