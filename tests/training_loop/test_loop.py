"""The training loop: loss definition, token-averaged accumulation, golden curve, resume, checkpoints.

OMP_NUM_THREADS=1 pytest tests/training_loop -q
HARNESS_UPDATE_GOLDEN=1 pytest tests/training_loop/test_loop.py -k golden   # rewrite the golden curve
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from .helpers import small_job

GOLDEN = Path(__file__).parent / "golden" / "anchor_tiny_20steps.json"


def test_loss_sum_matches_brute_force():
    import torch

    from training.loop import loss_sum, shifted_targets

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 7, 11, generator=g)
    labels = torch.randint(0, 11, (2, 7), generator=g)
    labels[0, 3] = labels[1, 0] = labels[1, 5] = -100
    total, count = 0.0, 0
    for b in range(2):
        for t in range(6):  # logits at t predict the label at t + 1
            if labels[b, t + 1] != -100:
                total -= torch.log_softmax(logits[b, t].double(), -1)[labels[b, t + 1]].item()
                count += 1
    targets = shifted_targets(labels)
    assert int((targets != -100).sum()) == count == 10
    assert loss_sum(logits, targets).item() == pytest.approx(total, rel=1e-6)


def test_checkpoint_steps_last_k_every_s():
    from training.checkpointing import checkpoint_steps

    assert checkpoint_steps(2000, 10, 5) == [1960, 1970, 1980, 1990, 2000]
    assert checkpoint_steps(25, 10, 5) == [10, 20, 25]
    assert checkpoint_steps(6, 2, None) == [2, 4, 6]


def _first_windows(corpus_docs, anchor, window, n):
    from training.packing import pack

    from .helpers import _Doc

    it = pack((_Doc(ids, s) for ids, s in corpus_docs), window, anchor, seed=0)
    return [next(it) for _ in range(n)]


@pytest.mark.parametrize("mode", ["full", "intradoc", "intradoc-reset", "anchor"])
def test_first_step_loss_equals_dense_reference(mode, tiny_llama_dir, corpus_docs, bpe_tokenizer, run_job, tmp_path):
    """Step 1's logged loss = token-mean CE of the untouched model on the same windows, dense masks."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM

    from training.attention import forward_kwargs, prepare_model
    from training.modes import build_batch

    summary = run_job(small_job(tiny_llama_dir, tmp_path / "run", mode=mode, steps=1, grad_accum=2, batch_size=1))
    batch = build_batch(_first_windows(corpus_docs, bpe_tokenizer.bos_token_id, 128, 2), mode)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
    prepare_model(model, "dense")
    with torch.no_grad():
        logits = model(**forward_kwargs(batch, "dense")).logits
    keep = batch.labels[:, 1:] != -100
    ce = F.cross_entropy(logits[:, :-1][keep], batch.labels[:, 1:][keep], reduction="mean")
    assert summary["losses"][0] == pytest.approx(ce.item(), rel=1e-5)


def test_grad_accum_averages_over_tokens_not_micro_batches(
    tiny_llama_dir, corpus_docs, bpe_tokenizer, run_job, tmp_path
):
    """batch 2 x accum 1 and batch 1 x accum 2 give the same loss and gradients (windows differ in loss tokens)."""
    # Window 1 holds one 127-token document, window 2 several short ones: different loss-token counts.
    longest = max(corpus_docs, key=lambda d: len(d[0]))
    docs = [(longest[0][:126] + [bpe_tokenizer.eos_token_id], longest[1])] + sorted(
        corpus_docs, key=lambda d: len(d[0])
    )
    counts = [sum(w.loss_mask) for w in _first_windows(docs, bpe_tokenizer.bos_token_id, 128, 2)]
    assert counts[0] != counts[1]  # else a per-micro-batch mean would pass too
    grads = {}

    def hook(name):
        def _h(step, model):
            grads[name] = {n: p.grad.clone() for n, p in model.named_parameters()}

        return _h

    a = run_job(
        small_job(tiny_llama_dir, tmp_path / "a", steps=1, batch_size=2, grad_accum=1), docs, grad_hook=hook("a")
    )
    b = run_job(
        small_job(tiny_llama_dir, tmp_path / "b", steps=1, batch_size=1, grad_accum=2), docs, grad_hook=hook("b")
    )
    assert a["losses"][0] == pytest.approx(b["losses"][0], rel=1e-6)
    for n in grads["a"]:
        assert (grads["a"][n] - grads["b"][n]).abs().max() <= 1e-6 * max(1.0, grads["a"][n].abs().max().item()), n


