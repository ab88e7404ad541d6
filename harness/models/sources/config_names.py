"""The names in a config.json that transformers looks up in its own tables: an activation
(`hidden_act`), a RoPE type (`rope_parameters.rope_type`, `rope_scaling.type`) and a dtype
(`dtype`, `torch_dtype`). A name it lacks is a KeyError or AttributeError deep inside
from_pretrained (`ACT2FN["bogus"]`, `ROPE_INIT_FUNCTIONS["bogus"]`, `torch.float128`), raised by
every command that loads the model; here it is one line naming the field, checked with the rest
of config.json (harness.models.sources.config_schema) before any work.

    from harness.models.sources.config_names import check_names
    check_names(json.loads(config_text), "runs/anchor/ckpt-2000/config.json")

The tables are transformers' own (this harness loads no remote code, so no model brings its own).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from harness.core.errors import UserError

_FIX = "fix that field or re-save the checkpoint"
# The fields a model looks its activation up by (ACT2FN[config.<field>]): Llama, Gemma, GPT-2.
_ACT_FIELDS = ("hidden_act", "hidden_activation", "activation_function")
# RoPE types a config may store beside those transformers validates: Qwen2-VL's "mrope" (read as
# "default"), and the old Phi-3 names "su" (read as "longrope").
_ROPE_ALIASES = frozenset({"mrope", "su"})


@cache
def activations() -> frozenset[str]:
    from transformers.activations import ACT2FN

    return frozenset(ACT2FN)


@cache
def rope_types() -> frozenset[str]:
    """transformers' RoPE types: those it computes and those its config validates."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS, RotaryEmbeddingConfigMixin

    prefix, suffix = "_validate_", "_rope_parameters"
    validated = {n[len(prefix) : -len(suffix)] for n in dir(RotaryEmbeddingConfigMixin) if n.startswith(prefix)}
    return frozenset({"default", *ROPE_INIT_FUNCTIONS, *validated, *_ROPE_ALIASES})


@cache
def dtype_names() -> frozenset[str]:
    """The names transformers turns into a torch dtype with getattr(torch, name)."""
    import torch

    return frozenset(n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype))


def _unknown(field: str, value: Any, known: frozenset[str], where: str) -> UserError:
    choices = ", ".join(sorted(known)[:12]) + (", ..." if len(known) > 12 else "")
    return UserError(f"{where}: {field} {value!r} is not one transformers knows (choose from {choices}): {_FIX}")


def _rope_blocks(config: dict) -> list[tuple[str, dict]]:
    """(field path, RoPE block) of rope_parameters (one, or one per layer type) and rope_scaling."""
    blocks = []
    for field in ("rope_parameters", "rope_scaling"):
        value = config.get(field)
        if not isinstance(value, dict):
            continue
        if value and all(isinstance(v, dict) for v in value.values()):
            blocks += [(f"{field}.{k}", v) for k, v in value.items()]
        else:
            blocks.append((field, value))
    return blocks


def _check_dtype(config: dict, prefix: str, where: str) -> None:
    """Every config (and sub-config) turns its dtype name into a torch dtype: `dtype`, else the
    older `torch_dtype` (read only when `dtype` is absent)."""
    field = "dtype" if config.get("dtype") is not None else "torch_dtype"
    value = config.get(field)
    if value is not None and (not isinstance(value, str) or value not in dtype_names()):
        raise _unknown(prefix + field, value, frozenset({"float32", "float16", "bfloat16"}), where)


def _check_model_names(config: dict, cls, prefix: str, where: str) -> None:
    """The activation and RoPE type of the config that builds the language model (of class cls,
    whose fields say which activation name its model looks up; None: an unknown class, every one)."""
    for field in _ACT_FIELDS:
        value = config.get(field)
        read = cls is None or hasattr(cls, field)
        if read and value is not None and (not isinstance(value, str) or value not in activations()):
            raise _unknown(prefix + field, value, activations(), where)
    for path, block in _rope_blocks(config):
        for key in ("rope_type", "type"):
            value = block.get(key)
            if value is not None and (not isinstance(value, str) or value not in rope_types()):
                raise _unknown(f"{prefix}{path}.{key}", value, rope_types(), where)


def _config_class(model_type: object):
    from transformers import CONFIG_MAPPING

    try:
        return CONFIG_MAPPING[model_type] if isinstance(model_type, str) else None
    except KeyError:
        return None


def _text_class(cls, text: dict):
    """The class transformers builds a composite model's text_config with (Gemma 3, LLaVA, Qwen2-VL),
    or None where cls reads no text_config (a text_config beside a Llama is an unread extra)."""
    sub = (getattr(cls, "sub_configs", None) or {}).get("text_config") if cls is not None else None
    if sub is None:
        return None
    from transformers import AutoConfig

    return _config_class(text.get("model_type")) if sub is AutoConfig else sub


# Names every transformers release has in its tables (a test holds them to the tables): a config
# holding only these, each where it belongs, is passed without importing transformers or torch, so
# a re-run with nothing to compute stays light (tests/doctor/test_doctor.py, benchmarks/rerun_noop.py).
COMMON = {
    "activation": frozenset(
        {"silu", "swish", "gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "quick_gelu", "relu", "relu2"}
        | {"relu6", "tanh", "sigmoid"}
    ),
    "rope": frozenset({"default", "linear", "dynamic", "yarn", "longrope", "llama3"}),
    "dtype": frozenset({"float32", "float16", "bfloat16", "float64", "float", "half", "double"}),
}


def _names(config: dict) -> list[tuple[str, object]]:
    """(kind, value) of every activation, RoPE type and dtype of the config and its text_config."""
    out: list[tuple[str, object]] = []
    for part in (config, config.get("text_config")):
        if not isinstance(part, dict):
            continue
        out += [("activation", part.get(f)) for f in _ACT_FIELDS]
        out += [("dtype", part.get(f)) for f in ("dtype", "torch_dtype")]
        out += [("rope", block.get(k)) for _, block in _rope_blocks(part) for k in ("rope_type", "type")]
    return [(kind, v) for kind, v in out if v is not None]


def check_names(config: dict, where: str) -> None:
    """UserError naming the first activation, RoPE type or dtype of config (and of the text_config
    a composite model reads) that transformers has no entry for. Fields transformers never looks up
    (a text_config beside a Llama, hidden_act in a Gemma config) are left alone: this is no stricter
    than loading the model."""
    if all(isinstance(v, str) and v in COMMON[kind] for kind, v in _names(config)):
        return  # the usual names: no need to read transformers' tables
    _check_dtype(config, "", where)
    cls = _config_class(config.get("model_type"))
    text = config.get("text_config")
    text_cls = _text_class(cls, text) if isinstance(text, dict) else None
    if isinstance(text, dict) and (text_cls is not None or "text_config" in (getattr(cls, "sub_configs", None) or {})):
        _check_dtype(text, "text_config.", where)
        _check_model_names(text, text_cls, "text_config.", where)
    else:
        _check_model_names(config, cls, "", where)
