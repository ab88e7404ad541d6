"""The interface every model runner implements.

Two calls cover every suite: `generate` (RULER, LongBench, ICL) and `loglikelihood`
(MMLU, HellaSwag, perplexity). Backends live in their own modules and import their heavy
dependencies lazily, so the core works without vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class GenerationRequest:
    prompt: str
    max_new_tokens: int
    stop: tuple[str, ...] = ()  # RULER uses none; HELMET ICL stops at newline


@dataclass(frozen=True)
class LoglikelihoodRequest:
    context: str
    continuation: str


@dataclass(frozen=True)
class RunnerSettings:
    """What moves scores, recorded in every result."""

    backend: str
    dtype: str = "auto"
    batch_size: int = 8
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    rope_theta: float | None = None
    rope_scaling: dict | None = None
    tensor_parallel_size: int = 1
    chat_template: bool = False
    extra: dict = field(default_factory=dict)


class Runner(Protocol):
    settings: RunnerSettings
    max_model_len: int  # the context the model runs with (prompt + generation must fit)

    def generate(self, requests: list[GenerationRequest]) -> list[str]:
        """Greedy continuations, in request order; each cut at its first stop string."""

    def loglikelihood(self, requests: list[LoglikelihoodRequest]) -> list[tuple[float, bool]]:
        """(sum of log p(continuation | context), whether the continuation is the greedy one)."""

    def close(self) -> None:
        """Free the model (engines hold memory until closed)."""
