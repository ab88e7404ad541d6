"""Per-task timing of RULER samples through the hf runner, the engine `harness eval` runs: the
measurements of benchmarks/gpu_check.py's sweep section, and the estimate for tasks the time
budget did not reach.

    timing = measure_task(runner, "vt", pack.samples["vt"], Shape(runner.model))
    timing.seconds_per_sample, timing.prefill_tflops, timing.decode_tokens_per_s

A task's samples go to `runner.generate_each` in one call, as harness/pipeline/jobs.py hands over a
(task, length): the runner orders them, reuses their shared prefixes and decodes them together.
Each request is the one jobs.py builds from the sample, with one change: `min_new_tokens` is the
task's max_new_tokens, so no stop id can be chosen before the budget is spent. Random weights would
rarely stop anyway; this makes it certain, so every sample decodes its task's full budget (128
tokens for niah, 30 vt, 120 cwe, 50 fwe, 32 qa): a bound above what a trained model, which stops at
its answer, costs.

What is read, all of it public: the seconds `generate_each` gives per sample (its own compute, shared
prefix chunks split among their users), `runner.sample_stats` (prompt, reused and new tokens, prefill
seconds), the wall time of the call (tokenizing included), and the number of decoding steps, counted
by a forward pre-hook on the model from the shape of its input alone (DecodeSteps), which gives the
mean rows decoding together.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import final

# Tasks with different decode budgets first (128, 30, 120, 50, 32 new tokens), so a run cut by its
# time budget has measured every kind of sample before the others.
FIRST = ("niah_single_1", "vt", "cwe", "fwe", "qa_1")


def measure_order(names: Iterable[str]) -> list[str]:
    names = list(names)
    return [n for n in FIRST if n in names] + [n for n in names if n not in FIRST]


@final
class DecodeSteps:
    """Counts the decoding steps of `model` while entered: forward calls on `width` rows of one token
    each (the engine runs every step at its fixed width, filler rows included; a prefill runs one
    row of up to a grid chunk). A forward pre-hook reads the call's input_ids, nothing of the engine."""

    def __init__(self, model, width: int) -> None:
        self.model = model
        self.width = width
        self.steps = 0
        self._handle = None

    def _hook(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if getattr(ids, "shape", None) is not None and tuple(ids.shape) == (self.width, 1):
            self.steps += 1

    def __enter__(self) -> DecodeSteps:
        self._handle = self.model.register_forward_pre_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, *exc) -> None:
        if self._handle is not None:
            self._handle.remove()


@dataclass
class TaskTiming:
    task: str
    samples: int
    max_new_tokens: int
    wall_s: float  # the generate_each call, tokenizing included
    prompt_tokens: list[int] = field(default_factory=list)
    reused_tokens: int = 0
    new_tokens: int = 0
    prefill_s: float = 0.0  # summed over samples
    decode_s: float = 0.0  # summed over samples: each sample's share of the steps it decoded in
    prefill_flops: float = 0.0
    steps: int = 0  # decoding steps the engine ran (0: none seen)
    width: int = 0  # the engine's decode width, common.DECODE_ROWS
    peak_bytes: int | None = None
    tokens_match: bool = True  # the runner counted each prompt as the pack's generator did

    @property
    def seconds_per_sample(self) -> float:
        return self.wall_s / self.samples

    @property
    def prefill_per_sample(self) -> float:
        return self.prefill_s / self.samples

    @property
    def prefill_tflops(self) -> float:
        return self.prefill_flops / max(self.prefill_s, 1e-12) / 1e12

    @property
    def decode_tokens_per_s(self) -> float:
        return self.new_tokens / max(self.decode_s, 1e-12)

    @property
    def reused_share(self) -> float:
        return self.reused_tokens / max(1, sum(self.prompt_tokens))

    @property
    def decode_rows(self) -> float | None:
        """Mean rows decoding together: each sample takes part in one step per token after its first
        (the prefill chooses the first; min_new_tokens rules out an early stop)."""
        if not self.steps:
            return None
        return max(0, self.new_tokens - self.samples) / self.steps

    def rows_text(self) -> str:
        rows = self.decode_rows
        return "n/a" if rows is None else f"{rows:.1f} of {self.width}"

    def summary(self) -> str:
        peak = f", peak {self.peak_bytes / 2**30:.1f} GiB" if self.peak_bytes is not None else ""
        return (
            f"prefill {self.prefill_per_sample:.2f} s/sample at {self.prefill_tflops:.3g} TFLOP/s; "
            f"decode {self.decode_tokens_per_s:.1f} tok/s, rows {self.rows_text()}, "
            f"{self.new_tokens // self.samples}/{self.max_new_tokens} new; "
            f"{self.seconds_per_sample:.2f} s/sample{peak}"
        )


