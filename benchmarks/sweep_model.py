"""The random-weight model the 128K sweep runs (benchmarks/gpu_check.py, section sweep): Llama-3.1-8B's
shape, or a tiny one of the same kind for the CPU run, built on the device and saved as a checkpoint.

    from sweep_model import LLAMA_31_8B, small_shape, build_checkpoint
    path, timings = build_checkpoint(tmp / "model", LLAMA_31_8B, tokenizer_dir, "cuda")

Llama-3.1-8B's config.json facts: 32 layers, hidden 4096, MLP 14336, 32 query heads and 8 key/value
heads of 128, vocabulary 128,256, 131,072 positions with Llama-3 RoPE scaling (theta 500,000, factor
8 over 8,192 original positions, low/high frequency factors 1 and 4), RMSNorm eps 1e-5, untied
embeddings. The weights are random (transformers' own initialisation, seeded), made on the device in
bfloat16 directly: the 16 GB of an 8B model never pass through the CPU's initialisation. The
checkpoint is then saved with the tokenizer beside it, so the hf runner loads it from a folder exactly
as `harness eval --ckpts DIR --dtype bfloat16` does.
"""

from __future__ import annotations

import gc
import shutil
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Shape:
    """What a Llama config needs beyond the tokenizer's vocabulary."""

    name: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    positions: int
    rope_theta: float
    original_positions: int  # Llama-3 RoPE scaling: the context the frequencies were trained at
    rope_factor: float  # ... and how far the low frequencies are stretched
    vocab: int | None = None  # None: the tokenizer's size

    def config(self, vocab: int, bos: int | None, eos: int | None) -> dict:
        return {
            "vocab_size": self.vocab or vocab,
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.hidden // self.heads,
            "max_position_embeddings": self.positions,
            "rope_theta": self.rope_theta,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": self.rope_factor,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": self.original_positions,
            },
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "hidden_act": "silu",
        }

    def kv_bytes(self, tokens: int, dtype_bytes: int = 2) -> int:
        """Bytes of one sequence's KV cache: keys and values of every layer and key/value head."""
        return 2 * self.layers * self.kv_heads * (self.hidden // self.heads) * tokens * dtype_bytes


LLAMA_31_8B = Shape(
    "Llama-3.1-8B",
    layers=32,
    hidden=4096,
    intermediate=14336,
    heads=32,
    kv_heads=8,
    positions=131_072,
    rope_theta=500_000.0,
    original_positions=8192,
    rope_factor=8.0,
    vocab=128_256,
)


def small_shape(positions: int) -> Shape:
    """The CPU run's model: the same architecture (grouped key/value heads, Llama-3 RoPE scaling by 8
    from a 16th of the positions, as 8,192 of 131,072) at 2 layers of hidden 64, for `positions` tokens."""
    return Shape(
        "small Llama-3 shape",
        layers=2,
        hidden=64,
        intermediate=128,
        heads=4,
        kv_heads=2,
        positions=positions,
        rope_theta=500_000.0,
        original_positions=max(1, positions // 16),
        rope_factor=8.0,
    )


def build_checkpoint(
    out_dir: Path, shape: Shape, tokenizer_dir: Path, device: str, seed: int = 0
) -> tuple[Path, dict[str, float]]:
    """A random LlamaForCausalLM of `shape`, initialised on `device` in bfloat16, saved with the
    tokenizer of `tokenizer_dir` beside it. Returns the folder and the seconds of each step
    (init, save) and the bytes written."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    if shape.vocab is not None and len(tok) > shape.vocab:
        raise ValueError(f"the tokenizer has {len(tok)} ids, more than the {shape.name} vocabulary of {shape.vocab}")
    config = LlamaConfig(**shape.config(len(tok), tok.bos_token_id, tok.eos_token_id))
    cuda = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    sync()
    t1 = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    for f in Path(tokenizer_dir).iterdir():  # the tokenizer exactly as the samples were made with
        if f.is_file():
            shutil.copy2(f, out_dir / f.name)
    t2 = time.perf_counter()
    params = sum(p.numel() for p in model.parameters())
    del model
    gc.collect()  # the 16 GB go back before the runner loads its own copy
    if cuda:
        torch.cuda.empty_cache()
    written = sum(f.stat().st_size for f in out_dir.glob("*.safetensors"))
    return out_dir, {"init_s": t1 - t0, "save_s": t2 - t1, "bytes": float(written), "params": float(params)}
