"""Shared-prefix reuse in the transformers runner (harness/models/runners/prefix.py, issue 28).

References are independent of the engine: a full forward pass over the whole sequence at every step
(no cache, no chunks, no reuse) for logits and greedy tokens, transformers' own generate on one
unpadded row, and a brute-force search over all earlier prompts for the reusable prefix.
"""

from __future__ import annotations

import random

import pytest
import torch

from harness.models.runners.base import GenerationRequest, RunnerSettings

CHUNK = 16  # a small grid, so that prompts of ~100-300 tokens share several chunks


@pytest.fixture(scope="module")
def gqa_llama_dir(tmp_path_factory, bpe_tokenizer_dir):
    """3 layers, 4 query heads on 2 key/value heads (grouped-query attention, as SmolLM2 has)."""
    from harness.models.embedded import build_tiny_llama

    return build_tiny_llama(
        tmp_path_factory.mktemp("gqa-llama"),
        bpe_tokenizer_dir,
        hidden_size=128,
        num_layers=3,
        num_heads=4,
        num_kv_heads=2,
    )


def _model(path, dtype):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, attn_implementation="sdpa").eval()


def _prompts(seed: int = 0) -> list[list[int]]:
    """Token prompts with real shared prefixes (a common stem cut at many points), duplicates, a
    prompt that is a prefix of another, lengths on and off the grid, and unrelated ones."""
    rng = random.Random(seed)
    stem = [rng.randrange(5, 4000) for _ in range(200)]
    out = [stem[:cut] + [rng.randrange(5, 4000) for _ in range(rng.randrange(1, 60))] for cut in (0, 5, 16, 40, 95, 96)]
    out += [stem[:150], stem[:150], stem[:64], stem[:200], [rng.randrange(5, 4000) for _ in range(37)], stem[:1]]
    rng.shuffle(out)
    return out


def _full_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0, -1].float()


def _greedy_by_hand(model, ids: list[int], max_new: int, eos: int | None) -> list[int]:
    new: list[int] = []
    for _ in range(max_new):
        tok = int(_full_logits(model, ids + new).argmax())
        if tok == eos:
            break
        new.append(tok)
    return new


def _engine_logits(engine, prompts):
    """Last-position logits of every prompt as the engine computes them in a run (reuse as planned)."""
    from harness.models.runners.prefix import PrefixCache, reuse_plan

    order, reused = reuse_plan(prompts, engine.chunk, engine.reuse)
    cache, out = PrefixCache(), {}
    with engine.model_attention(), torch.inference_mode():
        for k, i in enumerate(order):
            cache.truncate(reused[k] * engine.chunk)
            out[i] = engine.prefill(cache, prompts[i], reused[k] * engine.chunk).float()
            engine._forward(cache, [7, 8])  # decoded tokens land after the prompt and are cut away
    return out


