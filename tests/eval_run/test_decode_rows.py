"""Decoding at a fixed width (harness/models/runners/decode.py, issue 28 item 2).

The claim: a prompt's logits at every decoding step depend on the prompt and the width alone, not on
the other prompts decoding beside it, its slot, or how many slots are busy. References: the same
prompt decoding alone in the pool (bitwise, bf16 and fp32), and a full forward pass over the whole
sequence with no cache (fp32, within 1e-4).
"""

from __future__ import annotations

import random

import pytest
import torch

from harness.models.runners.base import GenerationRequest, RunnerSettings

WIDTH = 4


@pytest.fixture(scope="module")
def gqa_llama_dir(tmp_path_factory, bpe_tokenizer_dir):
    from harness.models.embedded import build_tiny_llama

    return build_tiny_llama(
        tmp_path_factory.mktemp("gqa-llama"), bpe_tokenizer_dir, hidden_size=128, num_layers=3, num_heads=4,
        num_kv_heads=2,
    )  # fmt: skip


def _model(path, dtype):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, attn_implementation="sdpa").eval()


class Recorder:
    """The model, keeping every step's logits per row (the pool calls it like the model)."""

    def __init__(self, model):
        self.model, self.config, self.logits = model, model.config, []
        self.forward = model.forward

    def parameters(self):
        return self.model.parameters()

    def __call__(self, **kwargs):
        out = self.model(**kwargs)
        self.logits.append(out.logits[:, -1].float().clone())
        return out


def _decode(model, prompts: dict, slots: dict, steps: int, width: int = WIDTH, head_major: bool = True):
    """Admit prompts[tag] into slot slots[tag] (others empty), decode `steps` tokens; per tag: the
    logits of each step and the tokens."""
    from harness.models.runners.decode import DecodeRows
    from harness.models.runners.prefix import PrefixCache, PrefixEngine

    engine = PrefixEngine(model, None, 16, reuse=False)
    rows = DecodeRows(Recorder(model), width, eos_id=None, head_major=head_major)
    with engine.model_attention(), torch.inference_mode():
        for tag in sorted(prompts, key=slots.__getitem__):
            cache = PrefixCache()
            first = int(engine.prefill(cache, prompts[tag], 0).argmax())
            while rows.slots.index(None) != slots[tag]:  # park a filler so the prompt lands in its slot
                rows.slots[rows.slots.index(None)] = False  # type: ignore[call-overload]
            rows.admit(cache, len(prompts[tag]), first, tag)
        rows.slots = [s if s is not False else None for s in rows.slots]
        done = []
        for _ in range(steps):
            done += list(rows.step({tag: 10**9 for tag in prompts}))
    logits = {tag: [step[slots[tag]] for step in rows.model.logits] for tag in prompts}
    tokens = {row.tag: row.tokens for row in done + [r for r in rows.slots if r]}
    return logits, tokens


