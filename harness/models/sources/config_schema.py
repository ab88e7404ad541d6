"""The checkpoint-config schema, and the weight shapes a config implies.

    from harness.models.sources.config_schema import check_config_and_shapes, validate_config
    check_config_and_shapes(Path("runs/anchor/ckpt-2000"))   # one-line UserError, before any work

A config.json is input from outside: a field of the wrong type (`"max_position_embeddings": "1024"`)
or a NaN rope theta would otherwise surface as a traceback, or as a silently wrong run, long after
planning. `ModelConfigSchema` (pydantic 2, strict) is the one definition of the fields the harness
and transformers read for the context, RoPE and the matrix shapes; other fields pass through
unchecked, as transformers reads them. GGUF metadata is checked by the same schema under
config.json's names (harness/models/sources/gguf.py).

Shapes: the safetensors headers (8-byte length + JSON; no tensor is read) of a folder give each
tensor's shape, which is compared with what the config implies for the main matrices of the
Llama-family layout (embed_tokens, lm_head, q/k/v/o_proj, gate/up/down_proj) and with
num_hidden_layers (a layer the weights lack would be initialised at random by transformers, with
a warning only). Tensors of other layouts are not compared.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from harness.core.errors import UserError

PositiveInt = Annotated[int, Field(gt=0, strict=True)]
NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]


def _whole(value: float) -> float:
    if not float(value).is_integer():
        raise ValueError("not a whole number")
    return value


# A count of positions: a whole number (some configs write it as 1200.0)
Positions = PositiveInt | Annotated[PositiveFloat, AfterValidator(_whole)]
# A model dimension: one number, or one per layer / per part in some layouts (gemma3n, lxmert)
Dim = PositiveInt | list[NonNegativeInt] | dict[str, Any]


class RopeSchema(BaseModel):
    """rope_parameters / rope_scaling: the numbers RoPE is computed from."""

    model_config = ConfigDict(extra="allow")

    rope_theta: PositiveFloat | None = None
    rope_type: Annotated[str, Field(strict=True)] | None = None
    type: Annotated[str, Field(strict=True)] | None = None
    factor: PositiveFloat | None = None
    original_max_position_embeddings: PositiveInt | None = None


def _rope_form(value: Any) -> str:
    """One RoPE block, or one per layer type (every value an object)."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        return "PerLayerType"
    return "RopeSchema"


RopeParameters = Annotated[
    Annotated[RopeSchema, Tag("RopeSchema")] | Annotated[dict[str, RopeSchema], Tag("PerLayerType")],
    Discriminator(_rope_form),
]


class ModelConfigSchema(BaseModel):
    """The fields of a checkpoint's config.json the harness relies on (others pass unchecked)."""

    model_config = ConfigDict(extra="allow")

    model_type: Annotated[str, Field(strict=True)] | None = None
    max_position_embeddings: Positions | None = None
    hidden_size: Dim | None = None
    num_hidden_layers: Dim | None = None
    num_attention_heads: Dim | None = None
    num_key_value_heads: Dim | None = None
    intermediate_size: Dim | None = None
    vocab_size: PositiveInt | None = None
    head_dim: NonNegativeInt | None = None  # 0 or absent: hidden_size / num_attention_heads
    rope_theta: PositiveFloat | None = None
    # one RoPE block, or one per layer type (e.g. {"full_attention": {...}, "sliding_attention": {...}})
    rope_parameters: RopeParameters | None = None
    rope_scaling: RopeSchema | None = None
    text_config: ModelConfigSchema | None = None


_WHAT = {
    "int_type": "a whole number",
    "greater_than": "above 0",
    "finite_number": "a finite number",
    "float_type": "a number",
    "string_type": "text",
    "model_type": "an object",
    "dict_type": "an object",
    "value_error": "a whole number",
    "list_type": "a whole number",
}


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"{value!r} (text)"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return repr(value)[:60]


def _field_path(data: Any, loc: tuple) -> str:
    """The dotted field path of an error location: pydantic puts union branch names
    (constrained-int, RopeSchema, ...) between the keys; only the input's own keys are kept."""
    parts, node = [], data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_dict or in_list:
            parts.append(str(part))
            node = node[part]
    return ".".join(parts)


def validate_config(data: Any, where: str) -> ModelConfigSchema:
    """`data` (a parsed config.json) against the schema; one-line UserError naming the field."""
    if not isinstance(data, dict):
        raise UserError(f"{where} is not a JSON object: re-save the checkpoint")
    try:
        cfg = ModelConfigSchema.model_validate(data)
    except ValidationError as exc:
        # a union reports one error per branch; the first names the field and the expectation
        err = exc.errors()[0]
        loc = _field_path(data, err["loc"])
        expected = _WHAT.get(err["type"], err["msg"].lower())
        raise UserError(
            f"{where}: {loc} is {_describe(err.get('input'))}, expected {expected}: fix that field or re-save the checkpoint"
        ) from None
    from harness.models.sources.config_names import check_names

    check_names(data, where)
    return cfg


