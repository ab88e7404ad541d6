"""A model served behind an OpenAI-compatible API: `--backend openai --base-url URL --model NAME`.

The model is asked for at planning (GET /models: its id, root and context); prompts are built and
counted with the local tokenizer (--tokenizer, default --model). Its records are keyed by
"openai:" + sha256(model id, model root, tokenizer fingerprint)[:16] (not the URL: resume works
across server restarts and moves) and carry settings.endpoint = {"model", "root"}. The server
decides dtype, rope, parallelism and batching, so those flags are refused here and the records'
batch_size is null; results.json names the endpoint (provenance.endpoint) and run.model is the
root the server reports.
"""

from __future__ import annotations

import hashlib
from typing import Any

from harness.core.errors import UserError
from harness.models.checkpoints import Checkpoint
from harness.models.sources.base import ModelSource, register_kind


def _endpoint(cfg: Any):
    from harness.models.runners.endpoint import Endpoint, api_key_from_env

    return Endpoint(
        cfg.base_url or "", api_key_from_env(cfg.api_key_env), timeout=cfg.request_timeout, retries=cfg.retries
    )


def _check_flags(cfg: Any) -> None:
    if cfg.data_parallel > 1 or cfg.ray_address:
        raise UserError(
            "--backend openai runs one served model: drop --data-parallel/--ray-address (use --concurrency)"
        )
    server_side = [
        flag
        for flag, value in (
            ("--dtype", cfg.dtype != "auto"),
            ("--rope-theta", cfg.rope_theta is not None),
            ("--rope-scaling", cfg.rope_scaling is not None),
            ("--tensor-parallel-size", cfg.tensor_parallel_size != 1),
        )
        if value
    ]
    if server_side:
        raise UserError(
            f"{', '.join(server_side)} cannot change a served model: set it where the server is started "
            "(e.g. vllm serve --dtype ...) and drop it here"
        )
    if not cfg.model:
        raise UserError("--backend openai needs --model NAME (the name the server serves the model under)")
    if not cfg.base_url:
        raise UserError("--backend openai needs --base-url URL (e.g. http://127.0.0.1:8000/v1)")
    if cfg.ckpts:
        raise UserError("--backend openai evaluates --model at --base-url: drop --ckpts")


@register_kind
class ServedSource(ModelSource):
    kind = "openai"
    priority = 0
    context_fix = "drop that length from --lengths, or serve the model with a longer --max-model-len"

    def __init__(self, checkpoint: Checkpoint, cfg: Any, context: int, endpoint: dict, tokenizer):
        super().__init__(checkpoint)
        self._cfg, self._context, self._endpoint, self._tokenizer = cfg, context, endpoint, tokenizer

    @classmethod
    def from_config(cls, cfg: Any) -> list[ModelSource] | None:
        from harness.models.runners.registry import is_local

        if is_local(cfg.backend):
            given = [
                f
                for f, v in (("--model", cfg.model), ("--base-url", cfg.base_url), ("--tokenizer", cfg.tokenizer))
                if v
            ]
            if given:
                raise UserError(
                    f"{', '.join(given)} are for served models (--backend openai); "
                    "local checkpoints are given with --ckpts and use their own tokenizer"
                )
            return None
        _check_flags(cfg)
        ep = _endpoint(cfg)
        info = ep.describe(cfg.model)  # unreachable / unknown model: before anything else
        served = info["max_model_len"]
        if cfg.max_model_len and served and cfg.max_model_len > served:
            raise UserError(
                f"--max-model-len {cfg.max_model_len} is beyond the served context of {cfg.model!r} ({served} tokens): "
                "restart the server with a longer --max-model-len, or lower the flag"
            )
        ctx = cfg.max_model_len or served
        if not ctx:
            raise UserError(f"{ep.base}/models does not report the context of {cfg.model!r}: pass --max-model-len N")
        endpoint = {"base_url": ep.base, "model": info["id"], "root": info["root"], "served_max_model_len": served}
        from harness.models.sources.base import model_tokenizer
        from harness.models.tokenization import tokenizer_fingerprint

        tokenizer = model_tokenizer(cfg.tokenizer or cfg.model)
        tok_fp = tokenizer_fingerprint(tokenizer)
        ident = hashlib.sha256(f"{endpoint['model']}\0{endpoint['root']}\0{tok_fp}".encode()).hexdigest()[:16]
        ck = Checkpoint(
            path=cfg.model,
            step=None,
            fingerprint=f"openai:{ident}",
            training=None,
            local=False,
            kind=cls.kind,
            model=endpoint["root"],
        )
        return [cls(ck, cfg, int(ctx), endpoint, tokenizer)]

    def tokenizer_id(self) -> tuple[str, str | None] | None:
        return None  # one served model per run

    def load_tokenizer(self, light: bool = False):
        return self._tokenizer

    @property
    def local_model(self) -> str:
        """The local folder or hub name this run reads the served model's tokenizer from (--tokenizer,
        default --model): where its config.json can be read on this machine (harness doctor)."""
        return self._cfg.tokenizer or self._cfg.model

    def context_length(self, max_model_len: int | None) -> int:
        return self._context

    def runner_settings(self, cfg: Any, context: int) -> dict:
        return {
            # each stored batch holds at least one request per connection
            "batch_size": max(cfg.batch_size, cfg.concurrency),
            "max_model_len": context,
            "endpoint": {
                "base_url": cfg.base_url,
                "api_key_env": cfg.api_key_env,
                "concurrency": cfg.concurrency,
                "timeout": cfg.request_timeout,
                "retries": cfg.retries,
            },
            "tokenizer": cfg.tokenizer or cfg.model,
        }

    def record_settings(self, cfg: Any) -> dict:
        # the server batches requests itself: --batch-size only sizes our store appends
        return {"batch_size": None, "endpoint": {"model": self._endpoint["model"], "root": self._endpoint["root"]}}

    def provenance(self) -> dict:
        return {"endpoint": dict(self._endpoint)}

    def filter_tasks(self, tasks: list, unavailable: dict, tokenizer) -> list:
        """Without prompt log-probs the server cannot run loglikelihood/perplexity tasks: they are
        unavailable (listed with the reason, never scored); the others run."""
        if all(t.kind == "generate" for t in tasks):
            return tasks
        from harness.models.runners.common import prompt_ids
        from harness.models.runners.openai import prompt_logprobs_missing

        reason = prompt_logprobs_missing(
            _endpoint(self._cfg), self._cfg.model or "", prompt_ids(tokenizer, "The sky is blue.")
        )
        if reason is None:
            return tasks
        for t in tasks:
            if t.kind != "generate":
                unavailable[t.name] = reason
        return [t for t in tasks if t.kind == "generate"]
