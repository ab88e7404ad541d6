"""Decoding at a fixed width, one attention call per layer (harness/models/runners/decode.py, issues 28 and 37).

The claims: a prompt's logits at every decoding step depend on the prompt and the width alone, not on
the other prompts decoding beside it (their lengths included), its slot, or how many slots are busy;
a step makes one attention call and one cache append per layer; and the batched call equals each row
in its own call. References: the same prompt decoding alone in the pool (bitwise, bf16 and fp32);
each row in its own SDPA call with the same padding (`per-row-padded-512`: bitwise, bf16 and fp32);
each row against exactly its own keys, the kernel before issue 37 (`per-row`: fp32 logits to
rounding and equal greedy tokens, bf16 greedy tokens apart only at near ties); and a full forward
pass over the whole sequence with no cache (fp32, within 1e-4).
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


def _decode(model, prompts: dict, slots: dict, steps: int, width: int = WIDTH, kernel: str | None = None, take=()):
    """Admit prompts[tag] into slot slots[tag] (others empty), decode `steps` tokens; per tag: the
    logits of each step and the tokens. Tags in `take` take their prefix cache's buffers (no copy)."""
    from harness.models.runners.decode import DecodeRows
    from harness.models.runners.prefix import PrefixCache, PrefixEngine

    engine = PrefixEngine(model, None, 16, reuse=False)
    rows = DecodeRows(Recorder(model), width, eos_id=None, **({"kernel": kernel} if kernel else {}))
    with engine.model_attention(), torch.inference_mode():
        for tag in sorted(prompts, key=slots.__getitem__):
            cache = PrefixCache()
            first = int(engine.prefill(cache, prompts[tag], 0).argmax())
            while rows.slots.index(None) != slots[tag]:  # park a filler so the prompt lands in its slot
                rows.slots[rows.slots.index(None)] = False  # type: ignore[call-overload]
            rows.admit(cache, len(prompts[tag]), first, tag, room=steps + 1, take=tag in take)
        rows.slots = [s if s is not False else None for s in rows.slots]
        done = []
        for _ in range(steps):
            done += list(rows.step({tag: 10**9 for tag in prompts}))
    logits = {tag: [step[slots[tag]] for step in rows.model.logits] for tag in prompts}
    tokens = {row.tag: row.tokens for row in done + [r for r in rows.slots if r]}
    return logits, tokens


def _prompts(n: int, seed: int = 0, long: tuple[int, ...] = ()) -> dict:
    """n random prompts of 3-90 tokens; those in `long` of 520-1100 (past a 512-key block, so that
    rows beside them attend to keys padded to another multiple of 512)."""
    rng = random.Random(seed)
    return {k: [rng.randrange(5, 4000) for _ in range(rng.randrange(520, 1100) if k in long else rng.randrange(3, 90))]
            for k in range(n)}  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_rows_logits_do_not_depend_on_its_neighbours_slot_or_their_number(gqa_llama_dir, dtype):
    """Neighbours of other lengths pad a row's keys to another length (512 against 1024 here): the
    row's logits stay the same bits."""
    model = _model(gqa_llama_dir, dtype)
    prompts = _prompts(WIDTH, long=(1,))
    alone = {tag: _decode(model, {tag: prompts[tag]}, {tag: 0}, steps=5)[0][tag] for tag in prompts}
    rng = random.Random(1)
    for trial in range(3):
        slots = dict(zip(prompts, rng.sample(range(WIDTH), WIDTH)))
        busy = {tag: prompts[tag] for tag in rng.sample(sorted(prompts), rng.randrange(2, WIDTH + 1))}
        if trial == 0:
            busy = dict(prompts)  # the long prompt beside every short one at least once
        together = _decode(model, busy, slots, steps=5)[0]
        for tag in busy:
            assert all(torch.equal(a, b) for a, b in zip(alone[tag], together[tag])), (trial, tag)


