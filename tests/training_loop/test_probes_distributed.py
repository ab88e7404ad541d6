"""In-loop probes under 2 gloo processes (FSDP2 data parallel, Ulysses sequence parallel): the same
loss curve with probes on and off, probe values equal to one process's (to fp32 reduction noise of the
weights), and D on rank 0 equal, bit for bit, to the diagnostic on that layout's own checkpoint."""

from __future__ import annotations

import os
import socket

import pytest

from .helpers import docs_pipeline, small_job

LAYOUTS = [("fsdp-dp2", 1, 1, "fsdp"), ("ulysses-sp2-fsdp", 2, 2, "fsdp")]  # (name, per-rank batch, sp, shard)
STEPS, WINDOW = 2, 256


def _job(model_dir, out, batch_size, every):
    from training.config import ProbeConfig

    job = small_job(
        model_dir, out, steps=STEPS, batch_size=batch_size, window=WINDOW, save_every=1, keep_last=None, dtype="fp32"
    )
    job.probes = ProbeConfig(every=every, lengths=[160, 256], depths=[50.0])
    return job


def _worker(rank, world, port, model_dir, docs, anchor, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch

    from training.distributed import setup
    from training.loop import train

    torch.set_num_threads(1)
    ctx = None
    for name, batch, sp, shard in LAYOUTS:
        for every in (1, 0):
            ctx = setup(rank, world, sp_size=sp, shard=shard)
            job = _job(model_dir, f"{out_dir}/{name}-{every}", batch, every)
            train(job, pipeline=docs_pipeline(job, docs, anchor), dist=ctx, progress=False)
    ctx._owns_group = True
    ctx.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_probes_under_two_processes(tiny_llama_dir, corpus_docs, bpe_tokenizer, tmp_path):
    import torch
    import torch.multiprocessing as mp

    from harness.commands.diagnose import _load_model
    from harness.diagnose.rope import Settings, measure
    from training.logging import read_log
    from training.loop import train
    from training.probe_set import FILE_NAME, ProbeSetFile

    docs, anchor = corpus_docs[:60], bpe_tokenizer.bos_token_id
    mp.spawn(_worker, args=(2, _free_port(), str(tiny_llama_dir), docs, anchor, str(tmp_path)), nprocs=2, join=True)
    job = _job(tiny_llama_dir, tmp_path / "single", 2, 1)
    train(job, pipeline=docs_pipeline(job, docs, anchor), progress=False)
    ref = read_log(tmp_path / "single" / "log.jsonl")
    for name, *_ in LAYOUTS:
        on, off = read_log(tmp_path / f"{name}-1" / "log.jsonl"), read_log(tmp_path / f"{name}-0" / "log.jsonl")
        assert [r["loss"] for r in on] == [r["loss"] for r in off], name  # bit for bit within the layout
        assert (tmp_path / f"{name}-1" / FILE_NAME).read_bytes() == (tmp_path / "single" / FILE_NAME).read_bytes()
        for got, want in zip(on, ref):
            for key in want:
                if key.startswith(("probe_needle", "probe_pos")):
                    assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-4), (name, key)
        window = ProbeSetFile.model_validate_json((tmp_path / f"{name}-1" / FILE_NAME).read_text()).rope_window
        model = _load_model(str(tmp_path / f"{name}-1" / f"ckpt-{STEPS}"), "bf16", torch.device("cpu"))
        settings = Settings(
            shifts=(0,), delta2=16, seq_len=len(window), logit_lengths=(), kernel="eager", sources=False
        )
        assert on[-1]["probe_rope/D_bf16"] == measure(model, [window], settings, "bf16", progress=False)["D"]["mean"][0]
