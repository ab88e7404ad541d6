"""Small configs for one training run, one dataclass per component (torchtitan style).

    from training.config import TrainJob, paper_anchor_64k
    job = paper_anchor_64k(model="meta-llama/Llama-2-7b-hf", data=["slimpajama.jsonl"], out="runs/anchor")

Each component reads only its own config: the loop gets `OptimizerConfig` and `ScheduleConfig`,
checkpointing gets `CheckpointConfig`, and so on. `TrainJob` only groups them so a run can be
described (and saved beside each checkpoint) as one JSON object; a named run is a function that
returns a `TrainJob`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from training.modes import check_mode  # the attention modes (MODES) are defined once, in training.modes

KERNEL_CHOICES = ("auto", "dense", "sdpa-doc", "flex", "varlen")
DTYPES = ("bf16", "fp32")


@dataclass
class ModelConfig:
    path: str
    """Local save_pretrained directory (or, online, a hub name) of the causal LM to continue training."""
    rope_theta: float | None = None
    """RoPE base written into config.json before training (paper: 5e6 at 64K, 1e7 at 128K); None keeps the model's."""
    dtype: str = "bf16"
    """"bf16": fp32 master weights with bf16 autocast (the paper); "fp32": no autocast (tests, golden curve)."""
    grad_checkpointing: bool = False
    """Recompute each decoder layer in backward: activations for long windows at ~30% more compute."""
    kernel: str = "auto"
    """Attention kernel (training.attention): auto = varlen on CUDA, sdpa-doc on CPU."""


@dataclass
class DataConfig:
    paths: list[str]
    """jsonl/parquet files (or, online, hub dataset names) holding the documents."""
    mode: str = "anchor"
    """Attention mode, one of training.modes.MODES: full, intradoc, intradoc-reset or anchor."""
    window: int = 8192
    """Tokens per packed window, anchor included; checkpoints' max_position_embeddings is the larger of
    this and the model's own (training.model_files.context_after_training)."""
    batch_size: int = 1
    """Windows per micro-batch (per process under data parallelism)."""
    grad_accum: int = 1
    """Micro-batches per optimizer step; the loss is averaged over all their loss tokens."""
    text_field: str = "text"
    """Field of each record that holds the document text."""
    domain_tags: str | None = None
    """Field holding a per-document domain tag, prepended to the document with no loss on it."""
    interleave_chunks: int | None = None
    """Cut each document into up to K chunks shuffled across documents (intradoc/anchor only)."""
    max_docs: int | None = None
    """Read at most this many documents per source (quick runs)."""
    mixture: str | None = None
    """Per-source token budgets and long-document up-sampling (training.mixture spec)."""
    seed: int = 0
    """Seeds packing order, interleaving, the model's RNG and data-parallel sharding."""

    def __post_init__(self) -> None:
        check_mode(self.mode, self.interleave_chunks)  # one of MODES; interleaving only where it means something


@dataclass
class OptimizerConfig:
    lr: float = 2e-5
    """Peak learning rate (paper: 2e-5)."""
    weight_decay: float = 0.1
    """AdamW decoupled weight decay (paper: 0.1), applied to matrices only, not norms or biases."""
    betas: tuple[float, float] = (0.9, 0.95)
    """AdamW betas (paper: 0.9, 0.95)."""
    eps: float = 1e-8
    """AdamW epsilon."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this value; None disables clipping (the paper does not say)."""


@dataclass
class ScheduleConfig:
    steps: int = 2000
    """Optimizer steps to run (paper: 2000)."""
    warmup: int = 0
    """Linear warmup steps from 0 to lr; constant afterwards (paper: constant lr)."""
    max_minutes: float | None = None
    """Stop after the first step that ends this many minutes of training (summed over resumes; model
    loading not counted) and checkpoint there; `steps` stays the upper bound. None: no limit. The lr
    schedule is warmup-then-constant, so stopping early trains exactly what a shorter --steps would."""


@dataclass
class CheckpointConfig:
    save_every: int = 10
    """Write an evaluable ckpt-<step> directory every this many steps ..."""
    keep_last: int | None = 5
    """... but only the last K of them (paper: 5 every 10 -> ckpt-1960..2000); None keeps all."""
    save_state_every: int | None = None
    """Write the full resumable state under <run>/state/ every N steps (and at the end); None: only at the end."""


# Probes every this many steps: a probe run cost 3.7-5.0 training steps on the demo's 2K window (CPU, shared), so
# 1.2-1.7% of training time (benchmarks/train_step.py --section probes; benchmarks/RESULTS.md).
DEFAULT_PROBE_EVERY = 300


@dataclass
class ProbeConfig:
    """The in-loop probes (training.probes): needle log-likelihood, loss by position, RoPE deviation D."""

    every: int = DEFAULT_PROBE_EVERY
    """Probe after every this many optimizer steps (logged with that step's row); 0 turns the probes off."""
    lengths: list[int] | None = None
    """Needle probe lengths in tokens, each at most the window; None: a quarter, a half and all of the window."""
    depths: list[float] = field(default_factory=lambda: [10.0, 50.0, 90.0])
    """Needle depths: the share (percent) of the haystack's lines before the needle."""
    docs: list[str] | None = None
    """Held-out documents for the loss by position (jsonl/parquet, read like --data with its --text-field;
    those that fill a window); None: text generated by training.corpus from a seed no run trains on."""
    num_docs: int = 2
    """Windows of held-out text scored for the loss by position."""
    buckets: int = 8
    """Position buckets of equal width over the window for the loss by position."""
    rope_len: int | None = None
    """Tokens of the window the RoPE deviation D is measured on (eager bf16, Δ1=0 vs Δ2=16); None: the
    window up to 1024 (its float64 rows cost L² per head and layer; the paper's T is 4096); 0: no D."""


@dataclass
class TrainJob:
    model: ModelConfig
    data: DataConfig
    out: str
    """Run directory: ckpt-<step>/, state/, log.jsonl."""
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    probes: ProbeConfig = field(default_factory=ProbeConfig)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def paper_anchor_64k(model: str, data: list[str], out: str, mode: str = "anchor") -> TrainJob:
    """The paper's 64K run (Table 1): theta 5e6, 8 windows of 64K per step, 2000 steps, last 5 ckpts every 10."""
    return TrainJob(
        model=ModelConfig(path=model, rope_theta=5e6, dtype="bf16", grad_checkpointing=True),
        data=DataConfig(paths=list(data), mode=mode, window=65536, batch_size=1, grad_accum=8),
        out=out,
        schedule=ScheduleConfig(steps=2000),
        checkpoint=CheckpointConfig(save_every=10, keep_last=5, save_state_every=100),
    )


def paper_anchor_128k(model: str, data: list[str], out: str, mode: str = "anchor") -> TrainJob:
    """The paper's 128K run: as 64K with theta 1e7 and 128K windows."""
    job = paper_anchor_64k(model, data, out, mode)
    job.model.rope_theta = 1e7
    job.data.window = 131072
    return job
