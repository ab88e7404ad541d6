"""`harness demo` under several settings: what anchor minus full comes out as, and what each costs.

    python benchmarks/demo_settings.py --out runs/demo-settings                 # every setting (hours)
    python benchmarks/demo_settings.py --out runs/demo-settings --only default,fp32 --threads 2
    python benchmarks/demo_settings.py --out runs/demo-settings --table         # print what is recorded

Each setting is one `harness demo` in a fresh process (its own --out under --out, or a setting it
extends: the demo resumes, so "steps-400" continues "default"'s runs and "lengths-1k-4k" only
evaluates the new length). Recorded per setting, one JSON line in OUT/settings.jsonl (a re-run
replaces that setting's line): the corpus statistics, each run's suite average per length and Avg,
anchor minus full with its paired 95% interval and whether it is significant, the RoPE diagnostic
(bf16 and fp32 D at Δ1 = 0, Δ2 = 16, and the first token's share), wall time and the CPU time of
the demo process and its children (steadier than wall time on a shared machine). The table is
Markdown, for docs/demo.md. Settings are chosen before their outcome is known and every one is
reported, whichever way it goes; no seed is ever picked by its result.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# name -> (flags added to `harness demo`, the setting it extends or None, what it varies)
SETTINGS: dict[str, tuple[list[str], str | None, str]] = {
    "default": ([], None, "the defaults"),
    "fp32": (["--dtype", "fp32"], None, "fp32 training"),
    "short-docs": (["--long-share", "0"], None, "no long documents (the corpus before issue 25)"),
    "short-docs-fp32": (["--long-share", "0", "--dtype", "fp32"], None, "the demo before issue 25"),
    "long-0.2": (["--long-share", "0.2"], None, "fewer long documents"),
    "long-0.5": (["--long-share", "0.5"], None, "more long documents"),
    "steps-400": (["--steps", "400"], "default", "twice the steps (continues default)"),
    "lengths-1k-4k": (["--lengths", "1k,2k,4k"], "default", "adds 4K, past the window (extends default)"),
    "samples-24": (["--samples", "24"], "default", "3x the samples (extends default)"),
    "window-1k": (["--window", "1024", "--lengths", "1k"], None, "1K window, evaluated at 1K only"),
}


def _run(name: str, out: Path, threads: int) -> dict:
    what = SETTINGS[name][2]
    chain = [name]
    while SETTINGS[chain[-1]][1]:
        chain.append(SETTINGS[chain[-1]][1] or "")
    folder = out / chain[-1]
    argv = [sys.executable, "-m", "harness", "demo", "--out", str(folder)]
    for link in reversed(chain):  # a setting's flags come after those of the setting it extends
        argv += SETTINGS[link][0]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (out / f"{name}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr[-20000:])
    if proc.returncode:
        raise SystemExit(f"setting {name}: harness demo exited {proc.returncode}; see {out / (name + '.log')}")
    return {"setting": name, "what": what, "argv": argv[3:], "wall_s": wall, "cpu_s": cpu, **_outcome(folder, argv)}


def _outcome(folder: Path, argv: list[str]) -> dict:
    from harness.cli import build_parser
    from harness.core.lengths import format_length, parse_lengths
    from harness.demo.config import config_from_args
    from harness.demo.data import corpus_stats
    from harness.demo.summary import _delta_cells
    from leaderboards.diagnostic import deviation, first_token_share

    args = build_parser().parse_args(argv[3:])
    cfg = config_from_args(args)
    lengths = parse_lengths(cfg.lengths)
    data = cfg.data or str(
        next((folder / "data").glob(f"corpus-seed*-{cfg.corpus_docs}-w{cfg.window}-long{cfg.long_share:g}*.jsonl"))
    )
    stats, _ = corpus_stats(cfg, data)
    res = {n: json.loads((folder / "results" / n / "results.json").read_text()) for n in ("base", "full", "anchor")}
    scores = {}
    for name, r in res.items():
        suite = next(iter(r["suites"].values()))
        scores[name] = {format_length(L): suite["per_length"][str(L)]["mean"] for L in lengths} | {
            "Avg": suite["summary"]["avg"]["mean"]
        }
    labels = [format_length(L) for L in lengths] + ["Avg"]
    cells = _delta_cells(res["anchor"], res["full"], lengths)
    delta = {
        lab: {"d": d, "low": iv["low"], "high": iv["high"], "significant": iv["significant"]}
        for lab, (d, iv) in zip(labels, cells)
        if d is not None and iv
    }
    rope: dict[str, dict] = {}
    diag = folder / "diagnose" / "rope_diagnostic.json"
    if diag.exists():
        for run in json.loads(diag.read_text())["runs"]:
            rope.setdefault(run["name"], {})[run["dtype"]] = {"D": deviation(run), "first": first_token_share(run)}
    return {
        "dtype": cfg.dtype,
        "window": cfg.window,
        "steps": cfg.steps,
        "lengths": cfg.lengths,
        "samples": cfg.samples,
        "long_share": cfg.long_share,
        "corpus": {
            "median": stats.median,
            "p90": stats.p90,
            "spanning_share": stats.spanning_share,
            "spanning_docs": stats.spanning_docs,
            "docs": stats.docs,
        },
        "scores": scores,
        "delta": delta,
        "rope": rope,
    }


def _verdict(delta: dict) -> str:
    avg = delta.get("Avg")
    if not avg:
        return "?"
    if avg["significant"]:
        return "anchor wins" if avg["d"] > 0 else "anchor loses"
    return "tie"


def _rope_d(rope: dict, name: str, dtype: str) -> str:
    v = (rope.get(name) or {}).get(dtype) or {}
    return f"{v['D']:.2e}" if v.get("D") is not None else "—"


def _rope_share(rope: dict, name: str) -> str:
    v = (rope.get(name) or {}).get("bf16") or {}
    return f"{100 * v['first']:.1f}%" if v.get("first") is not None else "—"


def table(rows: list[dict]) -> str:
    head = (
        "| setting | dtype | long share | tokens in docs spanning the window | median / p90 doc | window | steps | "
        "lengths | samples | base Avg | full Avg | anchor Avg | anchor − full per length [95%] | Avg [95%] | "
        "outcome | D bf16 full / anchor | D fp32 | first token (bf16) | wall / CPU |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        per = ", ".join(
            f"{k} {v['d']:+.1f} [{v['low']:+.1f}, {v['high']:+.1f}]{'*' if v['significant'] else ''}"
            for k, v in r["delta"].items()
            if k != "Avg"
        )
        avg = r["delta"].get("Avg")
        avg_text = f"{avg['d']:+.1f} [{avg['low']:+.1f}, {avg['high']:+.1f}]" if avg else "—"
        rope = r.get("rope") or {}
        c = r["corpus"]
        scores = " | ".join(f"{r['scores'][n]['Avg']:.1f}" for n in ("base", "full", "anchor"))
        rope_text = (
            f"{_rope_d(rope, 'full', 'bf16')} / {_rope_d(rope, 'anchor', 'bf16')} | {_rope_d(rope, 'full', 'fp32')} | "
            + ", ".join(f"{n} {_rope_share(rope, n)}" for n in ("base", "full", "anchor"))
        )
        extra = " (extra)" if SETTINGS[r["setting"]][1] else ""
        lines.append(
            f"| {r['setting']} | {r['dtype']} | {r['long_share']:g} | {100 * c['spanning_share']:.0f}% | "
            f"{c['median']:.0f} / {c['p90']} | {r['window']} | {r['steps']} | {r['lengths']} | {r['samples']} | "
            f"{scores} | {per} | {avg_text} | {_verdict(r['delta'])} | {rope_text} | "
            f"{r['wall_s'] / 60:.1f} / {r['cpu_s'] / 60:.1f} min{extra} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="harness demo under several settings (see the module docstring)")
    ap.add_argument("--out", required=True, help="folder for the demo runs and settings.jsonl")
    ap.add_argument("--only", help=f"comma list of settings (default: all of {', '.join(SETTINGS)})")
    ap.add_argument("--threads", type=int, default=0, help="OMP/MKL threads per demo (default: torch's default)")
    ap.add_argument("--table", action="store_true", help="print the recorded table and exit")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = out / "settings.jsonl"
    names = [n.strip() for n in (args.only or ",".join(SETTINGS)).split(",") if n.strip()]
    bad = [n for n in names if n not in SETTINGS]
    if bad:
        ap.error(f"unknown setting(s) {', '.join(bad)}: choose from {', '.join(SETTINGS)}")

    def recorded() -> dict[str, dict]:
        rows = [json.loads(x) for x in record.read_text().splitlines() if x.strip()] if record.exists() else []
        return {r["setting"]: r for r in rows}

    if not args.table:
        for name in names:
            print(f"setting {name}: {SETTINGS[name][2]} ...", flush=True)
            row = _run(name, out, args.threads)
            rows = recorded() | {name: row}
            tmp = record.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
            tmp.replace(record)
            print(table([row]).splitlines()[-1], flush=True)
    rows = recorded()
    print(table([rows[n] for n in SETTINGS if n in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
