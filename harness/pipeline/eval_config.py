"""What `harness eval` takes (EvalConfig) and the checks of its flags that need no model.

    from harness.pipeline.eval_config import EvalConfig, check_numbers, check_options
    cfg = EvalConfig(ckpts="runs/anchor/ckpt-<1950..2000>", suite="ruler", lengths="4k-128k")
    check_numbers(cfg)              # UserError on a count or a size that cannot be
    options = check_options(cfg)    # the reasoning Options (harness/pipeline/reasoning.py)

Planning (harness/pipeline/planning.py) runs these first, so a mistyped flag is an error before
any model, tokenizer or task is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.core.errors import UserError

if TYPE_CHECKING:
    from harness.pipeline.reasoning import Options

# The values of --protocol (EvalConfig.protocol)
# "completion": a chat suite rendered as plain text for base checkpoints (MRCR)
PROTOCOLS = ("reference", "exact-length", "completion")


@dataclass
class EvalConfig:
    """Everything `harness eval` takes; field names follow the flags."""

    ckpts: str
    lengths: str | None = None  # None: each task's default (4k-128k for RULER-style tasks)
    suite: str | None = None
    tasks: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    last: int | None = None
    # None (the default): DEFAULT_SAMPLES per length-controlled task and length, every item of the
    # tasks that are not (LongBench, MMLU, HellaSwag); a number caps every task at it.
    samples: int | None = None
    seed: int = 42
    backend: str = "hf"
    dtype: str = "auto"
    batch_size: int = 8
    max_model_len: int | None = None
    max_length: int | None = None  # LongBench truncation budget (prompt + generation); default: the context
    rope_theta: float | None = None
    rope_scaling: dict | None = None
    tensor_parallel_size: int = 1
    data_parallel: int = 1
    ray_address: str | None = None
    shard_samples: bool = False  # split each (checkpoint, task, length) into sample ranges across engines
    device_map: str | None = None  # hf backend: "auto" spreads one model over the worker's visible GPUs
    name: str | None = None
    out: str | None = None
    threshold: float | None = None
    chat_template: bool = False
    cache_dir: str | None = None
    progress: bool = True
    # A served model (--backend openai): the name it is served under and where; prompts are
    # counted with --tokenizer (default: the model name).
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    request_timeout: float = 600.0
    retries: int = 5
    tokenizer: str | None = None
    # Instruct / reasoning controls, every backend (harness/pipeline/reasoning.py).
    no_answer_prefix: bool = False
    max_new_tokens: str | None = None  # "N" or "TASK=N,..."
    system_prompt: str | None = None
    strip_thinking: bool = False
    max_thinking_tokens: int | None = None  # a thinking budget apart from the answer's (harness/pipeline/thinking.py)
    prefix_reuse: bool = True  # compute shared prompt prefixes once (never changes an output)
    # Input protocol of the families with a published reference (tasks/base.py Task.protocols):
    # "reference" shows the model the reference's own inputs, "exact-length" fills L in its tokens.
    protocol: str = "reference"
    no_doctor: bool = False  # `harness eval --no-doctor`: the set-up checks were skipped (provenance says)
    # Which samples of each (task, length) to plan: {task: {length: [index, ...]}}, indices within the
    # cell's pool (the samples a plain run would take); a cell not named is planned with no sample.
    # None: every sample of the pool. Sequential comparisons (harness/pipeline/sequential_run.py) choose
    # their rounds' samples here; a sample's content and record key do not depend on it.
    selection: dict[str, dict[int, list[int]]] | None = None


def check_numbers(cfg: EvalConfig) -> None:
    """Counts and sizes that cannot be (and --device-map where it means nothing): UserError."""
    if cfg.samples is not None and cfg.samples < 1:
        raise UserError(f"--samples {cfg.samples}: pass a positive number of samples")
    if cfg.batch_size < 1:
        raise UserError(f"--batch-size {cfg.batch_size}: pass a positive batch size")
    if cfg.data_parallel < 1 or cfg.tensor_parallel_size < 1:
        raise UserError("--data-parallel and --tensor-parallel-size must be positive")
    if cfg.device_map is not None and cfg.backend != "hf":
        raise UserError("--device-map is for --backend hf: vLLM spreads a model with --tensor-parallel-size")


def check_options(cfg: EvalConfig) -> Options:
    """The reasoning Options; UserError on bad combinations (the model source checks its own flags)."""
    from harness.models.runners.registry import backend_names
    from harness.pipeline.reasoning import Options, parse_max_new_tokens

    if cfg.backend not in backend_names():
        raise UserError(f"unknown backend {cfg.backend!r}: choose {', '.join(backend_names())}")
    if cfg.concurrency < 1 or cfg.retries < 0 or not cfg.request_timeout > 0:
        raise UserError("--concurrency and --request-timeout must be positive, --retries at least 0")
    if cfg.system_prompt is not None and not cfg.chat_template:
        raise UserError("--system-prompt needs --chat (a system turn exists only in a chat template)")
    return Options(
        answer_prefix=not cfg.no_answer_prefix,
        max_new_tokens=parse_max_new_tokens(cfg.max_new_tokens),
        system_prompt=cfg.system_prompt,
        strip_thinking=cfg.strip_thinking,
        max_thinking_tokens=_thinking_budget(cfg.max_thinking_tokens),
    )


def _thinking_budget(n: int | None) -> int | None:
    """--max-thinking-tokens: a positive whole number of tokens, or not given."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise UserError(f"--max-thinking-tokens {n!r}: pass a positive number of tokens")
    return n
