"""The transformers runner: batched greedy generation with left padding, SDPA attention.

    from harness.runners.registry import get_runner
    from harness.runners.base import RunnerSettings, GenerationRequest
    runner = get_runner("hf", "runs/anchor/ckpt-2000", RunnerSettings(backend="hf", dtype="bfloat16"))
    runner.generate([GenerationRequest("The sky is", max_new_tokens=8)])

Prompts are sorted by length before batching (less padding) and results restored to request
order. Left padding with the attention mask keeps every row's positions and greedy tokens equal
to unbatched generation (tests/eval_run/test_hf_runner.py checks it). Generation stops at EOS;
stop strings cut the decoded text afterwards, which gives the same text as stopping early.
"""

from __future__ import annotations

from typing import cast

from harness.errors import UserError
from harness.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings
from harness.runners.common import (
    check_tokenizer_present,
    context_length,
    cpu_threads_hint,
    cut_at_stop,
    prompt_ids,
    rope_override_dict,
)

_DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float32": "float32",
    "fp32": "float32",
}


class HFRunner:
    """transformers AutoModelForCausalLM behind the Runner interface (harness/runners/base.py)."""

    def __init__(self, model_path: str, settings: RunnerSettings, device: str | None = None):
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        cpu_threads_hint()
        check_tokenizer_present(model_path)
        self.settings = settings
        self.model_path = model_path
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.max_model_len = context_length(model_path, settings.max_model_len)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path)
            config = AutoConfig.from_pretrained(model_path)
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(
                f"{model_path} is not a loadable model ({first}): pass a save_pretrained directory or hub name"
            ) from None
        for key, value in rope_override_dict(config, settings.rope_theta, settings.rope_scaling).items():
            setattr(config, key, value)
        if settings.dtype == "auto":
            # The checkpoint's own dtype; fp32 when it does not say.
            dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
            dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        elif settings.dtype in _DTYPES:
            dtype = getattr(torch, _DTYPES[settings.dtype])
        else:
            raise UserError(f"unknown --dtype {settings.dtype!r}: choose auto, bfloat16, float16 or float32")
        self.dtype = dtype
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the eval loop shows its own bar per checkpoint
        try:
            self.model = AutoModelForCausalLM.from_pretrained(
                model_path, config=config, dtype=dtype, attn_implementation="sdpa"
            ).to(self.device)  # type: ignore[arg-type]  # functools.wraps on .to hides the bound self
        finally:
            hf_logging.enable_progress_bar()
        self.model.eval()
        tok = self.tokenizer
        self.eos_id = tok.eos_token_id if tok.eos_token_id is not None else config.eos_token_id
        # Padding never reaches the model's output (masked, and left of every prompt); any id works.
        self.pad_id = next(i for i in (tok.pad_token_id, self.eos_id, 0) if i is not None)

    # -- generation --------------------------------------------------------------------------
    def generate(self, requests: list[GenerationRequest]) -> list[str]:
        import torch

        encoded = [prompt_ids(self.tokenizer, r.prompt) for r in requests]
        for r, ids in zip(requests, encoded):
            if len(ids) + r.max_new_tokens > self.max_model_len:
                raise UserError(
                    f"a prompt of {len(ids)} tokens + {r.max_new_tokens} to generate exceeds the context "
                    f"{self.max_model_len}: pass --max-model-len (with --rope-scaling/--rope-theta) or shorter lengths"
                )
        # Longest first: equal max_new_tokens batched together, little padding inside a batch.
        order = sorted(range(len(requests)), key=lambda i: (requests[i].max_new_tokens, -len(encoded[i])))
        out: list[str | None] = [None] * len(requests)
        bs = max(1, self.settings.batch_size)
        for start in range(0, len(order), bs):
            idx = order[start : start + bs]
            max_new = max(requests[i].max_new_tokens for i in idx)
            width = max(len(encoded[i]) for i in idx)
            input_ids = torch.full((len(idx), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                ids = encoded[i]
                input_ids[row, width - len(ids) :] = torch.tensor(ids)
                mask[row, width - len(ids) :] = 1
            with torch.inference_mode():
                gen = self.model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    do_sample=False,
                    max_new_tokens=max_new,
                    eos_token_id=self.eos_id,
                    pad_token_id=self.pad_id,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                )
            new = gen[:, width:].tolist()
            for row, i in enumerate(idx):
                toks = new[row][: requests[i].max_new_tokens]
                if self.eos_id in toks:
                    toks = toks[: toks.index(self.eos_id)]
                text = cast(str, self.tokenizer.decode(toks, skip_special_tokens=True))  # one sequence: one str
                out[i] = cut_at_stop(text, requests[i].stop)
        return out  # type: ignore[return-value]

    # -- loglikelihood -----------------------------------------------------------------------
    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        # Trailing spaces of the context belong to the continuation (tokenizers attach them to
        # the next word); encode the whole and split, as lm-eval does, so merges stay natural.
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        whole = prompt_ids(self.tokenizer, context + continuation)
        ctx = prompt_ids(self.tokenizer, context)
        if not ctx:  # no BOS and empty context: condition on EOS, as lm-eval does
            return [self.eos_id], whole
        return ctx, whole[len(ctx) :]

    def loglikelihood(self, requests: list[LoglikelihoodRequest]) -> list[tuple[float, bool]]:
        import torch

        pairs = [self._encode_pair(r.context, r.continuation) for r in requests]
        for ctx, cont in pairs:
            if len(ctx) + len(cont) > self.max_model_len:
                raise UserError(
                    f"a loglikelihood request of {len(ctx) + len(cont)} tokens exceeds the context {self.max_model_len}: "
                    "pass --max-model-len or shorter inputs"
                )
        order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))
        out: list[tuple[float, bool] | None] = [None] * len(pairs)
        bs = max(1, self.settings.batch_size)
        for start in range(0, len(order), bs):
            idx = order[start : start + bs]
            seqs = [pairs[i][0] + pairs[i][1] for i in idx]
            width = max(len(s) for s in seqs)
            # Right padding: causal attention means pads after a sequence never affect it.
            input_ids = torch.full((len(idx), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, s in enumerate(seqs):
                input_ids[row, : len(s)] = torch.tensor(s)
                mask[row, : len(s)] = 1
            with torch.inference_mode():
                logits = self.model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).logits
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            for row, i in enumerate(idx):
                ctx, cont = pairs[i]
                pos = torch.arange(len(ctx) - 1, len(ctx) + len(cont) - 1)
                target = torch.tensor(cont)
                lp = logprobs[row, pos.to(logprobs.device)].cpu()
                total = float(lp.gather(1, target[:, None]).sum())
                greedy = bool((lp.argmax(dim=-1) == target).all())
                out[i] = (total, greedy)
        return out  # type: ignore[return-value]

    def close(self) -> None:
        import gc

        del self.model
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass
