"""Loading tokenizers and counting tokens the way the length rule counts them."""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache

from harness.errors import UserError

_PASS_TOKENIZER = "pass --tokenizer with a local tokenizer directory or a reachable hub name"


def load_tokenizer(name_or_path: str, fix: str = _PASS_TOKENIZER):
    """A Hugging Face tokenizer from a local directory or, when online, a hub name. `fix` ends the
    error message: commands without a --tokenizer flag (eval) name their own remedy."""
    from transformers import AutoTokenizer

    local = os.path.isdir(name_or_path)
    if not local and (
        os.sep in name_or_path and not name_or_path.count("/") == 1 or name_or_path.startswith((".", "~"))
    ):
        raise UserError(f"tokenizer not found: {name_or_path} is not a directory; {fix}")
    try:
        tok = AutoTokenizer.from_pretrained(
            name_or_path, local_files_only=local or bool(os.environ.get("HF_HUB_OFFLINE"))
        )
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load tokenizer {name_or_path!r} ({first}); {fix}") from None
    if not getattr(tok, "is_fast", False):
        raise UserError(
            f"tokenizer {name_or_path!r} has no fast (Rust) version; the length rule needs a fast tokenizer"
        )
    return tok


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
