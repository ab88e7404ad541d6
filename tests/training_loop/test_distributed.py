"""2 gloo processes = 1 process: FSDP2 (data parallel) and Ulysses (all_to_all_single) on CPU.

A further FSDP2 run is killed after step 1 and resumed from its gathered full state.

Every layout runs the real loop for 2 steps on the same global windows (2 per micro-batch); the
grad hook records full (unsharded) gradients before clipping. One process with batch 2 is the
reference: losses and gradients must agree to fp32 tolerance.
"""

from __future__ import annotations

import os
import socket

import pytest

from .helpers import docs_pipeline, small_job

# (name, per-rank batch, sp degree, shard): dp=2 with batch 1 each, or sp=2 sharing batch 2.
LAYOUTS = [("fsdp-dp2", 1, 1, "fsdp"), ("ulysses-sp2-fsdp", 2, 2, "fsdp"), ("ulysses-sp2-replicas", 2, 2, "none")]
STEPS = 2


def _job(model_dir, out, batch_size, mode):
    return small_job(
        model_dir, out, steps=STEPS, batch_size=batch_size, mode=mode, window=128, save_every=STEPS, keep_last=1
    )


def _record(store: dict, name: str):
    def hook(step, model):
        grads = {}
        for n, p in model.named_parameters():
            g = p.grad
            grads[n] = (g.full_tensor() if hasattr(g, "full_tensor") else g).detach().clone()
        store.setdefault(name, {})[step] = grads

    return hook


def _worker(rank, world, port, model_dir, docs, anchor, out_dir, mode):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch

    from training.distributed import setup
    from training.loop import train

    torch.set_num_threads(1)
    results = {}
    ctx = None
    for name, batch, sp, shard in LAYOUTS:
        ctx = setup(rank, world, sp_size=sp, shard=shard)
        job = _job(model_dir, f"{out_dir}/{name}", batch, mode)
        grads = {}
        summary = train(
            job, pipeline=docs_pipeline(job, docs, anchor), dist=ctx, progress=False, grad_hook=_record(grads, name)
        )
        results[name] = {"losses": summary["losses"], "grads": grads[name], "ckpts": summary["checkpoints"]}
    # Resume under FSDP: killed after step 1 (full state gathered at step 1), re-run to the end.
    ctx = setup(rank, world, sp_size=1, shard="fsdp")
    job = _job(model_dir, f"{out_dir}/resumed", 1, mode)
    job.checkpoint.save_state_every = 1
    train(job, pipeline=docs_pipeline(job, docs, anchor), dist=ctx, progress=False, stop_after=1)
    again = train(job, pipeline=docs_pipeline(job, docs, anchor), dist=ctx, progress=False)
    results["resumed"] = {"resumed_from": again["resumed_from"], "ckpts": again["checkpoints"]}
    if rank == 0:
        torch.save(results, f"{out_dir}/results.pt")
    ctx._owns_group = True
    ctx.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["anchor"])
def test_two_gloo_processes_match_one(mode, tiny_llama_dir, corpus_docs, bpe_tokenizer, run_job, tmp_path):
    import torch
    import torch.multiprocessing as mp

    docs = corpus_docs[:60]
    anchor = bpe_tokenizer.bos_token_id
    mp.spawn(
        _worker, args=(2, _free_port(), str(tiny_llama_dir), docs, anchor, str(tmp_path), mode), nprocs=2, join=True
    )
    got = torch.load(tmp_path / "results.pt", weights_only=False)

    from training.loop import train

    ref_grads = {}
    job = _job(tiny_llama_dir, tmp_path / "single", 2, mode)
    ref = train(job, pipeline=docs_pipeline(job, docs, anchor), progress=False, grad_hook=_record(ref_grads, "ref"))
    for name, *_ in LAYOUTS:
        assert got[name]["losses"] == pytest.approx(ref["losses"], rel=1e-5), name
        for step in range(1, STEPS + 1):
            for pname, g_ref in ref_grads["ref"][step].items():
                g = got[name]["grads"][step][pname]
                tol = 1e-5 * max(1.0, g_ref.abs().max().item())
                assert (g - g_ref).abs().max().item() <= tol, (name, step, pname)
        # The unsharded weights of the final checkpoint equal the single-process run's.
        from safetensors.torch import load_file

        a = load_file(f"{got[name]['ckpts'][-1]}/model.safetensors")
        b = load_file(f"{ref['checkpoints'][-1]}/model.safetensors")
        assert a.keys() == b.keys()
        for k in a:
            assert torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-4), (name, k)
    from training.logging import read_log

    assert got["resumed"]["resumed_from"] == 1
    resumed = [r["loss"] for r in read_log(tmp_path / "resumed" / "log.jsonl")]
    assert resumed == pytest.approx(ref["losses"], rel=1e-5)
    a = load_file(f"{got['resumed']['ckpts'][-1]}/model.safetensors")
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-4), ("resumed", k)