def _prompts(n: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    return {k: [rng.randrange(5, 4000) for _ in range(rng.randrange(3, 90))] for k in range(n)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_rows_logits_do_not_depend_on_its_neighbours_slot_or_their_number(gqa_llama_dir, dtype):
    model = _model(gqa_llama_dir, dtype)
    prompts = _prompts(WIDTH)
    alone = {tag: _decode(model, {tag: prompts[tag]}, {tag: 0}, steps=5)[0][tag] for tag in prompts}
    rng = random.Random(1)
    for trial in range(3):
        slots = dict(zip(prompts, rng.sample(range(WIDTH), WIDTH)))
        busy = {tag: prompts[tag] for tag in rng.sample(sorted(prompts), rng.randrange(2, WIDTH + 1))}
        together = _decode(model, busy, slots, steps=5)[0]
        for tag in busy:
            assert all(torch.equal(a, b) for a, b in zip(alone[tag], together[tag])), (trial, tag)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_rows_cache_layout_changes_no_bit(gqa_llama_dir, dtype):
    """Rows keep their caches head-major (kvcache.RowLayer) for speed; laid out as the prefix cache
    (seq-major, what a row that takes the prefix cache's buffers decodes from) every logit is the same.
    One prompt is longer than a kernel block (512 keys) and outgrows its first buffer while decoding."""
    model = _model(gqa_llama_dir, dtype)
    prompts = _prompts(WIDTH, seed=3)
    prompts[0] = [random.Random(4).randrange(5, 4000) for _ in range(700)]
    slots = {k: k for k in prompts}
    head, head_tokens = _decode(model, prompts, slots, steps=5, head_major=True)
    seq, seq_tokens = _decode(model, prompts, slots, steps=5, head_major=False)
    assert head_tokens == seq_tokens
    for tag in prompts:
        assert all(torch.equal(a, b) for a, b in zip(head[tag], seq[tag])), tag


def test_a_row_layer_holds_what_it_was_given_through_growth_and_truncation():
    from harness.models.runners.kvcache import GrowingLayer, RowLayer

    torch.manual_seed(0)
    row, ref = RowLayer(), GrowingLayer()
    for n in (3, 600, 1, 1, 400):  # past the first 512-token buffer, then past its double
        k, v = torch.randn(1, 2, n, 8), torch.randn(1, 2, n, 8)
        for layer in (row, ref):
            keys, values = layer.update(k, v)
        assert torch.equal(row.keys, ref.keys) and torch.equal(row.values, ref.values)
        assert row.keys.stride(-1) == 1 and row.keys[0, 0].is_contiguous()  # each head one contiguous run
    row.truncate(10)
    k, v = torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 8)
    keys, values = row.update(k, v)
    assert keys.shape[2] == 11 and torch.equal(keys[:, :, 10:], k)
    assert torch.equal(values[:, :, :3], ref.values[:, :, :3])


def test_fp32_rows_match_a_full_pass_at_every_step(gqa_llama_dir):
    model = _model(gqa_llama_dir, torch.float32)
    prompts = _prompts(WIDTH, seed=2)
    logits, tokens = _decode(model, prompts, {k: k for k in prompts}, steps=6)
    for tag, ids in prompts.items():
        seq = list(ids)
        for step, got in enumerate(logits[tag]):
            seq.append(tokens[tag][step])  # the token fed at this step
            with torch.inference_mode():
                full = model(torch.tensor([seq])).logits[0, -1].float()
            assert (got - full).abs().max() < 1e-4
            assert tokens[tag][step + 1] == int(got.argmax())  # greedy: the token of the next step


def test_the_runner_decodes_at_its_width_and_says_so_in_every_record(gqa_llama_dir, monkeypatch):
    """The hf runner's engine decodes DECODE_ROWS rows per step whatever --batch-size is, and the
    width is a record setting of the hf backend (so a changed width computes new records)."""
    from harness.models.runners import decode, hf
    from harness.models.runners.hf import HFRunner
    from harness.models.runners.registry import backend_record_settings

    assert backend_record_settings("hf") == {"decode_rows": hf.DECODE_ROWS}
    assert backend_record_settings("vllm") == {}
    widths = []
    real = decode.DecodeRows.step

    def spy(self, max_new):
        widths.append(len(self.slots))
        return real(self, max_new)

    monkeypatch.setattr(decode.DecodeRows, "step", spy)
    runner = HFRunner(str(gqa_llama_dir), RunnerSettings(backend="hf", dtype="float32", batch_size=1))
    reqs = [GenerationRequest(f"Item {k} of the list is", 6) for k in range(11)]
    runner.generate(reqs)
    assert widths and set(widths) == {hf.DECODE_ROWS}
    runner.close()


def test_records_carry_the_width_and_another_width_computes_new_records(ckpt_series, tmp_path, monkeypatch):
    import json
    from dataclasses import replace

    from harness.cli import main
    from harness.models.runners import registry
    from harness.pipeline.store import read_store

    out = tmp_path / "out"
    argv = ["eval", "--ckpts", f"{ckpt_series}/ckpt-10", "--tasks", "niah_single_1", "--lengths", "1k"]
    argv += ["--samples", "2", "--out", str(out)]
    assert main(argv) == 0
    first = read_store(out / "samples.jsonl")[1]
    assert {r["settings"]["decode_rows"] for r in first} == {8}
    assert json.loads((out / "results.json").read_text())["provenance"]["decode_rows"] == 8
    from harness.models.runners import hf

    entry = registry._REGISTRY["hf"]
    monkeypatch.setitem(registry._REGISTRY, "hf", replace(entry, record_settings={"decode_rows": 4}))
    monkeypatch.setattr(hf, "DECODE_ROWS", 4)
    assert main(argv) == 0
    records = read_store(out / "samples.jsonl")[1]
    assert len(records) == 2 * len(first)  # a changed width is a new identity: computed again
    assert json.loads((out / "results.json").read_text())["provenance"]["decode_rows"] == 4


def test_short_of_memory_rows_decode_first_then_take_the_cache_and_outputs_stay(gqa_llama_dir, monkeypatch):
    """With too little free memory for a row's copy, the engine first finishes the rows decoding,
    then hands the prefix cache itself to the row (reuse lost for the next prompt): the same tokens."""
    from harness.models.runners import decode
    from harness.models.runners.prefix import PrefixEngine

    model = _model(gqa_llama_dir, torch.bfloat16)
    rng = random.Random(4)
    stem = [rng.randrange(5, 4000) for _ in range(80)]
    prompts = [stem[: rng.randrange(20, 80)] + [rng.randrange(5, 4000) for _ in range(5)] for _ in range(9)]

    def run():
        done = {g.index: g for g in PrefixEngine(model, None, 16, reuse=True, rows=WIDTH).run(prompts, [5] * 9)}
        return [done[i].tokens for i in range(9)], sum(g.reused_tokens for g in done.values())

    plenty, reused = run()
    assert reused > 0
    active = []
    real_step = decode.DecodeRows.step

    def spy(self, max_new):
        active.append(self.active)
        return real_step(self, max_new)

    monkeypatch.setattr(decode.DecodeRows, "step", spy)
    monkeypatch.setattr(decode, "free_bytes", lambda device: 0)  # no copy ever fits
    short, reused_short = run()
    assert short == plenty
    assert reused_short == 0 and set(active) == {1}  # one row at a time, each on the cache it was prefilled in


def test_cudnn_attention_is_off_inside_the_engine_on_cuda_only():
    """cuDNN's SDPA builds a plan per new key length, and every decoding step has one (67 ms against
    6.7 ms a step on an H200, benchmarks/RESULTS.md): the engine's attention runs without it on CUDA.
    The flags are process-wide, so this checks them on any machine; CPU leaves them alone."""
    import torch

    from harness.models.runners.prefix import _no_cudnn_attention

    before = torch.backends.cuda.cudnn_sdp_enabled()
    with _no_cudnn_attention(torch.device("cuda")):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before
    with _no_cudnn_attention(torch.device("cpu")):
        assert torch.backends.cuda.cudnn_sdp_enabled() == before
