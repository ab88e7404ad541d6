"""Planning beside a training run that prunes its checkpoints (`harness train --keep-last`): a
checkpoint deleted while this run reads it is skipped with one line, whichever read meets the
hole, never named as a broken tokenizer or config (issue 49: "tokenizer not found", "checkpoints
use different tokenizers", "cannot load the config" for a folder that was only deleted).

    from harness.pipeline.pruned import same_tokenizer, first_tokenizer, contexts_of
    sources = same_tokenizer(sources, spec)
    sources, tokenizer = first_tokenizer(sources, spec, light=True)
    sources, contexts = contexts_of(sources, spec, max_model_len)

Each keeps the sources still there (harness.models.sources.base.still_there: a UserError naming
--keep-last when none is left); an error of a source that is still there is raised as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from harness.core.errors import UserError

T = TypeVar("T")


def _retry(sources: list, spec: str, read: Callable[[list], T]) -> tuple[list, T]:
    """read(sources), again without the sources deleted meanwhile whenever it fails on one."""
    from harness.models.sources.base import still_there, vanished

    while True:
        sources = still_there(sources, spec)
        try:
            return sources, read(sources)
        except UserError:
            if not any(vanished(s) for s in sources):
                raise
            # the failure met a deleted folder: still_there drops it (one line) and the read is redone


def same_tokenizer(sources: list, spec: str) -> list:
    """check_same_tokenizer of the sources still there."""
    from harness.models.sources import check_same_tokenizer

    return _retry(sources, spec, check_same_tokenizer)[0]


def first_tokenizer(sources: list, spec: str, light: bool) -> tuple[list, Any]:
    """(sources still there, the first one's tokenizer)."""
    return _retry(sources, spec, lambda alive: alive[0].load_tokenizer(light=light))


def contexts_of(sources: list, spec: str, max_model_len: int | None) -> tuple[list, dict[str, int]]:
    """(sources still there, {fingerprint: context length})."""
    return _retry(
        sources,
        spec,
        lambda alive: {s.checkpoint.fingerprint: s.context_length(max_model_len) for s in alive},
    )
