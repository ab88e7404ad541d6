"""Pieces both runners share: model context, rope overrides, tokenizer checks, stop strings.

Only the standard library at import time; transformers is imported inside the functions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from harness.core.errors import UserError

# The prefix engine's decode width (harness/models/runners/decode.py says why it is fixed), here in a module
# without torch imports so that planning puts it in every record's settings (the hf runner's
# record_settings) without importing torch, and the engine (harness/models/runners/prefix.py) defaults to it.
DECODE_ROWS = 8
# The decoding rows' attention kernel (harness/models/runners/decode.py KERNELS): one SDPA call per layer
# for all rows, keys padded to a multiple of 512 under a per-row key mask. A record setting of the hf
# runner beside the width: another kernel sums in another order, so it is another identity.
DECODE_ATTENTION = "sdpa-padded-512"

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")


def read_config(model_path: str) -> dict:
    """config.json of a local checkpoint; {} for a hub name (transformers resolves it later)."""
    path = Path(model_path) / "config.json"
    if not Path(model_path).is_dir():
        return {}
    if not path.exists():
        raise UserError(f"{model_path} is not a loadable model (no config.json): pass a save_pretrained directory")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON ({exc}): re-save the checkpoint") from None


def check_tokenizer_present(model_path: str) -> None:
    """A local checkpoint must carry its tokenizer: prompts are counted and run with it."""
    if Path(model_path).is_dir() and not any((Path(model_path) / f).exists() for f in TOKENIZER_FILES):
        raise UserError(
            f"missing tokenizer: {model_path} has no tokenizer files; save the tokenizer beside the model "
            "(tokenizer.save_pretrained(CKPT_DIR))"
        )


def check_weights(model_path: str) -> None:
    """Every *.safetensors of a local checkpoint has a readable header covering the whole file:
    random bytes or a truncated copy are named before any work (reads headers only, no torch); every
    pytorch_model*.bin pickles nothing but tensors and plain values (harness/core/pickled.py)."""
    if not Path(model_path).is_dir():
        return
    from harness.core.pickled import check_pickled_weights
    from harness.models.sources.config_schema import safetensors_shapes

    for f in sorted(Path(model_path).glob("pytorch_model*.bin")):
        check_pickled_weights(f)
    for f in sorted(Path(model_path).glob("*.safetensors")):
        try:
            safetensors_shapes(f)
        except UserError as exc:
            raise UserError(f"{exc}; or leave it out of --ckpts") from None
        except OSError as exc:
            raise UserError(f"cannot read {f} ({exc.strerror}): check its permissions") from None


def config_context(config: dict) -> int | None:
    return config.get("max_position_embeddings") or (config.get("text_config") or {}).get("max_position_embeddings")


def context_length(model_path: str, max_model_len: int | None) -> int:
    """The context a run uses: --max-model-len, else the model's own (a folder's config
    max_position_embeddings, a GGUF file's context_length: asked of its model source)."""
    from harness.models.sources import kind_of_path

    return kind_of_path(model_path).context_of(model_path, max_model_len)


def folder_context_length(model_path: str, max_model_len: int | None) -> int:
    """--max-model-len, else the config's max_position_embeddings (a local folder or a hub name)."""
    if max_model_len:
        return int(max_model_len)
    if Path(model_path).is_dir():
        ctx = config_context(read_config(model_path))
    else:  # a hub name: transformers resolves (and caches) its config
        from transformers import AutoConfig

        try:
            ctx = getattr(AutoConfig.from_pretrained(model_path), "max_position_embeddings", None)
        except (OSError, ValueError) as exc:
            raise UserError(
                f"cannot load the config of {model_path!r} ({str(exc).splitlines()[0]}): check the name or go online"
            ) from None
    if not ctx:
        raise UserError(f"{model_path}: config has no max_position_embeddings; pass --max-model-len")
    return int(ctx)


def normalise_rope_scaling(rope_scaling: dict | None) -> dict | None:
    """Accept RULER/HF-3 style {"type": ...} as well as {"rope_type": ...}."""
    if not rope_scaling:
        return None
    d = dict(rope_scaling)
    if "type" in d and "rope_type" not in d:
        d["rope_type"] = d.pop("type")
    if "rope_type" not in d:
        raise UserError('--rope-scaling needs a "rope_type" (or "type"), e.g. {"rope_type": "yarn", "factor": 4.0}')
    return d


