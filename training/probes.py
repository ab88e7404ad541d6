"""In-loop probes: every --probe-every steps, three cheap readings of the live weights, logged with the loss.

    probes = open_probes(job, tokenizer, ctx)          # None when off; makes or reads RUN/probe_set.json
    probes.check_model(model)                          # once the model is loaded
    if probes is not None and probes.due(step):
        row.update(probes.run(model))                  # fields of that step's log row

The three probes (inputs: the run's fixed probe set, training.probe_set):

- needle log-likelihood (`probe_needle/`): log P(answer | prompt), teacher-forced, of a RULER
  niah_single_1 needle at each length and depth (`logp_<length>_d<depth>`, nats, summed over the
  answer's tokens; closer to 0 is better), their mean (`logp_mean`), and the share of prompts whose
  every answer token is the model's top choice (`hit_share`: greedy decoding would write the answer).
- loss by position (`probe_pos/`): the mean token cross-entropy over held-out windows in equal
  buckets of the predicted token's position (`loss_<first>-<last>`), and over all of them
  (`loss`). A model that uses late positions keeps the late buckets at or below the early ones.
- RoPE deviation (`probe_rope/`): D of Eq. 4 (Δ1 = 0 vs Δ2 = 16, the paper's Figure 1 point) of
  the live weights rounded to bf16, eager attention, on one window (`D_bf16`), and the share of
  D at the first key (`first_token_share`), by training.rope_deviation, the RoPE diagnostic's
  own computation (`harness diagnose rope` gives the same number on the step's checkpoint).

Plus `probe/seconds`, the probes' wall time at that step.

They do not change the training trajectory: no random number is drawn (the probe set has its own
seeded stream; the bf16 copy for D is built under a forked RNG), the model runs in eval mode
without gradients and returns to train mode, and its attention kernel is swapped for a causal
one-sequence kernel (training.attention_capture) only while they run. The needle and position
probes run in the training dtype (bf16 autocast over fp32 weights, or fp32); D runs on a bf16
copy of the weights kept for the run (2 bytes per parameter on the training device).

Under torchrun every rank runs the needle and position probes on whole sequences (FSDP gathers the
weights as in training); D gathers the full weights onto rank 0 and runs there. Only rank 0 logs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from harness.core.errors import UserError
from training.probe_set import DEFAULT_ROPE_LEN, ProbeSet, ProbeSpec, open_probe_set

if TYPE_CHECKING:
    from training.config import TrainJob

ROPE_DELTA1, ROPE_DELTA2 = 0, 16  # the paper's Figure 1 (middle): D between shifts 0 and 16
ROPE_KERNEL = "eager"  # as the paper and `harness diagnose rope`'s default
PROBE_KERNEL = "sdpa"  # causal attention over one sequence (training.attention_capture)
CE_ROWS = 4096  # positions per float32 cross-entropy chunk: the float32 logits of a whole long window can be GBs
NEEDLE_MARGIN = 32  # tokens beyond a one-line needle prompt that a default needle length must leave


def probe_spec(job: TrainJob, tokenizer, *, quiet: bool = False) -> ProbeSpec | None:
    """The run's resolved probe settings, or None when the probes are off (every 0, or past --steps)."""
    p, d = job.probes, job.data
    if p.every < 1 or p.every > job.schedule.steps:
        return None
    for length in p.lengths or []:
        if length > d.window:
            raise UserError(
                f"--probe-lengths {length} is longer than --window {d.window}: pass lengths up to the window"
            )
    if p.buckets > d.window:
        raise UserError(f"--probe-buckets {p.buckets} exceeds --window {d.window}: pass at most one bucket per token")
    rope_len = min(d.window, DEFAULT_ROPE_LEN) if p.rope_len is None else p.rope_len
    if rope_len > d.window:
        raise UserError(f"--probe-rope-len {rope_len} is longer than --window {d.window}: pass at most the window")
    lengths = p.lengths if p.lengths is not None else _default_lengths(d.window, tokenizer, quiet)
    return ProbeSpec(
        seed=d.seed,
        window=d.window,
        lengths=sorted(set(lengths)),
        depths=[float(x) for x in p.depths],
        docs=list(p.docs) if p.docs else None,
        text_field=d.text_field,
        num_docs=p.num_docs,
        rope_len=rope_len,
    )


