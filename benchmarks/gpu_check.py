"""GPU validation (issues 9 and 16): the paths CI cannot run, in one script with selectable sections.

    python benchmarks/gpu_check.py                                  # all sections, sizes for the device
    python benchmarks/gpu_check.py --record                         # ... and append the table to RESULTS.md
    python benchmarks/gpu_check.py --sections kernels,diagnose --small --budget 120
    python benchmarks/gpu_check.py --sections runner --model MODEL_DIR --samples SAMPLES_DIR
    python benchmarks/gpu_check.py --sections sweep --sweep-pack runs/sweep-128k/pack.tar.xz --budget 540

Sections:
- kernels: bf16 logits of every attention kernel (dense, sdpa-doc; varlen and flex on CUDA) for every
  training mode on packed windows, max |error| against the fp32 dense reference on the same weights.
- train: benchmarks/train_step.py (CPU section on CPU; on CUDA the ~1.1B Llama at 16K/32K/64K, varlen,
  anchor/full step time, target <= 0.5 at 64K, and the peak memory of each mode).
- runner: the transformers runner (harness/models/runners/hf.py) in bf16 at 4K-128K tokens (CUDA; 128/256 on
  CPU with --small): samples/s, peak memory, the rows per forward (1: the prefix engine runs one
  unpadded prompt at a time), the share of prompt tokens reused from shared prefixes, and whether
  greedy outputs are identical across two runs; utilisation (prompt tokens/s, achieved TFLOP/s from
  the model's shape, benchmarks/utilisation.py, against a bf16 matmul timed on the same device); and
  the decode width's gain (DECODE_ROWS rows against one, generated tokens/s). By default on a random
  Llama (~110M, byte tokenizer, built here); --model/--samples run a checkpoint on pre-generated
  RULER samples instead.
- diagnose: benchmarks/diagnose_rope.py; on CUDA the 7B shape at L=4096 in bf16 (one sample), time of
  one diagnostic pass against a plain forward (target <= 5x), then with the error-source breakdown
  (measured); on CPU the small shape, bf16 and fp32.
- sweep (only when named: it needs a sample pack and a whole call): RULER's tasks at 128K for a
  random-weight Llama-3.1-8B-shaped model (benchmarks/sweep_model.py: built on the GPU in bf16, saved,
  loaded by the hf runner as `harness eval --dtype bfloat16` loads a checkpoint), on real samples made
  on CPU beforehand (benchmarks/sweep_pack.py, --sweep-pack; by default 2 per task with Llama 3's
  tokenizer). Each task's samples go through the runner's generate_each in one call, as `harness eval`
  hands them over, every sample decoding its task's full max_new_tokens (benchmarks/ruler_sweep.py).
  Per task: prefill seconds and achieved TFLOP/s, decode tokens/s and rows, seconds per sample; then
  the projection of 500 samples x the pack's tasks on 8 GPUs (benchmarks/sweep_projection.py, the
  formula in its docstring) beside the reference's 26 hours, held to <= 3 hours for the 8B shape on
  CUDA. Tasks the budget does not reach are estimated from the measured ones and marked so. --small
  (or no CUDA) runs a 2-layer model of the same kind on a pack made at a short length.

Each row is printed as soon as it is measured (`row: ...`, flushed), so a run cut off by a time limit
keeps what it measured, and a section that raises adds a FAIL row and the others still run; the
table follows at the end. --budget SECONDS (default 560, one 10-minute command with room for
start-up; 0 = none) skips the rows left once it is spent, saying so. --record
appends a dated section named after the device to benchmarks/RESULTS.md (written to a temp file and
renamed into place). Imports are lazy and need torch, transformers and tqdm only (CUDA machines lack
datasets, lm-eval, vLLM and wonderwords; tests/benchmarks/test_gpu_check.py checks the imports).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SECTIONS = ("kernels", "train", "runner", "diagnose", "sweep")
# What runs without --sections: the sweep needs a pack and a whole device call of its own.
DEFAULT_SECTIONS = ("kernels", "train", "runner", "diagnose")
DEFAULT_BUDGET = 560.0
HEADER = ("section", "check", "value", "status")
# Modules the CUDA image lacks: nothing this script imports may need them.
ABSENT_ON_GPU_IMAGE = (
    "datasets",
    "lm_eval",
    "vllm",
    "wonderwords",
    "needlehaystack",
    "flash_attn",
    "pydantic",
    "nltk",
    "rouge",
    "rouge_score",
    "fuzzywuzzy",
    "jieba",
    "gguf",
)


class Rows:
    """The table being measured: each row printed when added; the time budget shared by all sections."""

    def __init__(self, budget: float | None):
        self.rows: list[tuple[str, str, str, str]] = []
        self.t0 = time.monotonic()
        self.budget = budget if budget and budget > 0 else None
        self.skipped: list[str] = []
        self.notes: list[str] = []  # text a section prints after the table (and --record keeps)

    def add(self, section: str, check: str, value: str, status: str) -> None:
        row = (section, check, value, status)
        self.rows.append(row)
        print("row: " + " | ".join(row), flush=True)

    def spent(self) -> bool:
        return self.budget is not None and time.monotonic() - self.t0 >= self.budget

    def left(self) -> float | None:
        """Seconds of the budget left (None: no budget)."""
        return None if self.budget is None else self.budget - (time.monotonic() - self.t0)

    def note(self, text: str) -> None:
        """Text printed after the table (and kept by --record)."""
        self.notes.append(text)

    def over(self, section: str, what: str) -> bool:
        """True (and a 'skipped' row) when the budget is spent before measuring `what`."""
        if not self.spent():
            return False
        self.add(section, what, "", f"skipped: --budget {self.budget:.0f}s spent")
        return True


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _free_cuda() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _flops(gflops: float) -> str:
    return f"{gflops / 1000:.1f} TFLOP/s" if gflops >= 1000 else f"{gflops:.1f} GFLOP/s"


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def section_kernels(args, rows: Rows) -> None:
    import torch
    from train_step import small_llama, windows

    from training.attention import forward_kwargs, gather_logits, prepare_model
    from training.modes import MODES, build_batch

    cuda = _cuda()
    device = torch.device("cuda" if cuda else "cpu")
    # On CPU: flex runs eagerly (uncompiled) and varlen's layout runs through its SDPA emulation.
    kernels = ["sdpa-doc", "varlen", "flex"] if cuda else ["sdpa-doc", "flex", "varlen-cpu-emulation"]
    if not cuda:
        rows.add("kernels", "varlen (torch varlen_attn), compiled flex", "", "skipped: needs CUDA")
    L = 4096 if cuda and not args.small else 1024
    vocab = 32000 if cuda and not args.small else 512
    wins = windows(L, 2, vocab)
    shape = (
        {"hidden": 1024, "layers": 4, "heads": 8, "intermediate": 2816}
        if cuda and not args.small
        else {"hidden": 64, "layers": 2, "heads": 2, "intermediate": 172}
    )
    master = small_llama(vocab, **shape, max_pos=L)
    state = {k: v.detach().clone() for k, v in master.state_dict().items()}

    def logits(kernel, dtype, batch):
        model = small_llama(vocab, **shape, max_pos=L)
        model.load_state_dict(state)
        model.to(device, dtype)
        prepare_model(model, kernel)
        with torch.no_grad():
            return gather_logits(model(**forward_kwargs(batch, kernel)).logits, batch, kernel).float()

    for mode in MODES:
        if rows.over("kernels", f"{mode} (all kernels), L={L}"):
            return
        batch = build_batch(wins, mode).to(device)
        ref = logits("dense", torch.float32, batch)  # the fp32 reference every bf16 kernel is held to
        scale = ref.abs().max().item()
        dense_err = None
        for kernel in ["dense", *kernels]:
            err = (logits(kernel, torch.bfloat16, batch) - ref).abs().max().item()
            dense_err = err if dense_err is None else dense_err
            # bf16 rounding alone gives the dense kernel's error; a kernel more than twice as far from
            # the fp32 reference (plus 0.1% of the logit range) computes something else.
            ok = err <= 2 * dense_err + 1e-3 * max(scale, 1.0)
            rows.add("kernels", f"{mode} {kernel} bf16 vs fp32 dense, L={L}", f"{err:.3e}", "ok" if ok else "FAIL")


def section_train(args, rows: Rows) -> None:
    import train_step

    cuda = _cuda()
    if not cuda:
        rows.add("train", "~1B Llama 16K-64K, varlen, bf16", "", "skipped: needs CUDA")
    lengths = [16384, 32768, 65536] if cuda else ([1024] if args.small else [4096, 8192])
    for L in lengths:  # one length at a time, so the budget can stop between them
        if rows.over("train", f"L={L} full / anchor s/step"):
            return
        ns = argparse.Namespace(lengths=[L], cuda_lengths=[L], steps=1 if args.small else 2, threads=0)
        for r in train_step.run_cuda(ns) if cuda else train_step.run_cpu(ns):
            peak = f", peak {_gib(r['full_peak'])} / {_gib(r['anchor_peak'])}" if "full_peak" in r else ""
            rows.add(
                "train",
                f"L={r['window']} full / anchor s/step",
                f"{r['full']:.3f} / {r['anchor']:.3f} (x{r['ratio']:.2f}, pairs {100 * r['pairs']:.1f}%){peak}",
                train_step.target_verdict(r) or "measured",
            )


def _read_samples(directory: Path, per_file: int) -> list[dict]:
    files = sorted(directory.rglob("*.jsonl"))
    out = []
    for f in files:
        with f.open() as fh:
            for n, line in enumerate(fh):
                if n >= per_file:
                    break
                out.append(json.loads(line))
    return out


def _synthetic_model(directory: Path, cuda: bool, small: bool, max_len: int) -> Path:
    """A random Llama with a byte tokenizer (no wonderwords needed), saved with save_pretrained."""
    from harness.models.embedded import build_byte_tokenizer, build_tiny_llama

    tok = build_byte_tokenizer(directory / "tokenizer")
    if cuda and not small:  # ~110M parameters, 16 heads of 64
        shape = {"hidden_size": 1024, "num_layers": 8, "num_heads": 16, "intermediate_size": 2816}
    else:
        shape = {"hidden_size": 64, "num_layers": 2, "num_heads": 2}
    return build_tiny_llama(
        directory / "model", tok, max_position_embeddings=max_len, dtype="bfloat16", rope_theta=1e6, **shape
    )


def _synthetic_prompts(length: int, count: int) -> list[str]:
    """`count` distinct prompts of `length` bytes (= tokens of the byte tokenizer)."""
    import random

    words = [
        "the",
        "grass",
        "is",
        "green",
        "sky",
        "blue",
        "sun",
        "yellow",
        "here",
        "we",
        "go",
        "there",
        "and",
        "back",
        "again",
        "magic",
        "number",
        "key",
    ]
    out = []
    for i in range(count):
        rng = random.Random(i)
        text = f"Sample {i}. "
        while len(text) < length:
            text += " ".join(rng.choice(words) for _ in range(12)) + ". "
        out.append(text[: length - 24] + " The special number is")
    return out


def _runner_rows(rows: Rows, runner, groups: dict[int, list], cuda: bool) -> None:
    import torch
    from utilisation import Shape, matmul_peak

    shape = Shape(runner.model)
    # The peak every row is set against: a large bf16 matmul on the same device, in this process.
    peak_gflops = matmul_peak(torch.bfloat16, n=8192 if cuda else 1024, seconds=1.0, device=runner.device)
    rows.add("runner", "bf16 matmul peak, this device", _flops(peak_gflops), "measured")
    for length, reqs in sorted(groups.items()):
        if rows.over("runner", f"hf bf16 L={length}"):
            return
        outs, times = [], []
        runner.batch_log.clear()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        for _ in range(2):
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            outs.append(runner.generate(reqs))
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        peak = _gib(torch.cuda.max_memory_allocated()) if cuda else "n/a on CPU"
        batches = sorted({n for n, _ in runner.batch_log}, reverse=True)
        stats = list(getattr(runner, "sample_stats", {}).values())
        prompt = sum(s.get("prompt_tokens", 0) for s in stats)
        reused = sum(s.get("reused_tokens", 0) for s in stats) / prompt if prompt else 0.0
        prefill = sum(s.get("prefill_seconds", 0.0) for s in stats)  # of the last run
        flops = sum(shape.sample(s["prompt_tokens"], s["reused_tokens"], s["new_tokens"]) for s in stats)
        achieved = flops / times[-1] / 1e9
        same = outs[0] == outs[1]
        rows.add(
            "runner",
            f"hf bf16 L={length}, {len(reqs)} samples",
            f"{len(reqs) / min(times):.2f} samples/s, peak {peak}, rows {'/'.join(map(str, batches))}, "
            f"{reused:.0%} of prompt tokens reused",
            "ok" if same else "FAIL",
        )
        rows.add(
            "runner",
            f"utilisation L={length}",
            f"prompt {prompt / max(prefill, 1e-9):,.0f} tok/s, {_flops(achieved)} = "
            f"{achieved / peak_gflops:.1%} of the bf16 matmul peak",
            "measured",
        )
        rows.add("runner", f"greedy outputs identical across 2 runs, L={length}", str(same), "ok" if same else "FAIL")


def _decode_width_rows(rows: Rows, runner, groups: dict[int, list], cuda: bool) -> None:
    """Generated tokens/s of the engine's fixed-width decoding (DECODE_ROWS rows, one attention call
    per layer) against one row, and against the same width attending row by row (`per-row`, the
    engine before issue 37), at the shortest and a long length of the runner rows
    (benchmarks/decode_width.py, which chose the width)."""
    from decode_width import time_widths

    from harness.models.runners.common import DECODE_ATTENTION, DECODE_ROWS, prompt_ids

    if runner.engine is None:
        rows.add("runner", "decode width", "", f"skipped: no prefix engine ({runner.unsupported})")
        return
    lengths = sorted(groups)
    for length in sorted({lengths[0], min(lengths, key=lambda n: abs(n - 32768))}):
        if rows.over("runner", f"decode width 1 vs {DECODE_ROWS}, L={length}"):
            return
        ids = list(prompt_ids(runner.tokenizer, groups[length][0].prompt))
        steps = 16 if cuda else 4
        (_, one), (_, many) = time_widths(runner, ids, [1, DECODE_ROWS], steps=steps, kernel=DECODE_ATTENTION)
        ((_, per_row),) = time_widths(runner, ids, [DECODE_ROWS], steps=steps, kernel="per-row")
        # The per-row kernel calls attention once per row and layer, which a GPU runs launch-bound
        # (SmolLM2's 30 layers, 8 rows: ~39 ms a step on an H200, RESULTS.md); the engine once per layer.
        layers = runner.model.config.get_text_config().num_hidden_layers
        rows.add(
            "runner",
            f"decode width 1 vs {DECODE_ROWS}, L={length}",
            f"{1 / one:,.0f} vs {DECODE_ROWS / many:,.0f} tok/s = x{one * DECODE_ROWS / many:.2f}; "
            f"{1000 * one:.1f} / {1000 * many:.1f} ms a step, {layers} layers; "
            f"per-row attention at {DECODE_ROWS}: {1000 * per_row:.1f} ms a step (one call per layer x{per_row / many:.2f})",
            "measured",
        )


def section_runner(args, rows: Rows) -> None:
    from harness.models.runners.base import GenerationRequest, RunnerSettings
    from harness.models.runners.hf import HFRunner

    cuda = _cuda()
    if bool(args.model) != bool(args.samples):
        rows.add("runner", "hf bf16 on RULER samples", "", "skipped: give both --model and --samples (or neither)")
        return
    settings = RunnerSettings(backend="hf", dtype="bfloat16", batch_size=args.batch_size)
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            samples = _read_samples(Path(args.samples), args.per_file)
            if not samples:
                rows.add("runner", f"no *.jsonl under {args.samples}", "", "FAIL")
                return
            groups: dict[int, list] = {}
            for s in samples:
                req = GenerationRequest(s["input"] + s.get("answer_prefix", ""), int(s["max_new_tokens"]))
                groups.setdefault(int(s["length"]), []).append(req)
            model = args.model
        else:
            if cuda and not args.small:
                lengths = [4096, 8192, 16384, 32768, 65536, 131072]
            else:
                lengths = [128, 256] if args.small else [512, 1024]
            new = 16
            groups = {L: [GenerationRequest(p, new) for p in _synthetic_prompts(L, args.per_file)] for L in lengths}
            model = str(_synthetic_model(Path(tmp), cuda, args.small, max(lengths) + 2 * new))
        runner = HFRunner(model, settings)
        try:
            _runner_rows(rows, runner, groups, cuda)
            _decode_width_rows(rows, runner, groups, cuda)
        finally:
            runner.close()


def section_diagnose(args, rows: Rows) -> None:
    import diagnose_rope

    cuda = _cuda()
    if cuda and not args.small:
        argv = ["--size", "7b", "--seq-len", "4096", "--num-samples", "1", "--dtypes", "bf16"]
    else:
        argv = ["--size", "small", "--seq-len", "128" if args.small else "512", "--num-samples", "1"]
        argv += ["--dtypes", "bf16,fp32"]
        rows.add("diagnose", "7B at L=4096 on GPU", "", "skipped: needs CUDA (CPU runs the small model)")
    # The pass (forward with capture, then D for its shift) is held to the target; the error-source
    # breakdown (5 more precision configs per layer and shift, from the captured pre-RoPE q/k, no
    # forward; --no-sources drops it) is measured beside it, its time spread over the same passes.
    for extra, what in ((["--no-sources"], "pass"), ([], "pass + error sources")):
        if rows.over("diagnose", " ".join(argv + extra)):
            return
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rope.json"
            diagnose_rope.main(argv + extra + ["--out", str(out)])
            res = json.loads(out.read_text())
        for dtype, t in res["timing"].items():
            per = t["diagnostic_s"] / t["passes"]
            ratio = per / t["plain_forward_s"]
            target = res["size"] == "7b" and res["seq_len"] == 4096 and dtype == "bf16" and extra
            status = ("ok <=5x" if ratio <= 5 else "FAIL >5x") if target else "measured"
            rows.add(
                "diagnose",
                f"{res['size']} L={res['seq_len']} {what} vs plain forward, {dtype}",
                f"{per * 1000:.0f} ms / {t['plain_forward_s'] * 1000:.0f} ms = x{ratio:.1f} ({t['passes']} passes)",
                status,
            )


def section_sweep(args, rows: Rows) -> None:
    from sweep_model import LLAMA_31_8B, build_checkpoint, small_shape
    from sweep_pack import read_pack

    from harness.models.runners.base import RunnerSettings
    from harness.models.runners.hf import HFRunner

    cuda = _cuda()
    pack_path = Path(args.sweep_pack)
    if not pack_path.is_file():
        rows.add(
            "sweep", f"RULER tasks, pack {pack_path}", "", "skipped: no pack (python benchmarks/sweep_pack.py makes it)"
        )
        return
    full = cuda and not args.small
    if not cuda:
        rows.add("sweep", "Llama-3.1-8B shape", "", "skipped: needs CUDA (CPU runs the small shape)")
    with tempfile.TemporaryDirectory(prefix="sweep-") as tmp:
        pack = read_pack(pack_path, Path(tmp) / "pack", per_task=args.sweep_samples)
        length = pack.length
        shape = LLAMA_31_8B if full else small_shape(length)
        if length > shape.positions:
            rows.add("sweep", f"pack length {length}", f"beyond {shape.name}'s {shape.positions} positions", "FAIL")
            return
        if rows.over("sweep", f"build {shape.name}"):
            return
        device = "cuda" if cuda else "cpu"
        path, built = build_checkpoint(Path(tmp) / "model", shape, pack.tokenizer_dir, device)
        t = time.perf_counter()
        # the hf runner on the saved folder, as `harness eval --ckpts DIR --dtype bfloat16` makes it (the
        # class itself: the registry's get_runner imports every backend, the openai one needs pydantic)
        runner = HFRunner(str(path), RunnerSettings(backend="hf", dtype="bfloat16"))
        load_s = time.perf_counter() - t
        rows.add(
            "sweep",
            f"{shape.name} random bf16 weights: init on {device} / save / load by the hf runner",
            f"{built['init_s']:.1f} / {built['save_s']:.1f} ({built['bytes'] / 1e9:.3g} GB) / {load_s:.1f} s, "
            f"{built['params'] / 1e9:.3g}B parameters",
            "measured",
        )
        try:
            _sweep_rows(rows, runner, pack, shape, target=full)
        finally:
            runner.close()


def padding_invariance(device, heads: int = 32, kv_heads: int = 8, dim: int = 128, seed: int = 0) -> dict:
    """The decoding rows' kernel on this device: 8 rows of 1-20,000 keys (Llama-3.1-8B's heads, bf16)
    in one padded call (`sdpa-padded-512`, every row's keys padded to the longest's block) against
    each row alone padded to its own block (`per-row-padded-512`) and against each row on exactly its
    keys (`per-row`, the engine before issue 37). A row's bits depend on nothing but the row when the
    first two are equal (harness/models/runners/rowcache.py; on CUDA SDPA takes the mask to another
    kernel than on CPU, which only a GPU run shows)."""
    import torch

    from harness.models.runners.decode import KERNELS
    from harness.models.runners.kvcache import round_up
    from harness.models.runners.rowcache import StepKeys

    lengths = [1, 37, 512, 513, 1500, 4097, 9000, 20000]
    span = round_up(max(lengths))
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(device=device, dtype=torch.bfloat16)

    q = rand(len(lengths), heads, 1, dim)
    k, v = rand(len(lengths), kv_heads, span, dim), rand(len(lengths), kv_heads, span, dim)
    keep = torch.arange(span)[None, :] < torch.tensor(lengths)[:, None]
    mask = torch.zeros(keep.shape).masked_fill_(~keep, float("-inf"))[:, None, None, :]
    mask = mask.to(device=device, dtype=torch.bfloat16)
    outs = {}
    with torch.inference_mode():
        for name in ("sdpa-padded-512", "per-row-padded-512", "per-row"):
            keys, values = StepKeys(k, mask, lengths, name), StepKeys(v, mask, lengths, name)
            outs[name] = KERNELS[name](q, keys, values, dim**-0.5).float()
    batched = outs["sdpa-padded-512"]
    same = [bool(torch.equal(batched[r], outs["per-row-padded-512"][r])) for r in range(len(lengths))]
    return {
        "rows": len(lengths),
        "same_bits": sum(same),
        "max_diff_vs_exact": float((batched - outs["per-row"]).abs().max()),
    }


def _sweep_rows(rows: Rows, runner, pack, shape, target: bool) -> None:
    """The sweep's rows once the runner is loaded: FLOPs and peak, each task, the projection."""
    import torch
    from ruler_sweep import TaskTiming, estimate_seconds, fits, measure_order, measure_task, task_table
    from sweep_projection import project
    from utilisation import Shape, matmul_peak

    cuda = str(runner.device).startswith("cuda")
    length = pack.length
    flops = Shape(runner.model)
    linear = 2 * flops.body * length
    attention = flops.tokens(0, length) - linear
    rows.add(
        "sweep",
        f"one {length:,}-token prefill, {shape.name}",
        f"{linear / 1e15:.3g} linear + {attention / 1e15:.3g} attention = {(linear + attention) / 1e15:.3g} PFLOP; "
        f"KV cache {shape.kv_bytes(length) / 1e9:.3g} GB",
        "measured",
    )
    peak = matmul_peak(torch.bfloat16, n=8192 if cuda else 1024, seconds=1.0, device=runner.device)
    rows.add("sweep", "bf16 matmul peak, this device", _flops(peak), "measured")
    inv = padding_invariance(runner.device)
    rows.add(
        "sweep",
        "decoding rows in one call = each row alone (8B heads, bf16, 1-20,000 keys)",
        f"{inv['same_bits']}/{inv['rows']} rows the same bits; max abs diff vs exact-length keys {inv['max_diff_vs_exact']:.2g}",
        "ok" if inv["same_bits"] == inv["rows"] else "FAIL",
    )
    timings: dict[str, TaskTiming] = {}
    skipped: list[str] = []
    for name in measure_order(pack.samples):
        samples = pack.samples[name]
        what = f"{name} L={length}, {len(samples)} samples"
        if not samples:
            rows.add("sweep", what, "the pack holds none", "FAIL")
            continue
        if rows.spent() or not fits(timings.values(), len(samples), rows.left()):
            rows.add("sweep", what, "", f"skipped: --budget {rows.budget or 0:.0f}s would run out (estimated below)")
            skipped.append(name)
            continue
        t = measure_task(runner, name, samples, flops)
        timings[name] = t
        ok = "measured" if t.tokens_match else "FAIL: the runner's prompt tokens differ from the pack's"
        rows.add("sweep", what, t.summary(), ok)
    if not timings:
        return
    estimates = {}
    for name in skipped:
        new = int(pack.manifest["tasks"][name]["max_new_tokens"])
        estimates[name] = estimate_seconds(timings.values(), new)
        rows.add(
            "sweep",
            f"{name} L={length}, estimate",
            f"{estimates[name]:.2f} s/sample (measured tasks' prefill and overhead + {new} x their decode s/token)",
            "estimated",
        )
    order = [n for n in pack.manifest["tasks"] if n in timings or n in estimates]
    seconds = {n: timings[n].seconds_per_sample if n in timings else estimates[n] for n in order}
    p = project(seconds, estimated=tuple(estimates))
    held = target and length == 131072 and len(order) == 13
    rows.add(
        "sweep",
        f"projection: {p.samples} samples x {len(order)} tasks on {p.gpus} GPUs, L={length}",
        f"{p.arithmetic()} vs reference {p.reference_hours:g} h (x{p.speedup:.1f}); "
        f"{len(timings)} of {len(order)} tasks measured",
        (f"ok <={p.target_hours:g}h" if p.meets_target else f"FAIL >{p.target_hours:g}h") if held else "measured",
    )
    rows.note(
        f"\nsweep per task ({shape.name}, {runner.device}, L={length}); projection = sum of s/sample x "
        f"{p.samples} / {p.gpus} GPUs / 3600 (data parallel, no cross-GPU cost): {p.arithmetic()}\n\n"
        + task_table(timings, estimates, p, length)
    )


