"""The JSON-ready result of one RoPE measurement (harness.diagnose.rope.measure): the per-sample
numbers reduced to means and spreads over samples, with the settings that define them.

The layout is harness.diagnose.report's "runs" entries (without the checkpoint name).
"""

from __future__ import annotations

from harness.diagnose.precision import SOURCES

PER_TOKEN_DELTA1 = 0  # the Δ1 whose per-token terms are reported (Figure 1, middle)
LOGIT_DELTA1 = 0  # the Δ1 of the first-key logit difference (Eq. 5, Figure 1 right)


def _stats(rows: list[list[float]]) -> tuple[list[float], list[float]]:
    """Mean and sample std (ddof=1; 0 with one sample) over samples, per column."""
    import statistics

    cols = list(zip(*rows))
    mean = [statistics.fmean(c) for c in cols]
    std = [statistics.stdev(c) if len(c) > 1 else 0.0 for c in cols]
    return mean, std


def summarise(per_sample, settings, configs, model_dtype, product, num_layers, layers) -> dict:
    """Means (and stds) over the samples' D, per-layer D, per-token terms, D_logit and error sources."""
    attn = layers[0]
    d_mean, d_std = _stats([s.d for s in per_sample])
    layer_mean = [_stats([s.d_layer[i] for s in per_sample])[0] for i in range(len(settings.shifts))]
    out = {
        "dtype": model_dtype,
        "product": product,
        "model": {
            "layers": num_layers,
            "heads": attn.config.num_attention_heads,
            "kv_heads": attn.config.num_key_value_heads,
            "head_dim": attn.head_dim,
        },
        "num_samples": len(per_sample),
        "D": {
            "shifts": list(settings.shifts),
            "delta2": settings.delta2,
            "mean": d_mean,
            "std": d_std,
            "per_sample": [s.d for s in per_sample],
            "per_layer_mean": layer_mean,
        },
    }
    if per_sample and per_sample[0].per_token is not None:
        out["per_token"] = {
            "delta1": PER_TOKEN_DELTA1,
            "delta2": settings.delta2,
            "mean": _stats([s.per_token for s in per_sample])[0],
        }
    if settings.logit_lengths:
        lm, ls = _stats([s.d_logit for s in per_sample])
        out["D_logit"] = {
            "delta1": LOGIT_DELTA1,
            "delta2": settings.delta2,
            "lengths": list(settings.logit_lengths),
            "mean": lm,
            "std": ls,
        }
    if settings.sources:
        src: dict = {"shifts": list(settings.shifts), "precisions": {n: p.__dict__ for n, p in configs.items()}}
        for name in configs:
            src[name] = _stats([s.sources[name] for s in per_sample])[0]
        src["interaction"] = [a - sum(src[s][i] for s in SOURCES) for i, a in enumerate(src["all_low"])]
        out["sources"] = src
    return out
