"""Checkpoint folders (save_pretrained directories, training runs' ckpt-N) and hub model names.

    --ckpts runs/anchor/ckpt-<1950..2000>    --ckpts 'runs/anchor/ckpt-*' --last 5
    --ckpts models/llama-base                --ckpts meta-llama/Llama-2-7b-hf@main (hub:NAME)

The fallback kind: every --ckpts item no other kind claims is read as a folder, glob, step range
or hub name (harness/models/checkpoints.py: selection, fingerprint, completeness). A folder is checked
before any work: tokenizer files present, config.json valid against the config schema
(harness/models/sources/config_schema.py), every safetensors header whole and its main matrices of the
shapes the config implies. A hub name is checked by its runner when it loads (it may be offline).
"""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import UserError
from harness.models.checkpoints import (
    Checkpoint,
    expand_item,
    hub_fingerprint,
    incomplete_reason,
    load_checkpoint,
    step_of,
    tokenizer_fingerprint,
)
from harness.models.sources.base import ModelSource, register_kind, warn_vanished


@register_kind
class CheckpointSource(ModelSource):
    kind = "checkpoint"
    priority = 100  # the fallback: asked after every other kind

    def __init__(self, checkpoint: Checkpoint, incomplete: str | None = None):
        super().__init__(checkpoint)
        self._incomplete = incomplete

    @classmethod
    def claims(cls, item: str) -> bool:
        return True

    @classmethod
    def expand(cls, item: str) -> list[ModelSource]:
        out: list[ModelSource] = []
        for path, local in expand_item(item):
            if not local:
                name = path
                ck = Checkpoint(
                    path=name, step=None, fingerprint=hub_fingerprint(name), training=None, local=False, model=name
                )
                out.append(cls(ck))
                continue
            try:
                why = incomplete_reason(path)
                if why is not None:  # not loadable: no fingerprint; select_sources skips it with a warning
                    out.append(
                        cls(Checkpoint(path=path, step=step_of(path), fingerprint="", training=None, local=True), why)
                    )
                else:
                    out.append(cls(load_checkpoint(path)))
            except (OSError, UserError):
                if Path(path).is_dir():
                    raise
                warn_vanished(path)  # matched, then deleted (a training run's --keep-last pruning it)
        return out

    def incomplete(self) -> str | None:
        return self._incomplete

    def check(self, backend: str) -> None:
        from harness.models.runners.common import check_tokenizer_present, check_weights, read_config
        from harness.models.sources.config_schema import check_config_and_shapes

        path = self.checkpoint.path
        if not self.checkpoint.local:
            return
        check_tokenizer_present(path)
        read_config(path)  # a garbage config.json is named as such, not as a tokenizer problem
        check_weights(path)  # damaged weights: an error now, not after other checkpoints ran
        check_config_and_shapes(Path(path))

    def tokenizer_id(self) -> tuple[str, str | None] | None:
        if not self.checkpoint.local:
            return None  # a hub model is not read here
        return ("files", tokenizer_fingerprint(self.checkpoint.path))

    def load_tokenizer(self, light: bool = False):
        from harness.models.tokenization import load_generation_tokenizer, load_tokenizer

        fix = "re-save the tokenizer beside the model (tokenizer.save_pretrained)"
        if light and self.checkpoint.local:
            return load_generation_tokenizer(self.checkpoint.path, fix)
        return load_tokenizer(self.checkpoint.path, fix)

    @classmethod
    def context_of(cls, path: str, max_model_len: int | None) -> int:
        from harness.models.runners.common import folder_context_length

        return folder_context_length(path, max_model_len)