def device_name() -> str:
    import platform

    import torch

    return (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else f"CPU ({platform.processor() or platform.machine()})"
    )


def table(rows: list) -> str:
    w = [max(len(str(r[i])) for r in [*rows, HEADER]) for i in range(4)]
    lines = [" | ".join(h.ljust(w[i]) for i, h in enumerate(HEADER))]
    lines += [" | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    lines = ["| " + ln + " |" for ln in lines]
    lines.insert(1, "|" + "|".join("-" * (x + 2) for x in w) + "|")
    return "\n".join(lines)


def record(text: str, cmd: str) -> Path:
    """Append a dated section named after the device to benchmarks/RESULTS.md (temp file + rename)."""
    path = ROOT / "benchmarks" / "RESULTS.md"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    old = path.read_text() if path.exists() else ""
    new = old + f"\n## {stamp}, {device_name()}\n\n`{cmd}`\n\n{text}\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".RESULTS.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(new)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="GPU validation checks (see the module docstring)")
    ap.add_argument(
        "--sections",
        default=",".join(DEFAULT_SECTIONS),
        help=f"comma list of {','.join(SECTIONS)} (default: all but sweep)",
    )
    ap.add_argument("--small", action="store_true", help="smallest sizes (CPU smoke run)")
    ap.add_argument("--model", help="model directory for the runner section (with --samples)")
    ap.add_argument("--samples", help="directory of pre-generated samples (harness generate --out)")
    ap.add_argument("--per-file", type=int, default=4, help="samples per length (read per file with --samples)")
    ap.add_argument("--batch-size", type=int, default=8, help="runner row cap; its token budget decides below it")
    ap.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET,
        help=f"seconds; rows left when spent are skipped (default {DEFAULT_BUDGET:.0f}, 0 = no limit)",
    )
    ap.add_argument(
        "--sweep-pack",
        default=str(ROOT / "runs" / "sweep-128k" / "pack.tar.xz"),
        help="the sweep's samples (benchmarks/sweep_pack.py; default runs/sweep-128k/pack.tar.xz)",
    )
    ap.add_argument("--sweep-samples", type=int, help="samples per task for the sweep (default: all in the pack)")
    ap.add_argument("--record", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        from harness.core.errors import UserError

        raise UserError(f"unknown section(s) {', '.join(bad)}: choose from {', '.join(SECTIONS)}")
    rows = Rows(args.budget)
    fns = {
        "kernels": section_kernels,
        "train": section_train,
        "runner": section_runner,
        "diagnose": section_diagnose,
        "sweep": section_sweep,
    }
    for s in sections:
        print(f"== {s}", flush=True)
        try:
            fns[s](args, rows)
        except Exception as e:  # noqa: BLE001  # a GPU run is one shot: a broken section must not lose the rest
            traceback.print_exc()
            first = (str(e).strip().splitlines() or [""])[0][:160]
            rows.add(s, "section raised", f"{type(e).__name__}: {first}", "FAIL")
            _free_cuda()
    for r in rows.rows:
        if r[3].startswith("skipped"):
            print(f"section {r[0]}: {r[1]} {r[3]}")
    text = table(rows.rows)
    print(text, flush=True)
    for note in rows.notes:  # a section's own tables, after the summary
        print(note, flush=True)
    text = "\n".join([text, *rows.notes])
    if args.record:
        cmd = "python benchmarks/gpu_check.py " + " ".join(argv if argv is not None else sys.argv[1:])
        print(f"recorded in {record(text, cmd)}")
    return 1 if any(r[3].startswith("FAIL") for r in rows.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