def request_of(sample: dict):
    """The GenerationRequest harness/pipeline/jobs.py builds from a sample (no chat: RULER's base
    prompts), with min_new_tokens = max_new_tokens (the module docstring says why)."""
    from harness.models.runners.base import GenerationRequest

    meta = sample.get("metadata") or {}
    new = int(sample["max_new_tokens"])
    return GenerationRequest(
        sample["input"] + sample["answer_prefix"],
        new,
        tuple(meta.get("stop", ())),
        stop_tokens=tuple(meta.get("stop_tokens", ())),
        min_new_tokens=new,
    )


def measure_task(runner, task: str, samples: list[dict], shape) -> TaskTiming:
    """Run a task's samples through `runner.generate_each` in one call and time them. `shape`:
    benchmarks/utilisation.py's Shape of the runner's model (the FLOPs of each prefill)."""
    import torch

    from harness.models.runners.common import DECODE_ROWS

    cuda = str(runner.device).startswith("cuda")
    requests = [request_of(s) for s in samples]
    t = TaskTiming(task, len(samples), int(samples[0]["max_new_tokens"]), 0.0)
    seconds: dict[int, float] = {}
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    with DecodeSteps(runner.model, DECODE_ROWS) as probe:
        t0 = time.perf_counter()
        for i, _text, sec in runner.generate_each(requests):
            seconds[i] = sec
        if cuda:
            torch.cuda.synchronize()
        t.wall_s = time.perf_counter() - t0
    t.steps, t.width = probe.steps, probe.width
    t.peak_bytes = int(torch.cuda.max_memory_allocated()) if cuda else None
    for i, s in enumerate(samples):
        st = runner.sample_stats[i]
        prompt, reused, new = int(st["prompt_tokens"]), int(st["reused_tokens"]), int(st["new_tokens"])
        prefill = float(st.get("prefill_seconds", 0.0))
        t.prompt_tokens.append(prompt)
        t.reused_tokens += reused
        t.new_tokens += new
        t.prefill_s += prefill
        t.decode_s += seconds[i] - prefill
        # the prompt's positions not reused, and the logits of its last one
        t.prefill_flops += shape.tokens(reused, prompt) + shape.logits(1)
        t.tokens_match = t.tokens_match and prompt == int(s["num_tokens"])
    return t


def estimate_seconds(timings: Iterable[TaskTiming], max_new_tokens: int) -> float:
    """Seconds per sample of a task not measured, from the tasks that were: their mean seconds per
    sample outside decoding (prefill, tokenizing: the same work at the same length) plus
    max_new_tokens x their decoding seconds per generated token."""
    timings = list(timings)
    if not timings:
        raise ValueError("nothing measured to estimate from")
    base = sum(t.seconds_per_sample - t.decode_s / t.samples for t in timings) / len(timings)
    per_token = sum(t.decode_s for t in timings) / max(1, sum(t.new_tokens for t in timings))
    return base + max_new_tokens * per_token


def fits(timings: Iterable[TaskTiming], samples: int, seconds_left: float | None) -> bool:
    """Whether a task of `samples` samples should finish in the seconds left, judged by the mean
    seconds per sample measured so far (the first task always runs; None: no budget)."""
    timings = list(timings)
    if seconds_left is None or not timings:
        return True
    mean = sum(t.seconds_per_sample for t in timings) / len(timings)
    return samples * mean <= seconds_left


def task_table(timings: dict[str, TaskTiming], estimates: dict[str, float], projection, length: int) -> str:
    """Markdown table, one line per task (measured, then estimated), and the projection's total."""
    head = (
        "task",
        "samples",
        "prompt tokens",
        "reused",
        "prefill s",
        "prefill TFLOP/s",
        "decode tok/s",
        "decode rows",
        "new tokens",
        "s/sample",
        f"h, {projection.samples} on {projection.gpus} GPUs",
        "source",
    )
    lines = [head]
    for name, t in timings.items():
        lines.append(
            (
                name,
                str(t.samples),
                f"{sum(t.prompt_tokens) / t.samples:,.0f}",
                f"{t.reused_share:.0%}",
                f"{t.prefill_per_sample:.2f}",
                f"{t.prefill_tflops:.3g}",
                f"{t.decode_tokens_per_s:.1f}",
                t.rows_text(),
                f"{t.new_tokens // t.samples}/{t.max_new_tokens}",
                f"{t.seconds_per_sample:.2f}",
                f"{projection.task_hours(name):.3f}",
                "measured",
            )
        )
    for name, sec in estimates.items():
        lines.append(
            (
                name,
                "0",
                f"~{length:,}",
                "",
                "",
                "",
                "",
                "",
                "",
                f"{sec:.2f}",
                f"{projection.task_hours(name):.3f}",
                "estimated",
            )
        )
    lines.append(
        (
            "all",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            f"{projection.seconds_per_round:.2f}",
            f"{projection.hours:.2f}",
            f"vs reference {projection.reference_hours:g} h",
        )
    )
    w = [max(len(row[i]) for row in lines) for i in range(len(head))]
    out = ["| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(row)) + " |" for row in lines]
    out.insert(1, "|" + "|".join("-" * (x + 2) for x in w) + "|")
    return "\n".join(out)