def test_the_same_prompt_beside_different_neighbours_gives_the_same_tokens(gqa_llama_dir):
    """bf16, the width the runner uses: one prompt decoded beside three sets of other prompts."""
    from harness.models.runners.common import DECODE_ROWS

    model = _model(gqa_llama_dir, torch.bfloat16)
    tokens = []
    for seed in (5, 6, 7):
        prompts = _prompts(DECODE_ROWS, seed=seed, long=(seed % DECODE_ROWS,))
        prompts[0] = _prompts(1, seed=99)[0]
        tokens.append(_decode(model, prompts, {k: k for k in prompts}, steps=8, width=DECODE_ROWS)[1][0])
    assert tokens[0] == tokens[1] == tokens[2]


def test_a_step_makes_one_attention_call_and_one_cache_append_per_layer(gqa_llama_dir, monkeypatch):
    from harness.models.runners import rowcache

    model = _model(gqa_llama_dir, torch.float32)
    layers = model.config.num_hidden_layers
    sdpa_calls, appends = [], []
    real_sdpa = torch.nn.functional.scaled_dot_product_attention
    real_update = rowcache.RowsCache.update

    def sdpa(*args, **kwargs):
        sdpa_calls.append(args[0].shape[0])  # the rows in the call
        return real_sdpa(*args, **kwargs)

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        appends.append(layer_idx)
        return real_update(self, key_states, value_states, layer_idx, *args, **kwargs)

    prompts = _prompts(WIDTH, seed=8, long=(2,))
    from harness.models.runners.decode import DecodeRows

    steps = []
    real_step = DecodeRows.step

    def counted(self, max_new):
        sdpa_calls.clear()
        appends.clear()
        yield from real_step(self, max_new)
        steps.append((len(sdpa_calls), sorted(appends), set(sdpa_calls)))

    monkeypatch.setattr(DecodeRows, "step", counted)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", sdpa)
    monkeypatch.setattr(rowcache.RowsCache, "update", update)
    _decode(model, prompts, {k: k for k in prompts}, steps=4)
    assert len(steps) == 4
    for calls, appended, rows in steps:
        assert calls == layers and appended == list(range(layers)) and rows == {WIDTH}
    # the per-row reference makes one call per row and layer: the count can fail
    _decode(model, prompts, {k: k for k in prompts}, steps=1, kernel="per-row")
    assert steps[-1][0] == layers * WIDTH


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batched_rows_equal_each_row_in_its_own_call_bit_for_bit(gqa_llama_dir, dtype):
    """The batched call against every row in its own SDPA call over its own keys (padded to its own
    block, `per-row-padded-512`): the same logits, bit for bit, in fp32 and bf16, and so the same
    greedy tokens, with long and short rows side by side (neighbours pad each other to 1024)."""
    model = _model(gqa_llama_dir, dtype)
    for seed in range(3):
        prompts = _prompts(WIDTH, seed=20 + seed, long=(seed,))
        slots = {k: k for k in prompts}
        batched, batched_tokens = _decode(model, prompts, slots, steps=6)
        alone, alone_tokens = _decode(model, prompts, slots, steps=6, kernel="per-row-padded-512")
        assert batched_tokens == alone_tokens, seed
        for tag in prompts:
            assert all(torch.equal(a, b) for a, b in zip(batched[tag], alone[tag])), (seed, tag)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_batched_kernel_agrees_with_attending_each_row_alone(gqa_llama_dir, dtype):
    """The kernels sum in another order. fp32: logits equal to rounding and the same greedy tokens.
    bf16: logits within rounding, and greedy tokens equal wherever the per-row kernel's two best
    logits are further apart than the kernels' difference (a random model's bf16 logits have near
    ties: 1 of these 12 rows flips at one; SmolLM2's rate is in benchmarks/decode_agreement.py)."""
    model = _model(gqa_llama_dir, dtype)
    flips = 0
    for seed in range(3):
        prompts = _prompts(WIDTH, seed=10 + seed, long=(seed,))
        slots = {k: k for k in prompts}
        batched, batched_tokens = _decode(model, prompts, slots, steps=6)
        alone, alone_tokens = _decode(model, prompts, slots, steps=6, kernel="per-row")
        if dtype == torch.float32:
            assert batched_tokens == alone_tokens, seed
        for tag in prompts:
            # step s's logits follow token s: comparable up to the first step where the tokens part
            for got, ref in zip(batched[tag], alone[tag]):
                diff = float((got - ref).abs().max())
                assert diff < (1e-5 if dtype == torch.float32 else 0.05 * float(ref.abs().max())), (seed, tag)
                if int(got.argmax()) != int(ref.argmax()):
                    best, second = ref.topk(2).values.tolist()
                    assert best - second <= 2 * diff, (seed, tag)  # a near tie: the only way to part
                    flips += 1
                    break
    assert flips <= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_row_that_takes_the_prefix_cache_decodes_the_same_bits(gqa_llama_dir, dtype):
    """Short of memory a row takes the prefix cache's own buffers instead of a copy into the rows'
    head-major buffers: every logit is the same. 300 tokens: the row decodes in the prefix cache's
    seq-major buffer itself; 509: the 512-token buffer cannot hold the 6 new tokens, so it is grown
    to the row's need on admission."""
    model = _model(gqa_llama_dir, dtype)
    for n in (300, 509):
        prompt = {0: [random.Random(4).randrange(5, 4000) for _ in range(n)]}
        copied, copied_tokens = _decode(model, prompt, {0: 0}, steps=6)
        taken, taken_tokens = _decode(model, prompt, {0: 0}, steps=6, take={0})
        assert copied_tokens == taken_tokens
        assert all(torch.equal(a, b) for a, b in zip(copied[0], taken[0])), n


