"""How long a RULER sweep takes on a node, projected from seconds per sample measured on one GPU.

    from sweep_projection import project
    p = project({"niah_single_1": 24.0, "vt": 19.5, ...})    # seconds per sample, per task, one GPU
    p.hours, p.arithmetic()

The formula, for tasks t with measured seconds per sample s_t on one GPU:

    hours = (sum over t of s_t) x samples / gpus / 3600          (samples = 500, gpus = 8)

It assumes data parallelism with no cross-GPU cost: every GPU holds its own copy of the model and
takes an equal share of the samples (500 samples x 13 tasks = 6,500 independent prompts over 8
GPUs), nothing is exchanged between them, and each sample costs on every GPU what it cost on the
measured one. Start-up (loading the model, once per GPU) and the last GPU waiting for the
slowest share are left out; at 6,500 prompts of 20 s or more they are minutes against hours.

It is set beside the reference's figure: RULER's 13 tasks at 128K, 500 samples each, for a
Llama-3.1-8B-class model took 26 hours on a node of 8 GPUs (issue 37). The target is 3 hours
or less.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

SAMPLES = 500  # RULER's samples per task and length
GPUS = 8  # one node
REFERENCE_HOURS = 26.0  # the reference's 13 tasks x 500 samples at 128K on a node of 8 GPUs (issue 37)
TARGET_HOURS = 3.0


@dataclass(frozen=True)
class Projection:
    seconds_per_sample: dict[str, float]  # task -> seconds one sample takes on one GPU
    samples: int = SAMPLES
    gpus: int = GPUS
    reference_hours: float = REFERENCE_HOURS
    target_hours: float = TARGET_HOURS
    estimated: tuple[str, ...] = field(default=())  # tasks whose seconds were estimated, not measured

    @property
    def seconds_per_round(self) -> float:
        """One sample of every task, on one GPU."""
        return sum(self.seconds_per_sample.values())

    @property
    def gpu_hours(self) -> float:
        return self.seconds_per_round * self.samples / 3600

    @property
    def hours(self) -> float:
        """Wall hours on `gpus` GPUs."""
        return self.gpu_hours / self.gpus

    def task_hours(self, task: str) -> float:
        """The share of `hours` one task takes."""
        return self.seconds_per_sample[task] * self.samples / self.gpus / 3600

    @property
    def speedup(self) -> float:
        """How many times fewer hours than the reference."""
        return self.reference_hours / self.hours if self.hours > 0 else float("inf")

    @property
    def meets_target(self) -> bool:
        return self.hours <= self.target_hours

    def arithmetic(self) -> str:
        """The sum written out, e.g. '325.0 s (13 tasks) x 500 / 8 GPUs / 3600 = 5.64 h'."""
        n = len(self.seconds_per_sample)
        return f"{self.seconds_per_round:,.1f} s ({n} tasks) x {self.samples} / {self.gpus} GPUs / 3600 = {self.hours:.2f} h"


def project(
    seconds_per_sample: Mapping[str, float],
    samples: int = SAMPLES,
    gpus: int = GPUS,
    estimated: tuple[str, ...] = (),
) -> Projection:
    """The projection of `samples` samples of every task on `gpus` GPUs (see the module docstring)."""
    if samples < 1 or gpus < 1:
        raise ValueError(f"samples {samples} and gpus {gpus} must be positive")
    bad = {t: s for t, s in seconds_per_sample.items() if not s >= 0}
    if bad:
        raise ValueError(f"seconds per sample must be >= 0: {bad}")
    return Projection(dict(seconds_per_sample), samples, gpus, estimated=tuple(estimated))