def _golden_job(model_dir, out):
    return small_job(model_dir, out, mode="anchor", steps=20, batch_size=2, grad_accum=1, window=128, lr=1e-3, seed=0)


def test_golden_loss_curve(tiny_llama_dir, run_job, tmp_path):
    """A refactor must reproduce the committed curve (anchor mode, tiny Llama, generated corpus)."""
    losses = run_job(_golden_job(tiny_llama_dir, tmp_path / "run"))["losses"]
    assert len(losses) == 20
    if os.environ.get("HARNESS_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(
            json.dumps(
                {
                    "about": "loss per step: anchor mode, sdpa-doc, fp32, window 128, batch 2, lr 1e-3, seed 0, "
                    "tiny Llama (harness.models.embedded, hidden 64, 2 layers), training.corpus 120 docs seed 0 max_words 1500",
                    "losses": losses,
                },
                indent=1,
            )
            + "\n"
        )
    golden = json.loads(GOLDEN.read_text())["losses"]
    assert len(golden) == len(losses) == 20
    for step, (got, want) in enumerate(zip(losses, golden), start=1):
        assert got == pytest.approx(want, rel=1e-4), f"step {step}: {got} vs golden {want}"
    # The tiny model learns: the last steps' loss is well below the first steps'.
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.2
    assert all(math.isfinite(x) for x in losses)


def test_resume_reproduces_uninterrupted_curve(tiny_llama_dir, run_job, tmp_path):
    from training.logging import read_log

    full = run_job(small_job(tiny_llama_dir, tmp_path / "full", steps=8, save_state_every=3))["losses"]
    job = small_job(tiny_llama_dir, tmp_path / "killed", steps=8, save_state_every=3)
    first = run_job(job, stop_after=5)  # "killed" after step 5: the newest state is step 3
    assert len(first["losses"]) == 5
    again = run_job(job)
    assert again["resumed_from"] == 3
    logged = [row["loss"] for row in read_log(tmp_path / "killed" / "log.jsonl")]
    assert [row["step"] for row in read_log(tmp_path / "killed" / "log.jsonl")] == list(range(1, 9))
    assert logged == pytest.approx(full, rel=1e-9, abs=0)
    # Two newest states kept, named step-*, never ckpt-*.
    assert sorted(p.name for p in (tmp_path / "killed" / "state").iterdir() if p.is_dir()) == ["step-6", "step-8"]


def test_resume_with_other_settings_is_a_user_error(tiny_llama_dir, run_job, tmp_path):
    from harness.core.errors import UserError

    run_job(small_job(tiny_llama_dir, tmp_path / "run", steps=2, window=128))
    with pytest.raises(UserError, match="window"):
        run_job(small_job(tiny_llama_dir, tmp_path / "run", steps=4, window=64))


def test_checkpoints_written_once_and_loadable(tiny_llama_dir, run_job, tmp_path, monkeypatch):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from harness.models.sources import select_checkpoints
    from training import checkpointing

    calls = []
    real = checkpointing.save_checkpoint
    monkeypatch.setattr(checkpointing, "save_checkpoint", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    run = tmp_path / "run"
    run_job(
        small_job(tiny_llama_dir, run, steps=6, batch_size=1, grad_accum=2, save_every=2, keep_last=2, rope_theta=5e4)
    )
    assert calls == [4, 6]  # each written once, not once per micro-batch
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("ckpt-")) == ["ckpt-4", "ckpt-6"]
    ckpts = select_checkpoints(f"{run}/ckpt-<1..10>")
    assert [c.step for c in ckpts] == [4, 6]
    meta = ckpts[-1].training
    for key in (
        "schema_version",
        "mode",
        "window",
        "rope_theta",
        "step",
        "domain_tags",
        "interleave_chunks",
        "attention_kernel",
        "seed",
        "data",
        "package_version",
        "git_hash",
    ):
        assert key in meta, key
    assert (meta["mode"], meta["window"], meta["rope_theta"], meta["step"]) == ("anchor", 128, 5e4, 6)
    config = AutoConfig.from_pretrained(run / "ckpt-6")
    # The model had 8192 positions, the window was 128: the checkpoint keeps the model's context.
    assert AutoConfig.from_pretrained(tiny_llama_dir).max_position_embeddings == 8192
    assert config.max_position_embeddings == 8192
    assert config.rope_parameters["rope_theta"] == 5e4
    assert AutoTokenizer.from_pretrained(run / "ckpt-6").bos_token_id is not None
    model = AutoModelForCausalLM.from_pretrained(run / "ckpt-6", dtype=torch.float32)
    state = torch.load(run / "state" / "step-6" / "state.pt", weights_only=True)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state["model"][name]), name


