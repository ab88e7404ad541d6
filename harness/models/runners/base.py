"""The interface every model runner implements.

Two calls cover every suite: `generate` (RULER, LongBench, ICL) and `loglikelihood`
(MMLU, HellaSwag, perplexity). Backends live in their own modules and import their heavy
dependencies lazily, so the core works without vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class GenerationRequest:
    prompt: str
    max_new_tokens: int
    stop: tuple[str, ...] = ()  # RULER uses none; HELMET ICL stops at newline
    # The same prompt as chat turns ({"role", "content"}; a last assistant turn is the answer
    # prefix), for runners that send messages to a server's chat template (openai --chat).
    messages: tuple[dict, ...] | None = None
    # Token-level stops, as LongBench's pred.py runs samsum (eos_token_id=[EOS, id of "\n"]): each text's
    # LAST token id (encoded without special tokens) ends generation like an EOS id, and the text is cut
    # before it. Unlike `stop` (strings cut from the decoded text) this changes where decoding ends.
    stop_tokens: tuple[str, ...] = ()
    # During the first min_new_tokens steps every stop id (EOS ids and stop_tokens' ids) is masked to
    # -inf, so it cannot be chosen (pred.py's min_length=context_length+1 is min_new_tokens=1).
    min_new_tokens: int = 0


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
    # Compute each shared prompt prefix once (hf: the prefix engine; vLLM: automatic prefix caching).
    # Never changes an output (harness/models/runners/prefix.py), so it is not part of a record's identity.
    prefix_reuse: bool = True
    chat_template: bool = False
    extra: dict = field(default_factory=dict)  # vLLM: extra LLM(...) keyword arguments
    # Served models (--backend openai): where, how, and which tokenizer counts the prompts.
    endpoint: dict | None = None  # {"base_url", "api_key_env", "concurrency", "timeout", "retries"}
    tokenizer: str | None = None  # local tokenizer dir or hub name (default: the model's)
    system_prompt: str | None = None  # chat only: a system turn before the user turn


class Runner(Protocol):
    settings: RunnerSettings
    max_model_len: int  # the context the model runs with (prompt + generation must fit)
    tokenizer: Any  # the transformers tokenizer prompts are counted with (loglikelihood tasks use it)
    # True: the evaluation loop hands every pending prompt of a checkpoint over in one call
    # (the runner schedules them itself: vLLM, an HTTP endpoint); False: one batch at a time.
    submit_all: bool

    def generate(self, requests: list[GenerationRequest]) -> list[str]:
        """Greedy continuations, in request order; each cut at its first stop string."""

    def loglikelihood(self, requests: list[LoglikelihoodRequest]) -> list[tuple[float, bool]]:
        """(sum of log p(continuation | context), whether the continuation is the greedy one)."""

    def close(self) -> None:
        """Free the model (engines hold memory until closed)."""
