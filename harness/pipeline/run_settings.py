"""The settings each checkpoint of a plan runs under (RunnerSettings) and is recorded under.

    from harness.pipeline.run_settings import checkpoint_settings
    runner, record = checkpoint_settings(cfg, sources, options, tokenizer, tok_fp, chat_hash, contexts)
    runner[fp]    # RunnerSettings: what the runner of checkpoint `fp` is built with
    record[fp]    # the settings every record of `fp` carries (part of its identity)

The record settings are what a re-run compares: a record whose settings' identity
(harness/core/identity.py) differs from the command's is not one of its records, so a changed
flag never resumes into results computed without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.models.runners.base import RunnerSettings
from harness.models.runners.common import model_stop_ids
from harness.models.runners.registry import backend_record_settings

if TYPE_CHECKING:
    from harness.pipeline.eval_config import EvalConfig
    from harness.pipeline.reasoning import Options


def checkpoint_settings(
    cfg: EvalConfig, sources: list, options: Options, tokenizer, tok_fp: str, chat_hash: str | None, contexts: dict
) -> tuple[dict[str, RunnerSettings], dict[str, dict]]:
    """(runner settings, record settings) of every model source, by checkpoint fingerprint."""
    from harness.models.sources.base import vanished

    runner_settings: dict[str, RunnerSettings] = {}
    record_settings: dict[str, dict] = {}
    for src in sources:
        fp = src.checkpoint.fingerprint
        runner_settings[fp] = _runner_settings(cfg, src, contexts[fp])
        own = src.record_settings(cfg)
        # (a folder deleted meanwhile would read as a hub name; its job is skipped when it runs)
        local = cfg.backend == "hf" and not vanished(src)
        eos_ids = model_stop_ids(src.checkpoint.path, tokenizer.eos_token_id) if local else None
        if eos_ids is not None:  # the ids its generation stops at, where they are more than one
            own = {"eos_ids": eos_ids, **own}
        record_settings[fp] = _record_settings(cfg, options, tok_fp, chat_hash, contexts[fp], own)
    return runner_settings, record_settings


def _runner_settings(cfg: EvalConfig, src, context: int) -> RunnerSettings:
    """The flags' runner settings, with what the model source sets itself (its context, its endpoint)."""
    fields: dict = {
        "backend": cfg.backend,
        "dtype": cfg.dtype,
        "batch_size": cfg.batch_size,
        "max_model_len": cfg.max_model_len,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": cfg.rope_scaling,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "chat_template": cfg.chat_template,
        "extra": {"device_map": cfg.device_map} if cfg.device_map else {},
        "system_prompt": cfg.system_prompt,
        "prefix_reuse": cfg.prefix_reuse,
    }
    fields.update(src.runner_settings(cfg, context))
    return RunnerSettings(**fields)


def _record_settings(cfg: EvalConfig, options, tok_fp: str, chat_hash: str | None, context: int, own: dict) -> dict:
    """The settings every record of one checkpoint carries. Every field is part of the record's
    identity (harness/core/identity.py) unless listed there as neutral; a None field is left out of it,
    so a field added here with a None default keeps the identity of records written before it."""
    settings = {
        "backend": cfg.backend,
        "dtype": cfg.dtype,
        "batch_size": cfg.batch_size,
        "max_model_len": context,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": cfg.rope_scaling,
        "template": "chat" if cfg.chat_template else "none",
        "truncation": "none",
        "tokenizer": tok_fp,
        "chat_template": chat_hash,
        # vLLM's tensor parallelism reduces in another order; 1 (the default) is left out
        "tensor_parallel_size": cfg.tensor_parallel_size if cfg.tensor_parallel_size != 1 else None,
    }
    if options.non_default():  # only then: records of default runs stay as they were
        settings["options"] = options.non_default()
    # constants of the backend that shape its arithmetic (the hf runner's decode width)
    settings.update(backend_record_settings(cfg.backend))
    settings.update(own)  # the model source's own fields (a served model: its endpoint)
    return settings
