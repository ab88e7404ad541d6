"""Outputs of `harness diagnose rope`: results.json, PNG plots like the paper's Figure 1, an HTML page.

    write_report(result, out_dir)   # result = {"settings": ..., "runs": [...]} from the command

Files written in out_dir:
  rope_diagnostic.json  every number (schema below), the source of the other two
  figure1.png           D vs Δ1 | per-token difference (Δ1 = 0) | D_logit vs length (Figure 1)
  sources.png           D vs Δ1 for each error source alone, all low, and the model run
  index.html            self-contained page (plots inlined, tables of the numbers)

JSON: {"schema_version": 1, "kind": "rope_diagnostic", "paper", "definitions", "settings",
"provenance", "runs": [{"checkpoint", "dtype", "product", "model", "num_samples",
"D": {"shifts", "delta2", "mean", "std", "per_sample", "per_layer_mean"},
"per_token": {"delta1", "delta2", "mean"}, "D_logit": {"delta1", "delta2", "lengths", "mean", "std"},
"sources": {"shifts", "precisions", "baseline", "angles", "rotated", "product", "all_low", "interaction"}}]}
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

SCHEMA_VERSION = 1
JSON_NAME = "rope_diagnostic.json"
DEFINITIONS = {
    "D": "Eq. 4: sum over layers, heads and key positions j of n_j * sum_i |ATTN_ij(d1) - ATTN_ij(d2)|, "
    "n_j = 1/(L-j+1) (n = [1/L, ..., 1])",
    "per_token": "the terms of Eq. 4 for each key position j before the sum over j (they add up to D), d1 = 0",
    "D_logit": "Eq. 5: (1/T) sum over layers, heads and queries i of |A_i1(d1) - A_i1(d2)|, A = q.k/sqrt(d), "
    "first key only, d1 = 0",
    "sources": "pre-RoPE q/k fixed; RoPE and q.k redone with one source at the model's precision (rest fp64), "
    "all low, none (baseline); interaction = all_low - (angles + rotated + product)",
}


def run_label(run: dict, runs: list[dict]) -> str:
    name = Path(run["checkpoint"]).name
    if len({r["checkpoint"] for r in runs if Path(r["checkpoint"]).name == name}) > 1:  # same name, two paths
        name = run["checkpoint"]
    return f"{name} {run['dtype']}"


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from harness.core.errors import MissingExtra

        raise MissingExtra("PNG plots (pass --no-plots to skip them)", "pip install matplotlib") from None


def _pos(values: list[float]) -> list[float]:
    """Values for a log axis: exact zeros (D(Δ, Δ)) become gaps instead of breaking the scale."""
    return [v if v > 0 else float("nan") for v in values]


def _plot_figure1(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for run in runs:
        label = run_label(run, runs)
        d = run["D"]
        # The paper leaves out Δ1 = Δ2 (D is 0 there) to keep the log scale readable.
        keep = [i for i, s in enumerate(d["shifts"]) if s != d["delta2"]]
        axes[0].plot(range(len(keep)), _pos([d["mean"][i] for i in keep]), marker="o", label=label)
        axes[0].set_xticks(range(len(keep)), [str(d["shifts"][i]) for i in keep], rotation=60)
        if "per_token" in run:
            axes[1].plot(range(len(run["per_token"]["mean"])), _pos(run["per_token"]["mean"]), label=label, lw=0.8)
        if "D_logit" in run:
            axes[2].plot(run["D_logit"]["lengths"], _pos(run["D_logit"]["mean"]), marker="o", label=label)
    delta2 = runs[0]["D"]["delta2"] if runs else 16
    axes[0].set(title=f"D(Δ1, Δ2={delta2}) (Eq. 4)", xlabel="Δ1", ylabel="attention difference D", yscale="log")
    axes[1].set(
        title=f"per-token difference, Δ1=0, Δ2={delta2}", xlabel="key position j", ylabel="difference", yscale="log"
    )
    axes[2].set(
        title=f"first-token logit difference (Eq. 5), Δ1=0, Δ2={delta2}",
        xlabel="sequence length T",
        ylabel="D_logit",
        yscale="log",
    )
    axes[2].set_xscale("log", base=2)
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.tight_layout()
    _save_png(fig, path)
    plt.close(fig)


def _save_png(fig, path: Path) -> None:
    """The figure rendered in memory, then written atomically (a full disk keeps the old image)."""
    import io

    from harness.core.atomic import atomic_write

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write(path, buf.getvalue())


def _plot_sources(result: dict, path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in result["runs"] if "sources" in r]
    if not runs:
        return False
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
    for ax, run in zip(axes[0], runs):
        src, d = run["sources"], run["D"]
        keep = [i for i, s in enumerate(src["shifts"]) if s != d["delta2"]]
        x = range(len(keep))
        ax.plot(x, _pos([d["mean"][i] for i in keep]), "k-o", label="model run")
        for name in ("all_low", "angles", "rotated", "product", "baseline"):
            prec = src["precisions"][name]
            ax.plot(
                x,
                _pos([src[name][i] for i in keep]),
                marker=".",
                label=f"{name} (angles {prec['angles']}, rotated {prec['rotated']}, q·k {prec['product']})",
            )
        ax.set_xticks(list(x), [str(src["shifts"][i]) for i in keep], rotation=60)
        ax.set_yscale("log")
        ax.set(title=f"error sources: {run_label(run, result['runs'])}", xlabel="Δ1", ylabel="D")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    _save_png(fig, path)
    plt.close(fig)
    return True


def _fmt(x: float) -> str:
    return f"{x:.3e}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html(result: dict, images: list[Path]) -> str:
    runs = result["runs"]
    parts = [
        (
            "<!doctype html><html><head><meta charset='utf-8'><title>RoPE precision diagnostic</title><style>"
            "body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0;"
            "font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}"
            "img{max-width:100%}code{background:#f4f4f4}</style></head><body>"
        ),
        "<h1>RoPE precision diagnostic</h1>",
        f"<p>Definitions from {html.escape(result['paper'])}:</p><ul>",
        *(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in result["definitions"].items()),
        "</ul>",
        "<h2>Settings</h2>",
        _table(
            ["setting", "value"],
            [[k, json.dumps(v)] for k, v in {**result["settings"], **result["provenance"]}.items()],
        ),
    ]
    for img in images:
        data = base64.b64encode(img.read_bytes()).decode()
        parts.append(f"<p><img alt='{html.escape(img.name)}' src='data:image/png;base64,{data}'></p>")
    if runs:
        parts += _d_section(runs)
        parts += _logit_section(runs)
        for r in runs:
            if "sources" in r:
                parts += _sources_section(r, runs)
    parts.append("</body></html>")
    return "\n".join(parts)


def _d_section(runs: list[dict]) -> list[str]:
    """D per Δ1, one column per run."""
    shifts = runs[0]["D"]["shifts"]
    return [
        "<h2>D(Δ1, Δ2) (Eq. 4), mean ± std over samples</h2>",
        _table(
            ["Δ1", *(run_label(r, runs) for r in runs)],
            [
                [str(s), *(f"{_fmt(r['D']['mean'][i])} ± {_fmt(r['D']['std'][i])}" for r in runs)]
                for i, s in enumerate(shifts)
            ],
        ),
    ]


def _logit_section(runs: list[dict]) -> list[str]:
    """D_logit per sequence length, one column per run that measured it."""
    logit_runs = [r for r in runs if "D_logit" in r]
    if not logit_runs:
        return []
    lengths = logit_runs[0]["D_logit"]["lengths"]
    return [
        "<h2>D_logit (Eq. 5) by sequence length</h2>",
        _table(
            ["T", *(run_label(r, runs) for r in logit_runs)],
            [
                [str(t), *(f"{_fmt(r['D_logit']['mean'][i])} ± {_fmt(r['D_logit']['std'][i])}" for r in logit_runs)]
                for i, t in enumerate(lengths)
            ],
        ),
    ]


def _sources_section(r: dict, runs: list[dict]) -> list[str]:
    """One run's error sources: the precision of each config, then D per Δ1 for each."""
    src = r["sources"]
    names = ["baseline", "angles", "rotated", "product", "all_low", "interaction"]
    precisions = "; ".join(
        f"{n}: " + ", ".join(f"{k} {v}" for k, v in src["precisions"][n].items()) for n in names[:-1]
    )
    return [
        f"<h2>Error sources: {html.escape(run_label(r, runs))}</h2>",
        "<p>" + precisions + "</p>",
        _table(
            ["Δ1", "model run", *names],
            [[str(s), _fmt(r["D"]["mean"][i]), *(_fmt(src[n][i]) for n in names)] for i, s in enumerate(src["shifts"])],
        ),
    ]


def write_report(result: dict, out_dir: str | Path, plots: bool = True) -> dict[str, Path]:
    """Write the JSON, the PNGs (when `plots`) and the HTML page; return their paths by kind."""
    from harness.core.provenance import provenance

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    from harness.core.atomic import atomic_write

    full = {
        "schema_version": SCHEMA_VERSION,
        "kind": "rope_diagnostic",
        "paper": "arXiv:2411.13476, Section 2, Eq. 4 and 5, Figure 1",
        "definitions": DEFINITIONS,
        "settings": result["settings"],
        "provenance": provenance(),
        "runs": result["runs"],
    }
    paths = {"json": out / JSON_NAME}
    atomic_write(paths["json"], json.dumps(full, indent=1))
    images = []
    if plots:
        _plot_figure1(full, out / "figure1.png")
        images.append(out / "figure1.png")
        if _plot_sources(full, out / "sources.png"):
            images.append(out / "sources.png")
        paths.update({p.stem: p for p in images})
    paths["html"] = out / "index.html"
    atomic_write(paths["html"], _html(full, images))
    return paths
