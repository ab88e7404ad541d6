"""Loading tokenizers and counting tokens the way the length rule counts them.

`load_tokenizer` gives a transformers tokenizer (evaluation, training, chat templates).
`load_generation_tokenizer` is what `harness generate` uses: for a local directory whose
tokenizer.json transformers would load unchanged (see `_light_spec`) it is a `LightTokenizer` over
the bare `tokenizers.Tokenizer`, which gives the same ids, texts and fingerprint without importing
transformers (and with it torch: seconds and ~270 MB before the first sample); otherwise it is
`load_tokenizer`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from harness.core.errors import UserError

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerBase

_PASS_TOKENIZER = "pass --tokenizer with a local tokenizer directory or a reachable hub name"


def load_tokenizer(name_or_path: str, fix: str = _PASS_TOKENIZER):
    """A Hugging Face tokenizer from a local directory or, when online, a hub name. `fix` ends the
    error message: commands without a --tokenizer flag (eval) name their own remedy. A model file
    (a .gguf file, a packaged model name) holds its own tokenizer: harness.models.sources.model_tokenizer
    reads those, then falls back to this."""
    from transformers import AutoTokenizer

    local = os.path.isdir(name_or_path)
    if not local and (
        os.sep in name_or_path and not name_or_path.count("/") == 1 or name_or_path.startswith((".", "~"))
    ):
        raise UserError(f"tokenizer not found: {name_or_path} is not a directory; {fix}")
    if local:
        _check_model_type(name_or_path)
    unreachable = None if local else _hub_unreachable()
    try:
        # A hub name with the hub out of reach reads the hub cache only: huggingface_hub would retry
        # for ~50 s (23 lines of warnings) before saying what this says at once.
        tok = AutoTokenizer.from_pretrained(name_or_path, local_files_only=local or unreachable is not None)
    except KeyError as exc:  # transformers' config validation (a rope_scaling missing its keys)
        raise UserError(config_error(name_or_path, exc)) from None
    except (OSError, ValueError) as exc:
        if unreachable is not None:
            raise UserError(
                f"cannot load tokenizer {name_or_path!r}: it is not a local directory, not in the hub cache, and "
                f"{unreachable}; pass a local model directory"
            ) from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load tokenizer {name_or_path!r} ({first}); {fix}") from None
    if not getattr(tok, "is_fast", False):
        raise UserError(
            f"tokenizer {name_or_path!r} has no fast (Rust) version; the length rule needs a fast tokenizer"
        )
    return tok


def config_error(model: str, exc: KeyError) -> str:
    """One line for a config.json transformers refuses with a KeyError (its RoPE validation: a
    "llama3" rope_scaling without low_freq_factor), which would otherwise end in a traceback."""
    what = str(exc.args[0]) if exc.args else type(exc).__name__
    return (
        f"{model}: its config.json is not one transformers can load ({what}): add the missing fields "
        "or restore the model's original config.json"
    )


def _check_model_type(folder: str) -> None:
    """A config.json model_type this transformers does not know is one line now: AutoTokenizer
    would print transformers' "You are using a model of type ..." warning on every load (three
    times in an eval) before the model load fails. Custom code (auto_map) is left to transformers."""
    path = os.path.join(folder, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return  # no config, or a damaged one: the model checks name it
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if not isinstance(model_type, str) or not model_type or "auto_map" in config:
        return
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if model_type not in CONFIG_MAPPING_NAMES:
        raise UserError(
            f"{path}: model_type {model_type!r} is not a model type transformers {transformers.__version__} "
            "knows: fix model_type, or upgrade transformers if the model is newer than it"
        )


def _hub_unreachable() -> str | None:
    """Why the hub cannot be asked now ("the hub is unreachable: offline: HF_HUB_OFFLINE is set", a
    failed connection probed once per process: harness/core/hub.py), or None."""
    from harness.core import hub

    try:
        hub.check()
    except hub.HubUnreachable as exc:
        return str(exc)
    return None


# transformers' named special tokens (PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES), in its order
_SPECIAL_ATTRS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# tokenizer_config.json keys that change neither the backend transformers builds from tokenizer.json
# nor the ids, texts and special tokens generation reads. Any other key (add_bos_token,
# add_prefix_space, split_special_tokens, auto_map, fix_mistral_regex, ...) sends the directory to
# transformers, which knows what it means.
_PLAIN_CONFIG_KEYS = frozenset(
    {
        *_SPECIAL_ATTRS,
        "added_tokens_decoder",
        "backend",
        "chat_template",
        "clean_up_tokenization_spaces",
        "model_input_names",
        "model_max_length",
        "padding_side",
        "truncation_side",
        "tokenizer_class",
        # loader arguments save_pretrained writes back; from_pretrained overwrites them on load
        "is_local",
        "local_files_only",
        "name_or_path",
    }
)
# classes that take tokenizer.json as it is; a model-specific class (LlamaTokenizer, ...) may
# rebuild the pipeline in Python (transformers 5 does for several)
_PLAIN_CLASSES = frozenset({"TokenizersBackend", "PreTrainedTokenizerFast"})
# model types in a config.json beside the tokenizer for which AutoTokenizer honours a generic
# tokenizer_class (others can be re-routed to a model-specific class); checked by
# tests/ruler/test_light_tokenizer.py
_PLAIN_MODEL_TYPES = frozenset({"llama"})


class LightTokenizer:
    """The part of a transformers fast tokenizer that sample generation uses, over a bare
    `tokenizers.Tokenizer`: `tok(text or texts, add_special_tokens=...)["input_ids"]`, `decode`,
    the special tokens and their ids, and `backend_tokenizer` (read by the RULER counters and the
    fingerprint). Built only by `load_generation_tokenizer` for directories where transformers
    would wrap the same backend unchanged, so every id, text and fingerprint is the same."""

    is_fast = True

    def __init__(self, backend: Tokenizer, special: dict[str, str], name_or_path: str = "") -> None:
        self._backend = backend
        self._special = dict(special)
        self.name_or_path = name_or_path
        for attr in _SPECIAL_ATTRS:
            token = self._special.get(attr)
            setattr(self, attr, token)
            setattr(self, attr + "_id", backend.token_to_id(token) if token is not None else None)

    @property
    def backend_tokenizer(self) -> Tokenizer:
        return self._backend

    @property
    def special_tokens_map(self) -> dict[str, str]:
        return {a: self._special[a] for a in _SPECIAL_ATTRS if self._special.get(a) is not None}

    def __call__(self, text: str | list[str], add_special_tokens: bool = True) -> dict[str, Any]:
        if isinstance(text, str):
            return {"input_ids": self._backend.encode(text, add_special_tokens=add_special_tokens).ids}
        encs = self._backend.encode_batch(list(text), add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in encs]}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: int | list[int], skip_special_tokens: bool = False) -> str:
        # transformers' clean_up_tokenization_spaces is either off or ignored for BPE here (_light_spec)
        return self._backend.decode(
            [ids] if isinstance(ids, int) else list(ids), skip_special_tokens=skip_special_tokens
        )

    def __repr__(self) -> str:
        return f"LightTokenizer({self.name_or_path!r})"


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=1)
def _transformers_is_5() -> bool:
    """Whether the installed transformers is 5.x or later (read from its metadata, not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = version("transformers").split(".")[0]
    except PackageNotFoundError:
        return True  # nothing to match: the tokenizer.json is all there is
    return major.isdigit() and int(major) >= 5


def _light_spec(path: str) -> tuple[Tokenizer | None, dict[str, str], str]:
    """(backend, named special tokens, "") when transformers' AutoTokenizer would wrap
    `path`/tokenizer.json without changing it, else (None, {}, why not).

    What transformers 5 does to a loaded tokenizer.json (an older transformers: refused), and what
    is checked against each:
    a model-specific class may rebuild it (tokenizer_class must be generic, no auto_map, and a
    config.json beside it must name a model type that keeps the class); special tokens named in the
    config but missing from tokenizer.json are added (all must be there, with the same flags);
    add_bos_token/add_eos_token or an absent post-processor rewrite the post-processor (refused);
    truncation and padding are reset (refused when tokenizer.json sets them); legacy
    special_tokens_map.json / added_tokens.json files feed in when the config has no
    added_tokens_decoder (refused); decode cleans up spaces when asked, except for BPE (refused for
    other models).
    """
    cfg, special, why = _plain_config(path)
    if cfg is None:
        return None, {}, why
    backend, why = _plain_backend(path, cfg, special)
    return backend, (special if backend is not None else {}), why


def _plain_config(path: str) -> tuple[dict | None, dict[str, str], str]:
    """(tokenizer_config.json, its named special tokens, "") when the configs beside tokenizer.json
    leave it to transformers as it is (the rules of _light_spec), else (None, {}, why not)."""
    tok_file = os.path.join(path, "tokenizer.json")
    cfg_file = os.path.join(path, "tokenizer_config.json")
    if not (os.path.isfile(tok_file) and os.path.isfile(cfg_file)):
        return None, {}, "no tokenizer.json and tokenizer_config.json"
    if not _transformers_is_5():
        return None, {}, "these rules are transformers 5's (4.x cleans up decoded BPE text, for one)"
    try:
        cfg = _read_json(cfg_file)
        model_cfg = (
            _read_json(os.path.join(path, "config.json")) if os.path.isfile(os.path.join(path, "config.json")) else {}
        )
    except (OSError, ValueError) as exc:
        return None, {}, f"unreadable config ({exc})"
    if not isinstance(cfg, dict) or not isinstance(model_cfg, dict):
        return None, {}, "config is not a JSON object"
    if cfg.get("tokenizer_class") not in _PLAIN_CLASSES:
        return None, {}, f"tokenizer_class {cfg.get('tokenizer_class')!r}"
    extra = sorted(
        k for k, v in cfg.items() if k not in _PLAIN_CONFIG_KEYS and not (k.endswith("special_tokens") and not v)
    )
    if extra:
        return None, {}, f"tokenizer_config.json sets {', '.join(extra)}"
    if model_cfg and (model_cfg.get("model_type") not in _PLAIN_MODEL_TYPES or "tokenizer_class" in model_cfg):
        return None, {}, f"config.json model_type {model_cfg.get('model_type')!r}"
    if "added_tokens_decoder" not in cfg and any(
        os.path.exists(os.path.join(path, f)) for f in ("special_tokens_map.json", "added_tokens.json")
    ):
        return None, {}, "legacy special_tokens_map.json / added_tokens.json"
    special = {a: cfg[a] for a in _SPECIAL_ATTRS if cfg.get(a) is not None}
    if not all(isinstance(v, str) for v in special.values()):
        return None, {}, "special tokens given as objects"
    return cfg, special, ""


def _plain_backend(path: str, cfg: dict, special: dict[str, str]) -> tuple[Tokenizer | None, str]:
    """(tokenizer.json's backend, "") when transformers would keep it as it is, with every special
    token and added token of the config in it, else (None, why not)."""
    from tokenizers import AddedToken, Tokenizer

    try:
        backend = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    except Exception as exc:  # noqa: BLE001 (tokenizers raises a bare Exception); transformers names the problem
        return None, f"tokenizers cannot read tokenizer.json ({exc})"
    if backend.post_processor is None or backend.truncation is not None or backend.padding is not None:
        return None, "tokenizer.json has no post-processor, or sets truncation or padding"
    if cfg.get("clean_up_tokenization_spaces") and type(backend.model).__name__ != "BPE":
        return None, "clean_up_tokenization_spaces on a non-BPE model"
    added = backend.get_added_tokens_decoder()
    contents = {t.content for t in added.values()}
    if not all(v in contents for v in special.values()):
        return None, "a special token is not in tokenizer.json"
    try:
        for idx, entry in (cfg.get("added_tokens_decoder") or {}).items():
            mine = added.get(int(idx))
            if mine is None or repr(mine) != repr(AddedToken(**{k: v for k, v in entry.items() if k != "__type"})):
                return None, f"added token {idx} differs from tokenizer.json"
    except (TypeError, ValueError, AttributeError):
        return None, "unreadable added_tokens_decoder"
    return backend, ""


def load_generation_tokenizer(
    name_or_path: str, fix: str = _PASS_TOKENIZER
) -> LightTokenizer | PreTrainedTokenizerBase:
    """The tokenizer `harness generate` (and eval's planning) uses: a `LightTokenizer` for a local
    directory that transformers would load unchanged (no transformers, no torch), else
    `load_tokenizer`'s (`fix` ends its error message)."""
    if os.path.isdir(name_or_path):
        backend, special, _why = _light_spec(name_or_path)
        if backend is not None:
            return LightTokenizer(backend, special, name_or_path)
    return load_tokenizer(name_or_path, fix)


def adds_bos(tokenizer) -> bool:
    """Whether encoding a text prepends BOS (the length rule counts it when it does)."""
    ids = tokenizer("a", add_special_tokens=True)["input_ids"]
    return tokenizer.bos_token_id is not None and len(ids) > 0 and ids[0] == tokenizer.bos_token_id


def num_special_tokens(tokenizer) -> int:
    """Tokens the tokenizer adds around any text (BOS, and EOS for some tokenizers)."""
    with_special = len(tokenizer("a", add_special_tokens=True)["input_ids"])
    without = len(tokenizer("a", add_special_tokens=False)["input_ids"])
    return with_special - without


def count_tokens(tokenizer, text: str) -> int:
    """tokens(text) as the model will see it, special tokens included."""
    return len(tokenizer(text, add_special_tokens=True)["input_ids"])


@lru_cache(maxsize=16)
def _fingerprint_cached(key: int, tokenizer) -> str:
    backend = tokenizer.backend_tokenizer.to_str()
    specials = json.dumps(
        {
            "special": tokenizer.special_tokens_map,
            "bos": tokenizer.bos_token_id,
            "eos": tokenizer.eos_token_id,
            "adds": num_special_tokens(tokenizer),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256((backend + specials).encode()).hexdigest()[:16]


def tokenizer_fingerprint(tokenizer) -> str:
    """A content hash of the tokenizer (vocab, merges, normaliser, special tokens)."""
    return _fingerprint_cached(id(tokenizer), tokenizer)