def test_reuse_plan_takes_every_chunk_any_earlier_prompt_shares():
    from harness.models.runners.prefix import reuse_plan

    def lcp(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    rng = random.Random(1)
    for trial in range(60):
        stems = [[rng.randrange(3) for _ in range(rng.randrange(0, 40))] for _ in range(3)]
        prompts = [rng.choice(stems)[: rng.randrange(0, 40)] + [rng.randrange(3) for _ in range(rng.randrange(1, 9))]]
        prompts += [rng.choice(stems) + [rng.randrange(3) for _ in range(rng.randrange(1, 9))] for _ in range(8)]
        chunk = rng.choice([1, 2, 4, 8])
        order, reused = reuse_plan(prompts, chunk, reuse=True)
        assert sorted(order) == list(range(len(prompts)))
        for k, i in enumerate(order):
            # brute force: the most full grid chunks any earlier prompt shares, never the last token's chunk
            best = max([min(lcp(prompts[j], prompts[i]), len(prompts[i]) - 1) // chunk for j in order[:k]], default=0)
            assert reused[k] == best
        assert reuse_plan(prompts, chunk, reuse=False)[1] == [0] * len(prompts)


@pytest.mark.parametrize("merge", ["lse", "lower_right"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reuse_gives_bit_identical_logits_and_fp32_matches_a_full_pass(gqa_llama_dir, dtype, merge, monkeypatch):
    """Both ways a chunk attends to the cache: CPU's log-sum-exp merge, and the lower-right causal
    bias other devices use (forced here on CPU, where PyTorch materialises its mask)."""
    from harness.models.runners import prefix
    from harness.models.runners.prefix import PrefixEngine

    if merge == "lower_right":
        monkeypatch.setattr(prefix, "LSE_MERGE_DEVICES", set())
    model = _model(gqa_llama_dir, dtype)
    prompts = _prompts()
    on = _engine_logits(PrefixEngine(model, None, CHUNK, reuse=True), prompts)
    off = _engine_logits(PrefixEngine(model, None, CHUNK, reuse=False), prompts)
    assert all(torch.equal(on[i], off[i]) for i in range(len(prompts)))
    for i, ids in enumerate(prompts):
        full = _full_logits(model, ids)
        if dtype == torch.float32:
            assert (on[i] - full).abs().max() < 1e-4
        else:  # bf16: the grid and the merge round differently; close, not equal
            assert (on[i] - full).abs().max() < 0.05 * full.abs().max()


def test_greedy_tokens_equal_a_full_pass_per_step_and_transformers_generate(gqa_llama_dir):
    from harness.models.runners.prefix import PrefixEngine

    model = _model(gqa_llama_dir, torch.float32)
    prompts, eos = _prompts(), 3
    engine = PrefixEngine(model, eos, CHUNK, reuse=True)
    done = {g.index: g for g in engine.run(prompts, [9] * len(prompts))}
    assert sum(g.reused_tokens for g in done.values()) >= 6 * CHUNK  # the stem is shared, and reused
    for i, ids in enumerate(prompts):
        assert done[i].tokens == _greedy_by_hand(model, ids, 9, eos)
        with torch.inference_mode():
            gen = model.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), do_sample=False,
                max_new_tokens=9, eos_token_id=eos, pad_token_id=0,
            )  # fmt: skip
        toks = gen[0, len(ids) :].tolist()
        assert done[i].tokens == (toks[: toks.index(eos)] if eos in toks else toks)


def test_seconds_are_shared_and_sum_to_the_run(gqa_llama_dir):
    import time

    from harness.models.runners.prefix import PrefixEngine

    model = _model(gqa_llama_dir, torch.float32)
    prompts = _prompts()
    t = time.perf_counter()
    done = list(PrefixEngine(model, None, CHUNK, reuse=True).run(prompts, [4] * len(prompts)))
    wall = time.perf_counter() - t
    assert len(done) == len(prompts) and all(g.seconds > 0 for g in done)
    assert sum(g.seconds for g in done) <= wall
    assert sum(g.seconds for g in done) > 0.5 * wall  # the model's work is most of the run
    assert [g.prompt_tokens for g in sorted(done, key=lambda g: g.index)] == [len(p) for p in prompts]


def _runner(path, dtype="float32", batch_size=8, reuse=True):
    from harness.models.runners.hf import HFRunner

    return HFRunner(str(path), RunnerSettings(backend="hf", dtype=dtype, batch_size=batch_size, prefix_reuse=reuse))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_outputs_do_not_depend_on_batching_order_or_reuse(gqa_llama_dir, monkeypatch, dtype):
    """The same prompt gives the same text whatever else runs with it, in what order, at what
    --batch-size, with reuse on or off: in bf16 too."""
    from harness.models.runners import prefix

    monkeypatch.setitem(prefix.CHUNK_TOKENS, "cpu", CHUNK)
    base = "The grass is green. The sky is blue. " * 12
    reqs = [GenerationRequest(base[: 40 * k] + f" The special number for item {k} is", 6) for k in range(1, 11)]
    reqs += [GenerationRequest("Unrelated text about rivers. " * 3, 6), GenerationRequest(base, 6)]
    runner = _runner(gqa_llama_dir, dtype, batch_size=8)
    together = runner.generate(reqs)
    assert sum(s["reused_tokens"] for s in runner.sample_stats.values()) > 0
    assert [runner.generate([r])[0] for r in reqs] == together
    shuffled = list(range(len(reqs)))
    random.Random(3).shuffle(shuffled)
    assert [runner.generate([reqs[i] for i in shuffled])[j] for j in range(len(reqs))] == [
        together[i] for i in shuffled
    ]
    for other in (_runner(gqa_llama_dir, dtype, batch_size=1), _runner(gqa_llama_dir, dtype, reuse=False)):
        assert other.generate(reqs) == together
        other.close()
    if dtype == "float32":
        model = runner.model
        eos = runner.eos_id
        for r, got in zip(reqs, together):
            ids = runner.tokenizer(r.prompt)["input_ids"]
            assert got == runner.tokenizer.decode(_greedy_by_hand(model, ids, 6, eos), skip_special_tokens=True)
    runner.close()


def test_niah_samples_share_prefixes_and_reuse_changes_nothing(gqa_llama_dir, bpe_tokenizer, monkeypatch):
    """Real RULER niah_single_1 prompts: the haystack before the needle is shared; reuse finds it."""
    from harness.models.runners import prefix
    from tasks.generate import generate_samples
    from tasks.registry import get_task

    monkeypatch.setitem(prefix.CHUNK_TOKENS, "cpu", 32)
    samples = generate_samples(get_task("niah_single_1"), 1024, range(8), bpe_tokenizer)
    reqs = [GenerationRequest(s.prompt, 5) for s in samples]
    on, off = _runner(gqa_llama_dir), _runner(gqa_llama_dir, reuse=False)
    got = on.generate(reqs)
    stats = on.sample_stats
    shared = sum(s["reused_tokens"] for s in stats.values()) / sum(s["prompt_tokens"] for s in stats.values())
    assert shared > 0.2, shared
    assert off.generate(reqs) == got and all(s["reused_tokens"] == 0 for s in off.sample_stats.values())
    on.close()
    off.close()


def test_unsupported_architecture_runs_plain_generate_one_row_at_a_time(tmp_path, bpe_tokenizer_dir):
    """A sliding-window model is refused by the engine (its cache is not one growing buffer) and runs
    transformers generate on one unpadded row per prompt: same text as a user's own call."""
    import shutil

    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    tok = AutoTokenizer.from_pretrained(str(bpe_tokenizer_dir))
    torch.manual_seed(0)
    config = MistralConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, sliding_window=8, max_position_embeddings=512,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )  # fmt: skip
    MistralForCausalLM(config).save_pretrained(tmp_path / "m")
    for f in bpe_tokenizer_dir.iterdir():
        shutil.copy(f, tmp_path / "m" / f.name)
    runner = _runner(tmp_path / "m")
    assert runner.engine is None and "Sliding" in runner.unsupported
    reqs = [GenerationRequest("The grass is green. " * k + "The number is", 5) for k in (1, 6, 3)]
    got = runner.generate(reqs)
    for r, text in zip(reqs, got):
        ids = runner.tokenizer(r.prompt)["input_ids"]
        assert text == runner.tokenizer.decode(
            _greedy_by_hand(runner.model, ids, 5, runner.eos_id), skip_special_tokens=True
        )
    runner.close()


def test_eval_records_are_the_same_with_and_without_reuse(ckpt_series, tmp_path, monkeypatch):
    """`harness eval` with and without --no-prefix-reuse: the same records (identity and content),
    provenance saying which ran and how much was reused, and each record's own eval time."""
    import json
    import time

    from harness.cli import main
    from harness.models.runners import prefix

    monkeypatch.setitem(prefix.CHUNK_TOKENS, "cpu", 32)
    stores, provs, walls = {}, {}, {}
    for name, flag in (("on", []), ("off", ["--no-prefix-reuse"])):
        out = tmp_path / name
        argv = ["eval", "--ckpts", f"{ckpt_series}/ckpt-10", "--tasks", "niah_single_1", "--lengths", "1k"]
        argv += ["--samples", "5", "--batch-size", "2", "--out", str(out), "--no-progress", *flag]
        t0 = time.perf_counter()
        assert main(argv) == 0
        walls[name] = time.perf_counter() - t0
        lines = (out / "samples.jsonl").read_text().splitlines()[1:]
        stores[name] = [json.loads(x) for x in lines]
        provs[name] = json.loads((out / "results.json").read_text())["provenance"]["prefix_reuse"]

    def content(recs):
        drop = ("eval_seconds", "compute", "run")
        return sorted(json.dumps({k: v for k, v in r.items() if k not in drop}, sort_keys=True) for r in recs)

    assert len(stores["on"]) == 5 and content(stores["on"]) == content(stores["off"])
    assert provs["on"]["enabled"] is True and provs["off"]["enabled"] is False
    assert provs["on"]["reused_tokens"] > 0 and provs["off"]["reused_tokens"] == 0
    assert (
        provs["on"]["prompt_tokens"]
        == provs["off"]["prompt_tokens"]
        == sum(r["compute"]["prompt_tokens"] for r in stores["on"])
    )
    assert provs["on"]["grid_tokens"] == 32
    secs = [r["eval_seconds"] for r in stores["on"]]
    assert all(s > 0 for s in secs) and len(set(secs)) > 1  # each sample's own time, not a batch average
    # stored in batches of 2 while up to 5 decode together: the times still add up to no more than the run
    assert sum(secs) <= walls["on"]
