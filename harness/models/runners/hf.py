"""The transformers runner: greedy generation with shared prefixes computed once, decoding 8 rows at a time.

    from harness.models.runners.registry import get_runner
    from harness.models.runners.base import RunnerSettings, GenerationRequest
    runner = get_runner("hf", "runs/anchor/ckpt-2000", RunnerSettings(backend="hf", dtype="bfloat16"))
    runner.generate([GenerationRequest("The sky is", max_new_tokens=8)])
    for i, text, seconds in runner.generate_each(requests): ...   # as each request finishes

Generation runs on harness/models/runners/prefix.py's engine: each prompt is prefilled alone, unpadded, on
a fixed grid, in lexicographic token order, and the KV cache of every grid chunk two neighbouring
prompts share is computed once (`prefix_reuse`, on by default); then prompts decode DECODE_ROWS at
a time at a fixed width, all rows in one attention call per layer (DECODE_ATTENTION;
harness/models/runners/decode.py). A prompt's output depends on nothing but the prompt, that width and
that kernel (both record settings): not on --batch-size, the other requests of the call (their
lengths included), their order, or reuse on/off (bit-identical logits in every dtype;
tests/eval_run/test_prefix_reuse.py, tests/eval_run/test_decode_rows.py). Measured on CPU, one
unpadded row is the fastest prefill shape for long prompts (batch 8 with left padding took 1.5x the
time of batch 1 at 4K and changed 5 of 25 bf16 predictions), and 8 decoding rows the fastest decode
(benchmarks/decode_width.py). Architectures the engine refuses (sliding-window or linear-attention
layers) run transformers generate one unpadded row at a time.
Generation stops at any EOS id of the model (tokenizer, config and generation config, as transformers'
generate and vLLM stop; several ids are in the records' identity as `eos_ids`), and at a request's
`stop_tokens` ids, none of them choosable in its first `min_new_tokens` steps (LongBench pred.py's
samsum); stop strings cut the decoded text afterwards, which gives the same text as stopping early.
A sequence that does not fit in memory stops with a UserError naming the flags that help.

Loglikelihood runs right-padded batches: at most --batch-size rows and at most `max_batch_tokens`
(settings.extra, default DEFAULT_BATCH_TOKENS) padded tokens, so the batch shrinks as length grows
(transformers' SDPA path builds a [rows, 1, L, L] mask for a padded batch). A batch of one unpadded
sequence runs with no mask. On CUDA out-of-memory the batch is halved and retried, and the token
budget halved for the batches after it. It keeps only the logits of the scored positions
(`logits_to_keep`) and takes their log-softmax in float32 in chunks of positions, never a
[rows, L, vocab] float32 tensor.
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Iterator
from typing import cast

from harness.core.errors import UserError
from harness.core.pickled import refused_load
from harness.models.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings
from harness.models.runners.common import (
    DECODE_ATTENTION,
    DECODE_ROWS,
    check_tokenizer_present,
    context_length,
    cpu_threads_hint,
    cut_at_stop,
    encode_pair,
    prompts_ids,
    rope_override_dict,
    stop_token_ids,
    text_stop_ids,
)
from harness.models.runners.registry import register_runner
from harness.models.sources import load_target

# Padded tokens per batch (rows × (prompt width + new tokens)): 8 rows at 4K, 1 row from 32K up.
DEFAULT_BATCH_TOKENS = 32768
# float32 log-softmax working set per chunk of positions.
LOGPROB_CHUNK_BYTES = 1 << 28

_DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float32": "float32",
    "fp32": "float32",
}


def _torch_dtype(name: str, config):
    """--dtype as a torch dtype; "auto": the checkpoint's own, fp32 when it does not say."""
    import torch

    if name == "auto":
        dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
        return getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if name in _DTYPES:
        return getattr(torch, _DTYPES[name])
    raise UserError(f"unknown --dtype {name!r}: choose auto, bfloat16, float16 or float32")