def test_warmup_bf16_and_grad_checkpointing(tiny_llama_dir, run_job, tmp_path):
    """Linear warmup reaches lr at step W; grad checkpointing changes no gradient; bf16 autocast stays close."""
    from training.logging import read_log

    grads = {}

    def hook(name):
        def _h(step, model):
            if step == 1:
                grads[name] = {n: p.grad.clone() for n, p in model.named_parameters()}

        return _h

    run_job(small_job(tiny_llama_dir, tmp_path / "plain", steps=3, warmup=2), grad_hook=hook("plain"))
    assert [r["lr"] for r in read_log(tmp_path / "plain" / "log.jsonl")] == pytest.approx([5e-4, 1e-3, 1e-3])
    run_job(small_job(tiny_llama_dir, tmp_path / "ckpt", steps=1, grad_checkpointing=True), grad_hook=hook("gc"))
    for n, g in grads["plain"].items():
        assert (g - grads["gc"][n]).abs().max() <= 1e-6 * max(1.0, g.abs().max().item()), n
    fp32 = read_log(tmp_path / "plain" / "log.jsonl")[0]["loss"]
    bf16 = run_job(small_job(tiny_llama_dir, tmp_path / "bf16", steps=1, dtype="bf16"))["losses"][0]
    assert bf16 != fp32 and bf16 == pytest.approx(fp32, rel=1e-2)


def test_bf16_run_writes_bf16_checkpoint(tiny_llama_dir, run_job, tmp_path):
    import json as _json

    import torch
    from safetensors.torch import load_file

    run_job(small_job(tiny_llama_dir, tmp_path / "run", steps=1, dtype="bf16", save_every=1))
    weights = load_file(tmp_path / "run" / "ckpt-1" / "model.safetensors")
    state = torch.load(tmp_path / "run" / "state" / "step-1" / "state.pt", weights_only=True)
    assert all(t.dtype == torch.bfloat16 for t in weights.values())
    assert all(torch.equal(weights[k], state["model"][k].to(torch.bfloat16)) for k in weights)
    assert state["model"]["lm_head.weight"].dtype == torch.float32  # the resumable state keeps fp32 masters
    assert _json.loads((tmp_path / "run" / "ckpt-1" / "config.json").read_text())["dtype"] == "bfloat16"


@pytest.mark.parametrize(("positions", "window", "written"), [(512, 64, 512), (64, 128, 128)])
def test_checkpoint_context_is_the_larger_of_model_and_window(
    positions, window, written, bpe_tokenizer_dir, run_job, tmp_path
):
    """A model continued at a window shorter than its context keeps its context (issue 27 §7: SmolLM2's
    8192 positions continued at 1024 used to be written as 1024, and eval then refused 2K); a window
    longer than the model's context becomes the context."""
    from harness.models.embedded import build_tiny_llama
    from harness.models.runners.common import context_length

    base = build_tiny_llama(tmp_path / "base", bpe_tokenizer_dir, max_position_embeddings=positions)
    run_job(small_job(base, tmp_path / "run", steps=1, window=window, save_every=1))
    config = json.loads((tmp_path / "run" / "ckpt-1" / "config.json").read_text())
    assert config["max_position_embeddings"] == written
    assert context_length(str(tmp_path / "run" / "ckpt-1"), None) == written
    assert json.loads((tmp_path / "run" / "ckpt-1" / "harness_training.json").read_text())["window"] == window