def _default_lengths(window: int, tokenizer, quiet: bool) -> list[int]:
    """A quarter, a half and all of the window: those that hold a needle prompt (a tiny test window
    may hold none; then the needle probe is off and says so)."""
    from training.probe_set import shortest_needle_prompt

    floor = shortest_needle_prompt(tokenizer)
    kept = [n for n in sorted({window // 4, window // 2, window}) if n >= floor + NEEDLE_MARGIN]
    if not kept and not quiet:
        print(
            f"probes: no needle probe (the {window}-token window is shorter than a needle prompt, "
            f"{floor} tokens, plus {NEEDLE_MARGIN})",
            flush=True,
        )
    return kept


def open_probes(job: TrainJob, tokenizer, ctx) -> Probes | None:
    """The run's probes (None when off), their probe set made or read back (rank 0 writes it)."""
    spec = probe_spec(job, tokenizer, quiet=ctx.rank != 0)
    if spec is None:
        return None
    probe_set = open_probe_set(job.out, spec, tokenizer, write=ctx.rank == 0)
    if probe_set.max_id() >= len(tokenizer):
        raise UserError(
            f"{probe_set.path} holds token ids beyond this tokenizer's {len(tokenizer)}: it was made for another "
            "model; pass a new --out"
        )
    if ctx.rank == 0:
        print(
            f"probes: every {job.probes.every} steps; probe set {probe_set.path} (sha256 {probe_set.sha256[:16]}…): "
            f"{len(probe_set.needles)} needle prompts, {len(probe_set.documents)} held-out windows, "
            + (f"D on {spec.rope_len} tokens" if spec.rope_len else "no D"),
            flush=True,
        )
    return Probes(job, spec, probe_set, ctx)


class Probes:
    """The probes of one run (module docstring): `due(step)`, `run(model) -> {field: value}`."""

    def __init__(self, job: TrainJob, spec: ProbeSpec, probe_set: ProbeSet, ctx):
        self.every, self.buckets = job.probes.every, job.probes.buckets
        self.spec, self.probe_set, self.ctx = spec, probe_set, ctx
        self.bf16 = job.model.dtype == "bf16"
        self._shadow: Any = None
        self.seconds: dict[str, float] = {}  # the last run's time per probe
        width = len(str(spec.window))
        # Token i (predicted at position i - 1) falls in bucket i * buckets // window: b's first token is ceil(b * window / buckets).
        edges = [-(-b * spec.window // self.buckets) for b in range(self.buckets + 1)]
        self.bucket_names = [
            f"probe_pos/loss_{edges[b]:0{width}d}-{edges[b + 1] - 1:0{width}d}" for b in range(self.buckets)
        ]
        self.needle_names = [f"probe_needle/logp_{n.length:0{width}d}_d{n.depth:g}" for n in probe_set.needles]

    def record(self) -> dict:
        """What harness_training.json records about the probes."""
        return {"every": self.every, "file": self.probe_set.path.name, "sha256": self.probe_set.sha256}

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def check_model(self, model) -> None:
        """Refuse, before the first step, a model the D probe cannot measure."""
        if self.spec.rope_len:
            from training.attention_capture import attention_layers
            from training.rope_deviation import check_full_attention

            attention_layers(model)
            check_full_attention(model, self.spec.rope_len, "pass a --probe-rope-len")

    def run(self, model) -> dict[str, float]:
        """Every probe on the live model; the model comes back in the mode and kernel it had."""
        import torch

        from training.attention_capture import capture_attention

        t0 = time.perf_counter()
        device = next(model.parameters()).device
        autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), autocast, capture_attention(model, PROBE_KERNEL, _ignore):
                out = self.needles(model, device)
                t1 = time.perf_counter()
                out.update(self.positions(model, device))
        finally:
            model.train(was_training)
        t2 = time.perf_counter()
        if self.spec.rope_len:
            out.update(self.rope(model))
        t3 = time.perf_counter()
        # Each probe's share of the time (benchmarks/train_step.py --section probes reports them).
        self.seconds = {"needle": t1 - t0, "position": t2 - t1, "rope": t3 - t2}
        out["probe/seconds"] = t3 - t0
        return out

    def needles(self, model, device) -> dict[str, float]:
        """log P(answer) of each needle prompt, teacher-forced: logits only where answer tokens are predicted."""
        import torch

        out: dict[str, float] = {}
        hits = 0
        for name, probe in zip(self.needle_names, self.probe_set.needles):
            ids = torch.tensor([probe.input_ids], device=device)
            keep = torch.arange(probe.answer_start - 1, ids.shape[1] - 1, device=device)
            logits = model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits[0].float()
            targets = ids[0, probe.answer_start :]
            out[name] = float(torch.log_softmax(logits, -1).gather(-1, targets[:, None]).sum())
            hits += bool((logits.argmax(-1) == targets).all())
        if self.probe_set.needles:
            out["probe_needle/logp_mean"] = sum(out.values()) / len(out)
            out["probe_needle/hit_share"] = hits / len(self.probe_set.needles)
        return out

    def positions(self, model, device) -> dict[str, float]:
        """Mean cross-entropy per position bucket over the held-out windows, and over all positions."""

        sums, counts = self.bucket_sums(model, device)
        out = {name: float(sums[b] / counts[b]) for b, name in enumerate(self.bucket_names) if counts[b]}
        out["probe_pos/loss"] = float(sums.sum() / counts.sum())
        return out

    def bucket_sums(self, model, device):
        """(summed float64 cross-entropy, token count) per bucket of the predicted token's position."""
        import torch
        import torch.nn.functional as F

        sums = torch.zeros(self.buckets, dtype=torch.float64, device=device)
        counts = torch.zeros(self.buckets, dtype=torch.int64, device=device)
        for doc in self.probe_set.documents:
            ids = torch.tensor([doc], device=device)
            logits = model(input_ids=ids, use_cache=False).logits[0]
            for r0 in range(0, ids.shape[1] - 1, CE_ROWS):
                r1 = min(ids.shape[1] - 1, r0 + CE_ROWS)
                nll = F.cross_entropy(logits[r0:r1].float(), ids[0, r0 + 1 : r1 + 1], reduction="none")
                bucket = torch.arange(r0 + 1, r1 + 1, device=device) * self.buckets // self.spec.window
                sums.index_add_(0, bucket, nll.double())
                counts.index_add_(0, bucket, torch.ones_like(bucket))
            del logits
        return sums.cpu(), counts.cpu()

    def rope(self, model) -> dict[str, float]:
        """D (Eq. 4) of the live weights in bf16 on the probe set's window (rank 0; a collective gather first)."""
        from training.rope_deviation import window_deviation

        state = self.ctx.full_state_dict(model)  # every rank takes part under FSDP; rank 0 gets the weights
        if self.ctx.rank != 0:
            return {}
        shadow = self._shadow_model(model)
        shadow.load_state_dict(state)  # fp32 -> bf16, rounded to nearest as .to(bfloat16) does
        dev = window_deviation(shadow, self.probe_set.rope_window, ROPE_DELTA1, ROPE_DELTA2, kernel=ROPE_KERNEL)
        return {"probe_rope/D_bf16": dev.d, "probe_rope/first_token_share": dev.first_token_share}

    def _shadow_model(self, model):
        """A bf16 model of the same architecture on the training device, made once; its random init
        runs under a forked RNG so training's streams are left as they were."""
        if self._shadow is None:
            import copy

            import torch
            from transformers import AutoModelForCausalLM

            device = self.ctx.device
            forked = [device] if device.type == "cuda" else []
            with torch.random.fork_rng(devices=forked), torch.device(device):
                shadow = AutoModelForCausalLM.from_config(
                    copy.deepcopy(model.config), dtype=torch.bfloat16, attn_implementation=ROPE_KERNEL
                )
            self._shadow = shadow.eval()
        return self._shadow


def _ignore(layer, q, k) -> None:
    """The capture's callback: the probes only borrow its causal one-sequence kernel."""
