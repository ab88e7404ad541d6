"""Model sources: checkpoint folders (and hub names), GGUF files (and packaged models), served endpoints.

    from harness.models.sources import resolve_sources, select_sources, source_for, load_target
    sources = resolve_sources(cfg)            # what `harness eval` evaluates (any kind)
    src = source_for("smollm2-135m-instruct") # one model argument (train --model, diagnose --ckpt)
    target = load_target(src.checkpoint.path) # what from_pretrained needs (runners)

The interface and the registry are in harness/models/sources/base.py; each kind is one module here.
"""

from harness.models.sources.base import (
    LoadTarget,
    ModelSource,
    check_same_tokenizer,
    kind_of_path,
    kinds,
    load_target,
    model_file_source,
    model_tokenizer,
    register_kind,
    resolve_sources,
    run_model,
    select_checkpoints,
    select_sources,
    source_for,
)

__all__ = [
    "LoadTarget",
    "ModelSource",
    "check_same_tokenizer",
    "kind_of_path",
    "kinds",
    "load_target",
    "model_file_source",
    "model_tokenizer",
    "register_kind",
    "resolve_sources",
    "run_model",
    "select_checkpoints",
    "select_sources",
    "source_for",
]
