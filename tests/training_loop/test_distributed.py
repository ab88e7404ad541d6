"""2 gloo processes = 1 process: FSDP2 (data parallel) and Ulysses (all_to_all_single) on CPU.

A further FSDP2 run is killed after step 1 and resumed from its gathered full state.

Every layout runs the real loop for 2 steps on the same global windows (2 per micro-batch); the
grad hook records full (unsharded) gradients before clipping. One process with batch 2 is the
reference. What is checked, and why it is split this way:

1. gradients agree with the reference's to fp32 reduction noise (the layouts sum the same terms
   in another order, and BLAS builds order their sums differently: Intel and AMD differ);
2. each run's final weights are AdamW applied to its *own* recorded gradients (a replay with the
   loop's own optimizer, scheduler and clipping): the optimizer step itself is elementwise, so
   this holds to a few ulps on any machine. The same replay of the reference's gradients must give
   the reference's weights, which checks the replay;
3. the final weights of a layout and of the reference agree to fp32 tolerance except where AdamW
   cannot be precise: it divides by sqrt(v), so on a coordinate whose gradient is as small as the
   gradient noise of (1), the noise alone can move the normalised update by up to its bound (the
   Cauchy-Schwarz bound of |m_hat / sqrt(v_hat)| for these betas, about 1 for two steps). There the
   allowed gap is derived, not tuned: 2 * sum_t lr_t * bound_t.
"""

from __future__ import annotations

import math
import os
import socket

import pytest

from .helpers import docs_pipeline, small_job

# (name, per-rank batch, sp degree, shard): dp=2 with batch 1 each, or sp=2 sharing batch 2.
LAYOUTS = [("fsdp-dp2", 1, 1, "fsdp"), ("ulysses-sp2-fsdp", 2, 2, "fsdp"), ("ulysses-sp2-replicas", 2, 2, "none")]
STEPS = 2
# Tolerances of the fp32 comparisons (1 and 3): relative to the largest gradient of a parameter,
# and allclose's for well-conditioned weights.
GRAD_RTOL = 1e-5
W_ATOL, W_RTOL = 1e-5, 1e-4
# The replay (2) differs from the loop only by how the CPU vectorises the same elementwise ops.
REPLAY_ATOL, REPLAY_RTOL = 1e-6, 1e-5


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


def _adam_step_bound(betas: tuple[float, float], t: int) -> float:
    """max |m_hat_t / sqrt(v_hat_t)| over all gradient sequences (Cauchy-Schwarz; eps only lowers it)."""
    b1, b2 = betas
    s = sum((b1 * b1 / b2) ** k for k in range(t))
    return (1 - b1) / (1 - b1**t) * math.sqrt(s * (1 - b2**t) / (1 - b2))


def _replay(model_dir, job, grads_by_step: dict) -> dict:
    """Final weights of AdamW applied to recorded gradients, with the loop's optimizer, scheduler and clipping."""
    import torch
    from transformers import AutoModelForCausalLM

    from training.loop import make_optimizer, make_scheduler

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    optimizer, params = make_optimizer(model, job), dict(model.named_parameters())
    scheduler = make_scheduler(optimizer, job)
    lrs = []
    for step in range(1, STEPS + 1):
        for n, p in params.items():
            p.grad = grads_by_step[step][n].clone()
        if job.optimizer.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), job.optimizer.max_grad_norm)
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return {"weights": {n: p.detach().clone() for n, p in params.items()}, "lrs": lrs}


def _assert_close(a, b, atol, rtol, what):
    import torch

    assert a.keys() <= b.keys() or b.keys() <= a.keys(), what
    for k in a.keys() & b.keys():
        err = (a[k] - b[k]).abs().max().item()
        assert torch.allclose(a[k], b[k], atol=atol, rtol=rtol), (*what, k, err)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["anchor"])
def test_two_gloo_processes_match_one(mode, tiny_llama_dir, corpus_docs, bpe_tokenizer, run_job, tmp_path):
    import torch
    import torch.multiprocessing as mp
    from safetensors.torch import load_file

    docs = corpus_docs[:60]
    anchor = bpe_tokenizer.bos_token_id
    mp.spawn(
        _worker, args=(2, _free_port(), str(tiny_llama_dir), docs, anchor, str(tmp_path), mode), nprocs=2, join=True
    )
    got = torch.load(tmp_path / "results.pt", weights_only=False)

    from training.loop import train

    ref_grads: dict = {}
    job = _job(tiny_llama_dir, tmp_path / "single", 2, mode)
    ref = train(job, pipeline=docs_pipeline(job, docs, anchor), progress=False, grad_hook=_record(ref_grads, "ref"))
    ref_w = load_file(f"{ref['checkpoints'][-1]}/model.safetensors")

    # (2) on the reference: the replay reproduces the single-process loop.
    replay_ref = _replay(tiny_llama_dir, job, ref_grads["ref"])
    _assert_close(replay_ref["weights"], ref_w, REPLAY_ATOL, REPLAY_RTOL, ("replay", "ref"))
    drift = 2 * sum(lr * _adam_step_bound(job.optimizer.betas, t) for t, lr in enumerate(replay_ref["lrs"], 1))

    for name, *_ in LAYOUTS:
        assert got[name]["losses"] == pytest.approx(ref["losses"], rel=1e-5), name
        # (1) gradients, and per coordinate whether AdamW resolves it. A relative gradient error r
        # changes the normalised update by at most about 2r times its bound, so the weight by at
        # most r * drift over the run: where that can exceed W_ATOL / 2 the coordinate is
        # ill-conditioned and only the drift bound applies.
        ill_conditioned = {}
        for step in range(1, STEPS + 1):
            for pname, g_ref in ref_grads["ref"][step].items():
                g = got[name]["grads"][step][pname]
                tol = GRAD_RTOL * max(1.0, g_ref.abs().max().item())
                assert (g - g_ref).abs().max().item() <= tol, (name, step, pname)
                noisy = (g - g_ref).abs() * (2 * drift / W_ATOL) > g_ref.abs()  # equal zeros: same update
                ill_conditioned[pname] = ill_conditioned.get(pname, noisy) | noisy
        # (2) the layout's optimizer step applied its own gradients.
        w = load_file(f"{got[name]['ckpts'][-1]}/model.safetensors")
        replay = _replay(tiny_llama_dir, job, got[name]["grads"])
        _assert_close(replay["weights"], w, REPLAY_ATOL, REPLAY_RTOL, ("replay", name))
        # (3) final weights against the reference's.
        assert w.keys() == ref_w.keys()
        for k in w:
            gap = (w[k] - ref_w[k]).abs()
            close = gap <= W_ATOL + W_RTOL * ref_w[k].abs()
            mask = ill_conditioned.get(k, torch.zeros_like(close))
            assert bool((close | mask).all()), (name, k, gap[~close].max().item())
            assert gap[mask].max().item() <= drift if mask.any() else True, (name, k, "beyond AdamW's drift bound")
    from training.logging import read_log

    assert got["resumed"]["resumed_from"] == 1
    resumed = [r["loss"] for r in read_log(tmp_path / "resumed" / "log.jsonl")]
    assert resumed == pytest.approx(ref["losses"], rel=1e-5)
    # Resuming from the gathered state replays the fsdp-dp2 run's own optimizer state exactly.
    a = load_file(f"{got['resumed']['ckpts'][-1]}/model.safetensors")
    _assert_close(a, load_file(f"{got['fsdp-dp2']['ckpts'][-1]}/model.safetensors"), 1e-6, 1e-5, ("resumed",))
