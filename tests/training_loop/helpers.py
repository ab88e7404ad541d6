"""Helpers shared by the training-loop tests (imported by conftest and the test modules)."""

from __future__ import annotations


class _Doc:
    def __init__(self, ids, source, tag_ids=None):
        self.ids, self.source, self.tag_ids = ids, source, tag_ids


def docs_pipeline(job, docs, anchor: int):
    """A Pipeline over pre-tokenized (ids, source) documents using the project's packing/modes/kernels."""
    from training import attention, modes
    from training.loop import Pipeline
    from training.packing import pack

    def windows(epoch):
        return pack(
            (_Doc(ids, src) for ids, src in docs),
            job.data.window,
            anchor,
            interleave_chunks=job.data.interleave_chunks,
            seed=job.data.seed + epoch,
        )

    return Pipeline(
        windows=windows,
        build_batch=modes.build_batch,
        forward_kwargs=attention.forward_kwargs,
        gather_logits=attention.gather_logits,
        prepare_model=attention.prepare_model,
        data_info={"paths": ["<test docs>"], "num_docs": len(docs)},
    )


def small_job(model_dir, out, **overrides):
    """A fp32 job small enough for CPU tests; overrides name fields of any component config."""
    from training.config import CheckpointConfig, DataConfig, ModelConfig, OptimizerConfig, ScheduleConfig, TrainJob

    parts = {
        "model": ModelConfig(path=str(model_dir), dtype="fp32", kernel="sdpa-doc"),
        "data": DataConfig(paths=["<test docs>"], mode="anchor", window=128, batch_size=2, grad_accum=1, seed=0),
        "optimizer": OptimizerConfig(lr=1e-3),
        "schedule": ScheduleConfig(steps=4),
        "checkpoint": CheckpointConfig(save_every=100, keep_last=1, save_state_every=None),
    }
    for key, value in overrides.items():
        for part in parts.values():
            if hasattr(part, key):
                setattr(part, key, value)
                break
        else:
            raise KeyError(key)
    return TrainJob(out=str(out), **parts)
