"""Loading the model and tokenizer a run continues from, with one-line errors for damaged files.

    from training.model_files import load_tokenizer_for, load_model
    tokenizer = load_tokenizer_for(job)            # checks the whole model directory first
    model, rope_theta = load_model(job, device)

`check_model_dir` inspects a local --model directory before anything heavy is read: config.json
present and a JSON object, weights present (every shard an index names), and each .safetensors
file's header consistent with its size. A safetensors file is an 8-byte little-endian header
length N, N bytes of JSON mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
(offsets into the bytes after the header), then the data; a file shorter than 8 + N + the largest
end offset is truncated, and random bytes fail the header parse. This reads kilobytes, not the
weights, so a damaged file is reported before the data is tokenized.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

from harness.core.errors import UserError
from harness.core.pickled import check_pickled_weights, refused_load
from training.config import TrainJob

_FIX = "pass --model with a save_pretrained directory (config.json, weights, tokenizer files)"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def check_model_path(path: str) -> bool:
    """Whether `path` is local; a path-like name that is not a directory is a user error."""
    local = Path(path).is_dir()
    if not local and (path.startswith((".", "/", "~")) or path.count("/") > 1):
        raise UserError(f"model not found: {path} is not a directory; {_FIX} or a hub name")
    return local


def check_safetensors(path: Path) -> None:
    """UserError when `path` is not a complete safetensors file (see the module docstring)."""
    from harness.models.sources.config_schema import safetensors_shapes

    safetensors_shapes(path)


def check_model_dir(path: Path) -> None:
    """A local --model directory: config.json, weights and their headers (see the module docstring)."""
    from harness.models.checkpoints import incomplete_reason, weight_files

    why = incomplete_reason(path)
    if why is not None:  # a checkpoint whose writer was killed: continuing from it would fail or mislead
        raise UserError(f"{path} is an incomplete checkpoint ({why}): pass a complete one as --model")
    config = path / "config.json"
    if not config.is_file():
        raise UserError(f"{path} has no config.json: {_FIX}")
    try:
        data = json.loads(config.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{config} is not valid JSON ({_first_line(exc)}): restore the model directory") from None
    if not isinstance(data, dict):
        raise UserError(f"{config} is not a JSON object: restore the model directory")
    weights = weight_files(path)
    if not weights:
        raise UserError(f"{path} has no weights (*.safetensors or pytorch_model*.bin): {_FIX}")
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            raise UserError(f"{index} is damaged: re-download or re-save the model") from None
        missing = [s for s in shards if not (path / s).is_file()]
        if missing:
            raise UserError(f"{path / missing[0]} (named in {index.name}) is missing: re-download or re-save the model")
    for f in weights:
        if f.suffix == ".safetensors":
            check_safetensors(f)
        else:
            check_pickled_weights(f)
    from harness.models.sources.config_schema import check_shapes, validate_config

    # wrong types, NaN rope theta, weights of another shape: one line now, not a traceback later
    check_shapes(path, validate_config(data, str(config)))


def load_tokenizer_for(job: TrainJob):
    """The tokenizer of the model directory (checked first), with errors that name --model."""
    from harness.models.sources import model_file_source
    from harness.models.tokenization import load_tokenizer

    src = model_file_source(job.model.path)  # a GGUF file or packaged model: checked by its source
    if src is not None:
        src.check("hf")
        return src.load_tokenizer()
    if check_model_path(job.model.path):
        check_model_dir(Path(job.model.path))
    try:
        return load_tokenizer(job.model.path)
    except UserError as exc:
        # The shared loader's fix names eval/generate's --tokenizer; train reads it from --model.
        problem = re.split(r"[;:] pass --tokenizer", str(exc))[0]
        raise UserError(f"{problem}: the tokenizer files must be in the --model directory") from None


def context_after_training(model_positions: int | None, window: int) -> int:
    """The context a continued model's config claims: the larger of what it had and the window.

    Writing the window alone would shrink a model continued at a shorter window than it was
    trained for (SmolLM2's 8192 positions continued at 1024 would then be refused at 2K by eval)."""
    return max(int(model_positions or 0), int(window))


def load_model(job: TrainJob, device):
    """(model, rope_theta) with the context (`context_after_training`) and rope theta written into
    the config before init."""
    import torch
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModelForCausalLM

    from harness.models.sources import load_target, model_file_source

    path = job.model.path
    src = model_file_source(path)  # a GGUF file or packaged model (else a folder or hub name)
    local = True if src is not None else check_model_path(path)
    target = load_target(src.checkpoint.path if src is not None else path)
    try:
        config = AutoConfig.from_pretrained(target.model, local_files_only=local, **target.kwargs)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load model config from {path!r} ({_first_line(exc)}); {_FIX}") from None
    config.max_position_embeddings = context_after_training(
        getattr(config, "max_position_embeddings", None), job.data.window
    )
    rope = dict(getattr(config, "rope_parameters", None) or {})
    if job.model.rope_theta is not None:
        rope["rope_theta"] = float(job.model.rope_theta)
        config.rope_parameters = rope
    rope_theta = rope.get("rope_theta", getattr(config, "rope_theta", None))
    config.use_cache = False
    try:
        # fp32 master weights: bf16 runs use autocast, so the optimizer never rounds updates away.
        model = AutoModelForCausalLM.from_pretrained(
            target.model, config=config, local_files_only=local, dtype=torch.float32, **target.kwargs
        )
    except torch.OutOfMemoryError:
        raise
    except pickle.UnpicklingError as exc:  # a .bin that torch.load(weights_only=True) refuses
        raise refused_load(path, exc) from None
    except (SafetensorError, OSError, ValueError, EOFError, RuntimeError) as exc:
        # Damage the header check cannot see (e.g. a .bin file), or weights of another shape.
        raise UserError(
            f"cannot load the weights in {path} ({_first_line(exc)}): re-download or re-save the model"
        ) from None
    if src is not None:
        src.after_load(model)  # a GGUF model: saveable like any other (checkpoints)
    model.to(device)
    if job.model.grad_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model, rope_theta