def test_taking_the_prefix_cache_copies_nothing_or_grows_once_to_the_need():
    from harness.models.runners.kvcache import KEY_BLOCK
    from harness.models.runners.prefix import PrefixCache
    from harness.models.runners.rowcache import RowsCache

    def prefix(n):
        cache = PrefixCache()
        for i in range(2):
            cache.update(torch.randn(1, 2, n, 8), torch.randn(1, 2, n, 8), i)
        return cache

    fits = prefix(300)
    rows = RowsCache(2, width=8, kernel="sdpa-padded-512")
    rows.adopt(fits, 310)
    assert rows.capacity == KEY_BLOCK and rows.keys[0].data_ptr() == fits.layers[0].buffers()[0].data_ptr()
    short = prefix(509)
    rows = RowsCache(2, width=8, kernel="sdpa-padded-512")
    rows.adopt(short, 516)
    assert (rows.slots, rows.capacity) == (1, 2 * KEY_BLOCK)  # once, to the need rounded to a block
    for i in range(2):
        assert torch.equal(rows.keys[i][0, :, :509], short.layers[i].keys[0])
        assert torch.equal(rows.values[i][0, :, :509], short.layers[i].values[0])


def test_the_rows_cache_holds_each_rows_keys_through_growth_and_says_what_growing_costs():
    from harness.models.runners.kvcache import KEY_BLOCK
    from harness.models.runners.prefix import PrefixCache
    from harness.models.runners.rowcache import RowsCache

    torch.manual_seed(0)
    layers, hk, d = 2, 2, 8
    per_token = layers * 2 * hk * d * 4  # fp32 keys and values of every layer

    def prefix(n):
        cache = PrefixCache()
        for i in range(layers):
            cache.update(torch.randn(1, hk, n, d), torch.randn(1, hk, n, d), i)
        return cache

    rows = RowsCache(layers, width=8, kernel="sdpa-padded-512")
    a, b, c = prefix(30), prefix(700), prefix(5)
    assert rows.growth_bytes(a, 0, 30 + 10) == KEY_BLOCK * per_token  # one slot, one block
    rows.put(0, a, 30, 10)
    assert (rows.slots, rows.capacity) == (1, KEY_BLOCK)
    # slot 1 and 700 + 10 tokens: two slots of two blocks, less the old buffers, plus one old layer
    old = KEY_BLOCK * per_token
    assert rows.growth_bytes(b, 1, 710) == 2 * 2 * KEY_BLOCK * per_token - old + old // layers
    rows.put(1, b, 700, 10)
    assert (rows.slots, rows.capacity) == (2, 2 * KEY_BLOCK)
    assert rows.growth_bytes(c, 0, 5 + 10) == 0  # a free slot inside the buffers costs nothing
    rows.put(4, c, 5, 10)  # slot 4: the buffers grow to the next power of two
    assert rows.slots == 8
    for slot, src, n in ((0, a, 30), (1, b, 700), (4, c, 5)):
        for i in range(layers):
            assert torch.equal(rows.keys[i][slot, :, :n], src.layers[i].keys[0])
            assert torch.equal(rows.values[i][slot, :, :n], src.layers[i].values[0])
            assert not rows.keys[i][slot, :, n:].any()  # zeroed past a row: finite under the mask
    # a step: every slot's key at its own position, a mask of whole blocks up to the longest row
    rows.begin_step([30, 700, 0, 0, 5, 0, 0, 0])
    k, v = torch.randn(8, hk, 1, d), torch.randn(8, hk, 1, d)
    keys, values = rows.update(k, v, 0)
    assert keys.tensor.shape == values.tensor.shape == (8, hk, 2 * KEY_BLOCK, d)
    assert keys.mask.shape == (8, 1, 1, 2 * KEY_BLOCK) and keys.lengths == [31, 701, 1, 1, 6, 1, 1, 1]
    assert torch.equal(rows.keys[0][1, :, 700], k[1, :, 0]) and torch.equal(rows.values[0][4, :, 5], v[4, :, 0])
    assert (keys.mask[:, 0, 0] == 0).sum(-1).tolist() == [31, 701, 1, 1, 6, 1, 1, 1]
    rows.clear()
    assert rows.slots == 0 and rows.growth_bytes(c, 0, 15) == KEY_BLOCK * per_token