# transformers' rope types and the parameters each needs (modeling_rope_utils), so that a bad
# --rope-scaling is a one-line error when the flag is read, not a KeyError inside model loading.
_ROPE_REQUIRED = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor",),
    "longrope": ("short_factor", "long_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}
_ROPE_NUMBERS = (
    "factor",
    "attention_factor",
    "beta_fast",
    "beta_slow",
    "low_freq_factor",
    "high_freq_factor",
    "mscale",
    "mscale_all_dim",
)


def check_rope_scaling(rope_scaling: dict) -> None:
    """UserError naming what is wrong with a --rope-scaling object (normalised: it has a rope_type)."""
    kind = rope_scaling["rope_type"]
    example = ' e.g. {"rope_type": "yarn", "factor": 4.0}'
    if not isinstance(kind, str) or kind not in _ROPE_REQUIRED:
        raise UserError(
            f"--rope-scaling rope_type {kind!r} is unknown: use one of {', '.join(_ROPE_REQUIRED)},{example}"
        )
    missing = [k for k in _ROPE_REQUIRED[kind] if k not in rope_scaling]
    if missing:
        raise UserError(f"--rope-scaling of rope_type {kind!r} needs {', '.join(missing)}: add them to the JSON object")
    for key in _ROPE_NUMBERS:
        value = rope_scaling.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UserError(f"--rope-scaling {key} {value!r} is not a number: write e.g. 4.0")
    original = rope_scaling.get("original_max_position_embeddings")
    if original is not None and (isinstance(original, bool) or not isinstance(original, int) or original < 1):
        raise UserError(
            f"--rope-scaling original_max_position_embeddings {original!r} is not a positive integer of tokens"
        )
    for key in ("short_factor", "long_factor"):
        value = rope_scaling.get(key)
        if value is not None and not (
            isinstance(value, list)
            and value
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        ):
            raise UserError(f"--rope-scaling {key} must be a list of numbers (one per rotary frequency)")


def rope_override_dict(config, rope_theta: float | None, rope_scaling: dict | None) -> dict:
    """Attributes to set on an HF config (or pass as vLLM hf_overrides) for the rope flags.

    transformers >= 5 keeps theta and scaling together in `rope_parameters`; older versions use
    `rope_theta` and `rope_scaling`. Unset flags leave the checkpoint's values alone.
    """
    scaling = normalise_rope_scaling(rope_scaling)
    if rope_theta is None and scaling is None:
        return {}
    params = getattr(config, "rope_parameters", None)
    if params is not None or "rope_parameters" in getattr(config, "to_dict", dict)():
        new = dict(params or {})
        if scaling is not None:
            new = {k: v for k, v in new.items() if k == "rope_theta"}
            new.update(scaling)
        if rope_theta is not None:
            new["rope_theta"] = float(rope_theta)
        new.setdefault("rope_type", "default")
        return {"rope_parameters": new}
    out: dict = {}
    if rope_theta is not None:
        out["rope_theta"] = float(rope_theta)
    if scaling is not None:
        out["rope_scaling"] = scaling
    return out


def cut_at_stop(text: str, stop: tuple[str, ...]) -> str:
    """Cut a continuation at its first stop string (the stop string itself is dropped)."""
    cut = len(text)
    for s in stop:
        i = text.find(s)
        if s and i != -1:
            cut = min(cut, i)
    return text[:cut]


def keeps_logits(model) -> bool:
    """Whether the model's forward takes `logits_to_keep` (then only the last position's logits are
    computed: a [L, vocab] tensor at long L is most of a forward pass's memory)."""
    import inspect

    return "logits_to_keep" in inspect.signature(model.forward).parameters


def prompt_ids(tokenizer, prompt: str) -> list[int]:
    """Token ids as the length rule counts them: special tokens added, unless the prompt already
    starts with BOS (a chat template wrote it), which would double it."""
    bos = tokenizer.bos_token
    add = not (bos and prompt.startswith(bos))
    return tokenizer(prompt, add_special_tokens=add)["input_ids"]


# UTF-8 bytes of text per tokenizer call. A byte-level BPE gives at most a token per byte, and the
# call's transient encodings cost ~100-300 bytes a token (measured on SmolLM2's tokenizer, 4 MiB a
# call: English 0.83M tokens, +228 MiB peak; Chinese 2.8M tokens, +331 MiB). Counting characters
# instead let a call of Chinese text reach 8.5M tokens and +884 MiB.
BYTES_PER_CALL = 1 << 22


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def prompts_ids(tokenizer, prompts: list[str], bytes_per_call: int = BYTES_PER_CALL) -> Iterator[list[int]]:
    """prompt_ids of each prompt, in order, several prompts to a tokenizer call: a fast tokenizer
    encodes one call's texts in parallel on every core, where one prompt a call uses one (measured on
    SmolLM2's tokenizer: 0.05 s a 32K prompt, 20 s of a 396-sample RULER run). The ids are the same."""
    bos = tokenizer.bos_token
    chunk: list[str] = []
    size, add = 0, True
    for prompt in prompts:
        this = not (bos and prompt.startswith(bos))
        n = _utf8_size(prompt)
        if chunk and (this != add or size + n > bytes_per_call):
            yield from tokenizer(chunk, add_special_tokens=add)["input_ids"]
            chunk, size = [], 0
        chunk.append(prompt)
        size += n
        add = this
    if chunk:
        yield from tokenizer(chunk, add_special_tokens=add)["input_ids"]


def _token_ids(value) -> list[int]:
    """An eos_token_id field as ids: an int, a list of them, or anything else as none."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]


def stop_token_ids(tokenizer_eos, *eos_fields) -> tuple[int, ...]:
    """The ids that end a generation: the tokenizer's EOS and every id of the model's config and
    generation config `eos_token_id` fields (an int or a list). transformers' generate and vLLM stop
    at each id of the generation config's: a chat model's end of turn (Llama-3-Instruct's <|eot_id|>
    beside <|end_of_text|>) is often not the tokenizer's EOS."""
    ids = set(_token_ids(tokenizer_eos))
    for field in eos_fields:
        ids.update(_token_ids(field))
    return tuple(sorted(ids))


def text_stop_ids(tokenizer, texts) -> frozenset[int]:
    """The ids GenerationRequest.stop_tokens stop at: each text's LAST token id, encoded without special
    tokens, as LongBench's pred.py builds its samsum stop (tokenizer.encode("\n", add_special_tokens=False)[-1];
    a SentencePiece tokenizer may put a "▁" piece before the newline's)."""
    ids = set()
    for text in texts:
        encoded = tokenizer.encode(text, add_special_tokens=False)
        if not encoded:
            raise UserError(f"stop token {text!r} encodes to no token with this tokenizer")
        ids.add(int(encoded[-1]))
    return frozenset(ids)


def _model_file(model: str, name: str) -> str | None:
    """A model's config file on this machine: in its folder, or in the hub cache for a hub name
    (`org/name[@revision]`; never downloaded here). None when there is none."""
    if os.path.isdir(model):
        path = os.path.join(model, name)
        return path if os.path.isfile(path) else None
    if model.endswith(".gguf") or "/" not in model:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    repo, _, revision = model.partition("@")
    found = try_to_load_from_cache(repo, name, revision=revision or None)
    return found if isinstance(found, str) else None


def model_stop_ids(model: str, tokenizer_eos) -> list[int] | None:
    """stop_token_ids of a model folder (or a cached hub model), read from its config.json and
    generation_config.json without loading it: the hf records' `eos_ids` setting, planned before any
    runner loads. None where that is one id (most models: their records keep the identity they had)
    or the files are not here (a GGUF file carries one EOS)."""
    fields = []
    for name in ("config.json", "generation_config.json"):
        path = _model_file(model, name)
        if path is None:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            if name == "config.json":
                continue  # the loader reports a bad config.json, naming it
            # transformers drops a damaged generation_config.json with a warning and generates with
            # defaults: its stop ids (Llama-3's <|eot_id|>) would be lost and every answer run on
            raise UserError(
                f"{path} cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}): "
                "it names the model's stop tokens; fix it, or delete it to stop at the tokenizer's EOS only"
            ) from None
        if isinstance(data, dict):
            fields.append(data.get("eos_token_id"))
    ids = stop_token_ids(tokenizer_eos, *fields)
    return list(ids) if len(ids) > 1 else None


def encode_pair(tokenizer, eos_id: int | None, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) of a loglikelihood request, split as every runner splits it.

    Trailing spaces of the context belong to the continuation (tokenizers attach them to the next
    word); the whole is encoded and split, as lm-eval does, so merges stay natural. An empty
    context without BOS is conditioned on EOS, as lm-eval does.
    """
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = prompt_ids(tokenizer, context + continuation)
    ctx = prompt_ids(tokenizer, context)
    if not ctx:
        assert eos_id is not None, "an empty context needs an EOS token to condition on"
        return [eos_id], whole
    return ctx, whole[len(ctx) :]


def threads_from_env() -> int | None:
    """HARNESS_THREADS (set by harness.pipeline.parallel, or by the user), checked: None when unset."""
    from harness.core.validate import MAX_WORKERS, ascii_int

    n = os.environ.get("HARNESS_THREADS")
    if not n:
        return None
    try:
        threads = ascii_int(n)
    except ValueError:
        threads = 0
    if not 1 <= threads <= MAX_WORKERS:
        raise UserError(f"HARNESS_THREADS={n!r} is not a thread count: unset it or set it to 1..{MAX_WORKERS}")
    return threads


def cpu_threads_hint() -> None:
    """Workers sharing a CPU each get their share of the cores (set by harness.pipeline.parallel)."""
    threads = threads_from_env()
    if threads:
        import torch

        torch.set_num_threads(threads)