@register_runner(
    "hf",
    help="transformers in this process (default)",
    record_settings={"decode_rows": DECODE_ROWS, "decode_attention": DECODE_ATTENTION},
)
class HFRunner:
    """transformers AutoModelForCausalLM behind the Runner interface (harness/models/runners/base.py)."""

    submit_all = False  # one --batch-size batch per call: each finished batch is stored at once

    def __init__(self, model_path: str, settings: RunnerSettings, device: str | None = None):
        import torch

        from harness.models.runners.common import keeps_logits
        from harness.models.runners.prefix import PrefixEngine, chunk_for

        cpu_threads_hint()
        check_tokenizer_present(model_path)
        self.settings = settings
        self.model_path = model_path
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.max_model_len = context_length(model_path, settings.max_model_len)
        # a folder or hub name as it is; a GGUF file as its folder + gguf_file (harness/models/sources/)
        target = load_target(model_path)
        config = self._load_config(target)
        self.dtype = _torch_dtype(settings.dtype, config)
        self.model = self._load_model(target, config)
        self.model.eval()
        tok = self.tokenizer
        # Generation ends at any of these, as transformers' generate and vLLM end it (common.stop_token_ids);
        # eos_id is the one an empty loglikelihood context is conditioned on.
        generation_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        self.stop_ids = stop_token_ids(tok.eos_token_id, getattr(config, "eos_token_id", None), generation_eos)
        self.eos_id = tok.eos_token_id if tok.eos_token_id is not None else next(iter(self.stop_ids), None)
        # Padding never reaches the model's output (masked, and left of every prompt); any id works.
        self.pad_id = next(i for i in (tok.pad_token_id, self.eos_id, 0) if i is not None)
        self.max_rows = max(1, settings.batch_size)
        self.batch_tokens = int(settings.extra.get("max_batch_tokens") or DEFAULT_BATCH_TOKENS)
        if self.batch_tokens < 1:
            raise UserError(f"max_batch_tokens {self.batch_tokens}: pass a positive number of tokens")
        # (rows, padded width incl. new tokens) of every batch run, for benchmarks and logs.
        self.batch_log: list[tuple[int, int]] = []
        self._keeps_logits = keeps_logits(self.model)
        # Generation: one prompt at a time on a fixed prefill grid, shared prefixes computed once.
        self.prefix_reuse = settings.prefix_reuse
        self.unsupported = PrefixEngine.unsupported_reason(self.model)
        self.engine = None
        if not self.unsupported:
            chunk = chunk_for(self.device)
            self.engine = PrefixEngine(self.model, self.stop_ids, chunk, reuse=settings.prefix_reuse, rows=DECODE_ROWS)
        self.sample_stats: dict[int, dict] = {}  # request index -> tokens facts of the last generate call

    def _load_config(self, target):
        """The tokenizer (kept as self.tokenizer) and the model's config with the rope flags applied."""
        from transformers import AutoConfig, AutoTokenizer

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(target.tokenizer, **target.tokenizer_kwargs)
            config = AutoConfig.from_pretrained(target.model, **target.kwargs)
        except KeyError as exc:  # transformers' config validation (a rope_scaling missing its keys)
            from harness.models.tokenization import config_error

            raise UserError(config_error(self.model_path, exc)) from None
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(
                f"{self.model_path} is not a loadable model ({first}): pass a save_pretrained directory or hub name"
            ) from None
        for key, value in rope_override_dict(config, self.settings.rope_theta, self.settings.rope_scaling).items():
            setattr(config, key, value)
        return config

    def _load_model(self, target, config):
        """The weights in self.dtype with SDPA attention, on self.device (or spread by device_map)."""
        from safetensors import SafetensorError
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the eval loop shows its own bar per checkpoint
        try:
            device_map = self.settings.extra.get("device_map")  # "auto": the layers spread over the visible GPUs
            model = AutoModelForCausalLM.from_pretrained(
                target.model,
                config=config,
                dtype=self.dtype,
                attn_implementation="sdpa",
                device_map=device_map,
                **target.kwargs,
            )
            if device_map is None:
                model = model.to(self.device)
            return model
        except pickle.UnpicklingError as exc:  # a .bin that torch.load(weights_only=True) refuses
            raise refused_load(self.model_path, exc) from None
        except (SafetensorError, OSError) as exc:  # random bytes or a truncated weights file
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(
                f"cannot load the weights of {self.model_path} ({first}): the weights file is damaged or incomplete; "
                "re-save the checkpoint or leave it out of --ckpts"
            ) from None
        finally:
            hf_logging.enable_progress_bar()

    # -- batching ----------------------------------------------------------------------------
    def _batches(self, order: list[int], cost: list[int]):
        """Consecutive runs of `order` with at most max_rows rows and rows × max cost <= batch_tokens.

        Read lazily: a budget lowered by an out-of-memory error applies to the batches after it.
        """
        start = 0
        while start < len(order):
            widest = cost[order[start]]
            end = start + 1
            while end < len(order) and end - start < self.max_rows:
                w = max(widest, cost[order[end]])
                if (end - start + 1) * w > self.batch_tokens:
                    break
                widest, end = w, end + 1
            yield order[start:end]
            start = end

    def _run_batch(self, idx: list[int], width: int, step) -> None:
        """step(idx) with out-of-memory back-off: halve the batch (and the budget) until it fits."""
        import torch

        oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
        failed = False
        try:
            step(idx)
            self.batch_log.append((len(idx), width))
        except oom:
            failed = True  # retried outside the except block, so the traceback's tensors are freed
        if not failed:
            return
        import gc

        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        if len(idx) == 1:
            raise UserError(
                f"one sequence of {width} tokens does not fit in {self.device} memory: pass a smaller "
                "--max-model-len, --dtype bfloat16 (if float32), or shorter lengths"
            )
        self.batch_tokens = max(1, min(self.batch_tokens, len(idx) * width) // 2)
        half = len(idx) // 2
        for part in (idx[:half], idx[half:]):
            self._run_batch(part, width, step)

    # -- generation --------------------------------------------------------------------------
    def generate(self, requests: list[GenerationRequest]) -> list[str]:
        out: list[str | None] = [None] * len(requests)
        for i, text, _ in self.generate_each(requests):
            out[i] = text
        return out  # type: ignore[return-value]

    def generate_each(self, requests: list[GenerationRequest]) -> Iterator[tuple[int, str, float]]:
        """(request index, text, seconds) per request as each finishes (see
        harness/models/runners/prefix.py); `seconds` is the request's own compute, shared prefixes split
        among their users. Per-request facts (prompt tokens, reused tokens) go to `self.sample_stats`."""
        # 4 bytes per token (a list holds a 28-byte int object per token): a call may carry every
        # sample of a (task, length), 500 prompts of 128K tokens.
        encoded = [array("i", ids) for ids in prompts_ids(self.tokenizer, [r.prompt for r in requests])]
        for r, ids in zip(requests, encoded):
            if len(ids) + r.max_new_tokens > self.max_model_len:
                raise UserError(
                    f"a prompt of {len(ids)} tokens + {r.max_new_tokens} to generate exceeds the context "
                    f"{self.max_model_len}: pass --max-model-len (with --rope-scaling/--rope-theta) or shorter lengths"
                )
        self.sample_stats = {}
        # Per-request token stops (GenerationRequest.stop_tokens), on top of the model's EOS ids.
        extra = [text_stop_ids(self.tokenizer, r.stop_tokens) for r in requests]
        if self.engine is None:
            yield from self._generate_plain(requests, encoded, extra)
            return
        runs = self.engine.run(
            encoded, [r.max_new_tokens for r in requests], extra, [r.min_new_tokens for r in requests]
        )
        while (done := self._oom_guard(lambda: next(runs, None), encoded)) is not None:
            r = requests[done.index]
            self.sample_stats[done.index] = {
                "prompt_tokens": done.prompt_tokens,
                "reused_tokens": done.reused_tokens,
                "new_tokens": len(done.tokens),
                "prefill_seconds": round(done.prefill_seconds, 6),
                "grid": self.engine.chunk,
            }
            self.batch_log.append((1, done.prompt_tokens + r.max_new_tokens))
            yield done.index, self._decode(done.tokens, r, extra[done.index]), done.seconds

    def _decode(self, toks: list[int], r: GenerationRequest, extra: frozenset[int] = frozenset()) -> str:
        """The text of toks up to the first stop id (the model's EOS ids or the request's `extra`)."""
        toks = toks[: r.max_new_tokens]
        end = next((k for k, t in enumerate(toks) if t in self.stop_ids or t in extra), None)
        if end is not None:
            toks = toks[:end]
        text = cast(str, self.tokenizer.decode(toks, skip_special_tokens=True))  # one sequence: one str
        return cut_at_stop(text, r.stop)

    def _oom_guard(self, step, encoded):
        """step() with an out-of-memory error turned into a UserError (one row is the least there is)."""
        import torch

        oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
        try:
            return step()
        except oom:
            pass
        import gc

        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        raise UserError(
            f"one sequence of up to {max(map(len, encoded))} tokens does not fit in {self.device} memory: pass a "
            "smaller --max-model-len, --dtype bfloat16 (if float32), or shorter lengths"
        )

    def _generate_plain(self, requests, encoded, extra=None) -> Iterator[tuple[int, str, float]]:
        """Architectures the prefix engine refuses: transformers generate, one unpadded row per request
        (no padding, so the output never depends on the other requests). extra[i]: request i's token
        stops besides the model's EOS ids."""
        import time

        import torch

        for i in range(len(requests)):
            r, t0 = requests[i], time.perf_counter()
            if r.max_new_tokens <= 0 or not encoded[i]:  # nothing to generate, or to condition on (as the engine)
                self.sample_stats[i] = {"prompt_tokens": len(encoded[i]), "reused_tokens": 0, "new_tokens": 0}
                yield i, "", 0.0
                continue
            ids = torch.tensor([list(encoded[i])], dtype=torch.long, device=self.device)
            stops = sorted(set(self.stop_ids) | (extra[i] if extra else frozenset()))
            # min_new_tokens masks every id of eos_token_id for that many steps (transformers'
            # MinNewTokensLengthLogitsProcessor); passed only when set, so other calls stay as they were.
            floor = {"min_new_tokens": r.min_new_tokens} if r.min_new_tokens > 0 and stops else {}

            def step(ids=ids, max_new=r.max_new_tokens, stops=stops, floor=floor):
                with torch.inference_mode():
                    return self.model.generate(
                        input_ids=ids,
                        attention_mask=torch.ones_like(ids),
                        do_sample=False,
                        max_new_tokens=max_new,
                        eos_token_id=stops or None,
                        pad_token_id=self.pad_id,
                        temperature=None,
                        top_p=None,
                        top_k=None,
                        **floor,
                    )

            gen = self._oom_guard(step, [encoded[i]])
            toks = gen[0, ids.shape[1] :].tolist()
            self.sample_stats[i] = {"prompt_tokens": len(encoded[i]), "reused_tokens": 0, "new_tokens": len(toks)}
            self.batch_log.append((1, len(encoded[i]) + r.max_new_tokens))
            yield i, self._decode(toks, r, extra[i] if extra else frozenset()), time.perf_counter() - t0

    # -- loglikelihood -----------------------------------------------------------------------
    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        return encode_pair(self.tokenizer, self.eos_id, context, continuation)

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
        cost = [len(c) + len(t) for c, t in pairs]

        def step(idx: list[int]) -> None:
            seqs = [pairs[i][0] + pairs[i][1] for i in idx]
            width = max(len(s) for s in seqs)
            # Right padding: causal attention means pads after a sequence never affect it.
            input_ids = torch.full((len(idx), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, s in enumerate(seqs):
                input_ids[row, : len(s)] = torch.tensor(s)
                mask[row, : len(s)] = 1
            # Logits only where a continuation token is predicted (the union over rows).
            spans = [range(len(pairs[i][0]) - 1, len(seqs[r]) - 1) for r, i in enumerate(idx)]
            keep = sorted(set().union(*spans))
            kwargs: dict = {}
            if self._keeps_logits:
                kwargs["logits_to_keep"] = torch.tensor(keep, dtype=torch.long, device=self.device)
                column = {p: c for c, p in enumerate(keep)}
            else:
                column = {p: p for p in keep}
            # One unpadded sequence needs no mask at all (the causal kernel alone).
            padded = any(len(s) < width for s in seqs)
            with torch.inference_mode():
                logits = self.model(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device) if padded else None,
                    **kwargs,
                ).logits
                for row, i in enumerate(idx):
                    cols = torch.tensor([column[p] for p in spans[row]], dtype=torch.long, device=logits.device)
                    out[i] = _score(
                        logits[row], cols, torch.tensor(pairs[i][1], dtype=torch.long, device=logits.device)
                    )

        for idx in self._batches(order, cost):
            self._run_batch(idx, max(cost[i] for i in idx), step)
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


def _score(logits_KV, cols, target) -> tuple[float, bool]:
    """(Σ log p(target), all targets greedy) from the rows `cols` of logits, in float32 chunks of rows."""
    import torch

    chunk = max(1, LOGPROB_CHUNK_BYTES // (4 * logits_KV.shape[-1]))
    total = torch.zeros((), dtype=torch.float64, device=logits_KV.device)
    greedy = True
    for c0 in range(0, len(cols), chunk):
        part = logits_KV[cols[c0 : c0 + chunk]].float()  # [chunk, V] float32
        tgt = target[c0 : c0 + chunk]
        total += torch.log_softmax(part, dim=-1).gather(1, tgt[:, None]).sum().double()
        greedy = greedy and bool((part.argmax(dim=-1) == tgt).all())
    return float(total), greedy