def test_fp32_rows_match_a_full_pass_at_every_step(gqa_llama_dir):
    model = _model(gqa_llama_dir, torch.float32)
    prompts = _prompts(WIDTH, seed=2, long=(3,))
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
    width and the rows' attention kernel are record settings of the hf backend (so a changed width or
    kernel computes new records)."""
    from harness.models.runners import decode, hf
    from harness.models.runners.common import DECODE_ATTENTION
    from harness.models.runners.hf import HFRunner
    from harness.models.runners.kvcache import KEY_BLOCK
    from harness.models.runners.registry import backend_record_settings

    assert backend_record_settings("hf") == {"decode_rows": hf.DECODE_ROWS, "decode_attention": DECODE_ATTENTION}
    assert DECODE_ATTENTION == f"sdpa-padded-{KEY_BLOCK}" and DECODE_ATTENTION in decode.KERNELS
    assert backend_record_settings("vllm") == {}
    widths = []
    real = decode.DecodeRows.step

    def spy(self, max_new):
        widths.append(len(self.slots))
        return real(self, max_new)

    monkeypatch.setattr(decode.DecodeRows, "step", spy)
    runner = HFRunner(str(gqa_llama_dir), RunnerSettings(backend="hf", dtype="float32", batch_size=1))
    assert runner.engine is not None and runner.engine.kernel == DECODE_ATTENTION
    reqs = [GenerationRequest(f"Item {k} of the list is", 6) for k in range(11)]
    runner.generate(reqs)
    assert widths and set(widths) == {hf.DECODE_ROWS}
    runner.close()


def test_records_carry_the_width_and_another_width_computes_new_records(ckpt_series, tmp_path, monkeypatch):
    import json
    from dataclasses import replace

    from harness.cli import main
    from harness.models.runners import registry
    from harness.models.runners.common import DECODE_ATTENTION
    from harness.pipeline.store import read_store

    out = tmp_path / "out"
    argv = ["eval", "--ckpts", f"{ckpt_series}/ckpt-10", "--tasks", "niah_single_1", "--lengths", "1k"]
    argv += ["--samples", "2", "--out", str(out)]
    assert main(argv) == 0
    first = read_store(out / "samples.jsonl")[1]
    assert {r["settings"]["decode_rows"] for r in first} == {8}
    assert {r["settings"]["decode_attention"] for r in first} == {DECODE_ATTENTION}
    provenance = json.loads((out / "results.json").read_text())["provenance"]
    assert provenance["decode_rows"] == 8 and provenance["decode_attention"] == DECODE_ATTENTION
    from harness.models.runners import hf

    entry = registry._REGISTRY["hf"]
    settings = {"decode_rows": 4, "decode_attention": DECODE_ATTENTION}
    monkeypatch.setitem(registry._REGISTRY, "hf", replace(entry, record_settings=settings))
    monkeypatch.setattr(hf, "DECODE_ROWS", 4)
    assert main(argv) == 0
    records = read_store(out / "samples.jsonl")[1]
    assert len(records) == 2 * len(first)  # a changed width is a new identity: computed again
    assert json.loads((out / "results.json").read_text())["provenance"]["decode_rows"] == 4
    # another kernel is another identity too
    monkeypatch.setitem(registry._REGISTRY, "hf", replace(entry, record_settings={**settings, "decode_attention": "x"}))
    assert main(argv) == 0
    assert len(read_store(out / "samples.jsonl")[1]) == 3 * len(first)
    assert json.loads((out / "results.json").read_text())["provenance"]["decode_attention"] == "x"


def test_short_of_memory_rows_decode_first_then_take_the_cache_and_outputs_stay(gqa_llama_dir, monkeypatch):
    """With too little free memory for the rows' buffers to grow, the engine first finishes the rows
    decoding (their buffers go with the last), then hands the prefix cache itself to the row (reuse
    lost for the next prompt): the same tokens."""
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
    active, held = [], []
    real_step = decode.DecodeRows.step

    def spy(self, max_new):
        active.append(self.active)
        held.append(self.cache.slots)
        return real_step(self, max_new)

    monkeypatch.setattr(decode.DecodeRows, "step", spy)
    monkeypatch.setattr(decode, "free_bytes", lambda device: 0)  # no growth ever fits
    short, reused_short = run()
    assert short == plenty
    # one row at a time, each on the cache it was prefilled in
    assert reused_short == 0 and set(active) == {1} and set(held) == {1}


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


def test_cuda_free_memory_counts_what_the_allocator_holds_unused(monkeypatch):
    """Buffers torch freed stay reserved by its caching allocator, which the driver counts as used:
    the rows' memory rule reads the driver's free bytes plus that reserve (faked here: no GPU)."""
    from harness.models.runners import decode

    gib = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (3 * gib, 80 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 40 * gib)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 22 * gib)
    assert decode.free_bytes(torch.device("cuda")) == 21 * gib  # 3 free + 18 reserved, unused
    cpu = decode.free_bytes(torch.device("cpu"))
    assert cpu is None or cpu > 0


@pytest.mark.parametrize(("gib", "rows_held"), [(78, 2), (139, 4)])
def test_the_memory_rule_holds_2_rows_at_128k_on_an_h100_and_4_on_an_h200(monkeypatch, gib, rows_held):
    """Llama-3.1-8B at 128K (17.2 GB of keys and values a row, 16 GB of bf16 weights, the prefix
    cache's 17.2 GB kept for reuse) on the lent cards' memory (78 and 139 GiB): the rule admits rows
    while a growth fits 1.5 times with a margin, so 2 and 4 rows decode together, never the width's
    8 (docs/benchmarks.md). Tensors on the meta device: shapes and bytes, no memory."""
    from types import SimpleNamespace

    from harness.models.runners import decode
    from harness.models.runners.prefix import PrefixCache

    layers, kv_heads, dim, prompt, new = 32, 8, 128, 130_923, 128
    meta = torch.device("meta")
    prefix = PrefixCache()
    for i in range(layers):
        states = torch.empty(1, kv_heads, prompt, dim, dtype=torch.bfloat16, device=meta)
        prefix.update(states, states, i)
    prefix_bytes = sum(2 * layer.buffers()[0].numel() * 2 for layer in prefix.layers)
    assert prefix_bytes == 17_179_869_184  # grown by doubling to 131,072 tokens

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.empty(1, device=meta))
            self.config = SimpleNamespace(get_text_config=lambda: SimpleNamespace(num_hidden_layers=layers))

    rows = decode.DecodeRows(Model(), width=8, eos_id=None)

    def free(device):
        held = sum(k.numel() * 2 * 2 for k in rows.cache.keys)  # keys and values, bf16
        return (gib << 30) - 16_060_000_000 - prefix_bytes - held

    monkeypatch.setattr(decode, "free_bytes", free)
    admitted = 0
    while not rows.full() and rows.can_hold(rows.admit_bytes(prefix, prompt, new)):
        rows.admit(prefix, prompt, 0, admitted, room=new)
        admitted += 1
    assert admitted == rows_held
