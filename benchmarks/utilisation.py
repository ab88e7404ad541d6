"""What a model's forward passes cost and what the device can do: the FLOP count of a run from the
model's shape, and the measured matmul peak it is set against. Shared by eval_throughput.py (CPU
tables) and gpu_check.py (the runner rows on CUDA); imports torch only when called.

FLOPs from the model's shape: 2 x the non-embedding parameters per token computed, 2 x hidden x vocab
per token whose logits are taken, and attention 4 x (position + 1) x heads x head_dim per layer and
token (QK^T and AV, causal).
"""

from __future__ import annotations

import time


def matmul_peak(dtype, n: int = 2048, seconds: float = 2.0, device: str = "cpu") -> float:
    """GFLOP/s of an n x n x n matmul in `dtype` on `device`, best of repeated timings over ~`seconds`.

    On CUDA each timing is synchronised, so it measures the kernel, not its launch."""
    import torch

    cuda = str(device).startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(3 if cuda else 1):  # warm-up: cuBLAS picks its kernel, clocks rise
        a @ b
    sync()
    best, spent = float("inf"), 0.0
    while spent < seconds:
        t = time.perf_counter()
        a @ b
        sync()
        dt = time.perf_counter() - t
        best, spent = min(best, dt), spent + dt
    return 2 * n**3 / best / 1e9


class Shape:
    """FLOPs of the model's forward passes, from its config and parameter count."""

    def __init__(self, model) -> None:
        cfg = model.config
        self.layers = cfg.num_hidden_layers
        self.heads = cfg.num_attention_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.hidden, self.vocab = cfg.hidden_size, cfg.vocab_size
        embed = model.get_input_embeddings().weight.numel()
        head = model.get_output_embeddings().weight
        tied = head.data_ptr() == model.get_input_embeddings().weight.data_ptr()
        self.body = sum(p.numel() for p in model.parameters()) - embed - (0 if tied else head.numel())

    def tokens(self, start: int, end: int) -> float:
        """FLOPs of running positions [start, end) after a cache of `start` positions."""
        n = end - start
        attn = 4 * self.heads * self.head_dim * self.layers * (end * (end + 1) - start * (start + 1)) / 2
        return 2 * self.body * n + attn

    def logits(self, n: int) -> float:
        return 2 * self.hidden * self.vocab * n

    def sample(self, prompt: int, reused: int, new: int) -> float:
        """FLOPs of one generated sample: prefill of the positions not reused, then one step per
        generated token (the last one's step finds EOS; a run cut by max_new_tokens does one step
        fewer: within one token), logits of the last prompt token and of each step."""
        return self.tokens(reused, prompt) + self.tokens(prompt, prompt + new) + self.logits(new + 1)
