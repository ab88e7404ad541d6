"""Where the training loop's windows come from: the pipeline that turns data into model inputs,
and the window stream whose position a checkpoint saves.

    from training.windows import default_pipeline, WindowStream
    pipeline = default_pipeline(job, tokenizer)          # documents -> windows -> batches
    stream = WindowStream(pipeline.windows, epoch, index)  # resumes where a saved state stopped

The stream is a pure function of (data, seed, epoch), so a resumed run rebuilds it and skips the
windows already consumed (training.loop's module docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.core.errors import UserError
from training.config import TrainJob

if TYPE_CHECKING:
    from training.modes import Batch


@dataclass
class Pipeline:
    """How windows become model inputs; `default_pipeline` wires in training.packing/modes/attention."""

    windows: Callable[[int], Iterator]
    """epoch -> iterator of PackedWindow, the same every call for the same epoch."""
    build_batch: Callable[[list, str], Batch]
    """(windows, mode) -> Batch with input_ids, labels (-100 = no loss), position_ids, doc_ids."""
    forward_kwargs: Callable[[object, str], dict]
    """(batch, kernel) -> kwargs for model(**kw), the kernel's explicit mask or boundaries included."""
    gather_logits: Callable[[object, object, str], object]
    """(logits, batch, kernel) -> logits in window order (the anchor-copy varlen layout adds tokens)."""
    prepare_model: Callable[[object, str], None]
    """(model, kernel) -> None: selects the attention implementation on the model."""
    data_info: dict
    """What the checkpoint metadata records about the data (paths, fields, mixture)."""


def default_pipeline(job: TrainJob, tokenizer, *, report=print) -> Pipeline:
    """Documents (training.data, training.mixture) -> windows (training.packing) -> Batch (training.modes)."""
    from training import attention, modes
    from training.data import anchor_id, load_documents
    from training.mixture import parse_mixture
    from training.packing import pack

    d = job.data
    modes.check_mode(d.mode, d.interleave_chunks)
    aid = anchor_id(tokenizer)
    mixture, source_field = parse_mixture(d.mixture, d.seed) if d.mixture else (None, None)

    def raw_documents():
        for p in d.paths:
            yield from load_documents(
                p,
                tokenizer,
                text_field=d.text_field,
                domain_field=d.domain_tags,
                source_field=source_field,
                limit=d.max_docs,
            )

    _check_readable(job, tokenizer)

    def documents(epoch: int):
        if mixture is None:
            return raw_documents()
        from dataclasses import replace

        from training.mixture import build_mixture

        docs, rep = build_mixture(raw_documents(), replace(mixture, seed=mixture.seed + epoch))
        if epoch == 0 and report is not None:
            report(rep.table())
        return iter(docs)

    def windows(epoch: int):
        # Each epoch re-packs with a new seed: other chunk cuts and shuffles when interleaving.
        return pack(documents(epoch), d.window, aid, interleave_chunks=d.interleave_chunks, seed=d.seed + epoch)

    return Pipeline(
        windows=windows,
        build_batch=modes.build_batch,
        forward_kwargs=attention.forward_kwargs,
        gather_logits=attention.gather_logits,
        prepare_model=attention.prepare_model,
        data_info=_data_info(job),
    )


def _check_readable(job: TrainJob, tokenizer) -> None:
    """Fail on a bad path or field now, as one line, not at the first step: read one document of each path."""
    from training.data import load_documents

    d = job.data
    for p in d.paths:
        next(iter(load_documents(p, tokenizer, text_field=d.text_field, domain_field=d.domain_tags, limit=1)), None)


def _data_info(job: TrainJob) -> dict:
    """What harness_training.json records about the data."""
    d = job.data
    return {
        "paths": list(d.paths),
        "text_field": d.text_field,
        "domain_field": d.domain_tags,
        "mixture": d.mixture,
        "max_docs": d.max_docs,
        "batch_size": d.batch_size,
        "grad_accum": d.grad_accum,
    }


class WindowStream:
    """Windows in a fixed order across epochs, with a position that can be saved and restored."""

    def __init__(self, make: Callable[[int], Iterator], epoch: int = 0, index: int = 0):
        self._make = make
        self.epoch, self.index = epoch, 0
        self._it = iter(make(epoch))
        for _ in range(index):  # resume: the stream is deterministic, so skipping replays it exactly
            self.next()

    def next(self):
        for _ in range(2):
            try:
                w = next(self._it)
                self.index += 1
                return w
            except StopIteration:
                if self.index == 0:
                    raise UserError(
                        "the data yields no training window: check --data, --text-field and --max-docs"
                    ) from None
                self.epoch, self.index = self.epoch + 1, 0
                self._it = iter(self._make(self.epoch))
        raise AssertionError("unreachable")

    def position(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}