def read_config_json(path: Path) -> dict:
    f = path / "config.json"
    try:
        # Python's json reads NaN and Infinity as floats: the schema names them
        data = json.loads(f.read_bytes())
    except OSError as exc:
        raise UserError(f"cannot read {f} ({exc.strerror}): re-save the checkpoint") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{f} is not valid JSON ({exc}): re-save the checkpoint") from None
    if not isinstance(data, dict):
        raise UserError(f"{f} is not a JSON object: re-save the checkpoint")
    return data


_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit on the JSON header


def safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from a safetensors file's header, which is checked against the file:
    an 8-byte little-endian length N, N bytes of JSON {name: {"dtype", "shape", "data_offsets":
    [begin, end]}} (offsets into the bytes after the header), then the data. Random bytes fail the
    header parse; a file shorter than 8 + N + the largest end offset is truncated. Reads the header
    only (no torch)."""
    damaged = f"{path} is damaged"
    fix = "re-download or re-save the model"
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise UserError(f"{damaged} ({size} bytes, shorter than a safetensors header): {fix}")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, _MAX_HEADER):
            raise UserError(f"{damaged} (not a safetensors file, or truncated inside its header): {fix}")
        try:
            header = json.loads(f.read(n))
            tensors = {k: v for k, v in header.items() if k != "__metadata__"}
            ends = [int(v["data_offsets"][1]) for v in tensors.values()]
            shapes = {k: tuple(int(d) for d in v["shape"]) for k, v in tensors.items()}
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, UnicodeDecodeError):
            raise UserError(f"{damaged} (its safetensors header is not valid JSON): {fix}") from None
    need = 8 + n + max(ends, default=0)
    if size < need:
        raise UserError(f"{damaged} (truncated: {size} of {need} bytes): {fix}")
    return shapes


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(?:gate|up|down)_proj)\.weight$")


def expected_shapes(cfg: ModelConfigSchema) -> dict[str, tuple[int, int]] | None:
    """Matrix kind -> shape the config implies; None when the config lacks the dimensions."""
    c = cfg.text_config or cfg
    hidden, heads, kv = c.hidden_size, c.num_attention_heads, c.num_key_value_heads or c.num_attention_heads
    if not (isinstance(hidden, int) and isinstance(heads, int) and isinstance(kv, int) and c.vocab_size):
        return None  # a layout with per-layer dimensions: not compared
    head_dim = c.head_dim or hidden // heads
    out = {
        "embed_tokens": (c.vocab_size, hidden),
        "lm_head": (c.vocab_size, hidden),
        "self_attn.q_proj": (heads * head_dim, hidden),
        "self_attn.k_proj": (kv * head_dim, hidden),
        "self_attn.v_proj": (kv * head_dim, hidden),
        "self_attn.o_proj": (hidden, heads * head_dim),
    }
    if isinstance(c.intermediate_size, int):
        inter = c.intermediate_size
        out.update({"mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden), "mlp.down_proj": (hidden, inter)})
    return out


def check_shapes(folder: Path, cfg: ModelConfigSchema) -> None:
    """The main matrices of the folder's safetensors files against the config (see the docstring)."""
    expected = expected_shapes(cfg)
    files = sorted(folder.glob("*.safetensors"))
    if expected is None or not files:
        return
    layers_seen: dict[str, set[int]] = {}
    for f in files:
        for name, shape in safetensors_shapes(f).items():
            m = _LAYER.search(name)
            if m:
                kind = m.group(2)
                layers_seen.setdefault(kind, set()).add(int(m.group(1)))
            elif name.endswith("embed_tokens.weight"):
                kind = "embed_tokens"
            elif name.endswith("lm_head.weight"):
                kind = "lm_head"
            else:
                continue
            want = expected.get(kind)
            if want is not None and shape != want:
                raise UserError(
                    f"{f}: {name} has shape {list(shape)} but config.json implies {list(want)}: "
                    "the weights and config.json are of different models; re-save the checkpoint"
                )
    n_layers = (cfg.text_config or cfg).num_hidden_layers
    if isinstance(n_layers, int):
        for kind, seen in sorted(layers_seen.items()):
            missing = sorted(set(range(n_layers)) - seen)
            extra = sorted(i for i in seen if i >= n_layers)
            if missing or extra:
                what = f"lack layer {missing[0]}" if missing else f"hold layer {extra[0]}"
                raise UserError(
                    f"{folder}: config.json says num_hidden_layers {n_layers} but the weights {what} ({kind}): "
                    "the weights and config.json are of different models; re-save the checkpoint"
                )


def check_config_and_shapes(folder: Path) -> ModelConfigSchema:
    """A checkpoint folder's config.json against the schema, then its weight shapes against it."""
    cfg = validate_config(read_config_json(folder), str(folder / "config.json"))
    check_shapes(folder, cfg)
    return cfg
