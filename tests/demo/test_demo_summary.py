"""The demo's summary: intervals on every number, the difference's paired interval, and in words
which differences are significant (constructed runs with a known shift, tests/leaderboard/paired_fixtures.py)."""

from __future__ import annotations

import json

from harness.demo.summary import _summary
from tests.leaderboard.paired_fixtures import write_paired


def test_summary_states_intervals_and_significance(tmp_path):
    paths = write_paired(tmp_path)
    loaded = {n: json.loads(paths[n].read_text()) for n in ("full", "anchor", "same")}
    out = _summary(loaded, [1024, 2048], "full")
    lines = out.splitlines()
    full = next(line for line in lines if line.startswith("full "))
    stats = loaded["full"]["suites"]["ruler"]["per_length"]["1024"]
    assert f"{stats['mean']:.1f} [{stats['ci_low']:.1f}, {stats['ci_high']:.1f}]" in full
    anchor = next(line for line in lines if line.startswith("anchor - full"))
    assert anchor.count("*") == 3  # 1K, 2K and Avg: all significant
    same = next(line for line in lines if line.startswith("same - full"))
    assert "*" not in same and "+0.0 [" in same
    assert "anchor - full: anchor is significantly better than full at 1K (+" in out
    assert "same - full: the difference is not significant at 1K, 2K, Avg (the interval contains 0" in out


def test_summary_without_samples_says_so(tmp_path):
    paths = write_paired(tmp_path)
    loaded = {n: json.loads(paths[n].read_text()) for n in ("full", "anchor")}
    for res in loaded.values():
        res["suites"]["ruler"].pop("samples")
    out = _summary(loaded, [1024, 2048], "full")
    assert "no interval at 1K, 2K, Avg (results without per-sample scores)" in out


# ------------------------------------------------ what the run can and cannot show (issue 25 §3)


def _loaded(tmp_path):
    paths = write_paired(tmp_path)
    return {n: json.loads(paths[n].read_text()) for n in ("full", "anchor", "same")}


def test_verdict_says_win_loss_or_tie_plainly(tmp_path):
    from harness.demo.summary import _delta_cells, verdict

    loaded, lengths, labels = _loaded(tmp_path), [1024, 2048], ["1K", "2K", "Avg"]
    win = verdict("anchor", "full", _delta_cells(loaded["anchor"], loaded["full"], lengths), labels)
    assert win.startswith("anchor beats full here: +") and "average over 1K, 2K" in win
    loss = verdict("full", "anchor", _delta_cells(loaded["full"], loaded["anchor"], lengths), labels)
    assert loss.startswith("full LOSES to anchor here: -")
    tie = verdict("same", "full", _delta_cells(loaded["same"], loaded["full"], lengths), labels)
    assert tie.startswith("same and full TIE here: +0.0 points") and "contains 0" in tie


def _stats(share: float):
    from training.demo_corpus import LengthStats

    return LengthStats(
        docs=1000, tokens=10**6, median=700, p90=3000, window=2048, spanning_docs=300, spanning_share=share
    )


def test_caveats_name_dtype_long_document_share_and_scale(tmp_path):
    from harness.demo.config import DemoConfig
    from harness.demo.summary import _caveats, _delta_cells

    loaded = _loaded(tmp_path)
    win = _delta_cells(loaded["anchor"], loaded["full"], [1024, 2048])
    lines = _caveats(DemoConfig(), _stats(0.71), True, " (measured)", win)
    text = "\n".join(lines)
    assert "training precision: bf16 (measured)" in text
    assert "71% of the training tokens sit in the 300 documents that span the 2048-token window" in text
    assert "median 700 tokens, 90th percentile 3000" in text
    assert "weak evidence about the paper's 7B/64K result" in text
    # 200 steps of 1 x 2048 = 409,600 tokens: 0.04% of the paper's 1.05B
    assert "scale: 200 steps of 1 x 2048 tokens (0.4M tokens) per mode, 0.04% of the paper's" in text
    assert "the diagnostic above measures that" in text
    assert "why anchor does not win" not in text  # it won
    timed = DemoConfig(window=32768, rope_samples=0)
    text = "\n".join(_caveats(timed, _stats(0.71), True, "", win, steps=146))
    assert "scale: 146 steps of 1 x 32768 tokens (4.8M tokens) per mode, 0.46% of the paper's" in text
    assert "(not measured in this run: --rope-samples 0)" in text


def test_caveats_give_the_known_reasons_when_anchor_does_not_win(tmp_path):
    from harness.demo.config import DemoConfig
    from harness.demo.summary import _caveats, _delta_cells

    loaded = _loaded(tmp_path)
    loss = _delta_cells(loaded["full"], loaded["anchor"], [1024, 2048])  # a significant loss
    cfg = DemoConfig(dtype="fp32")
    why = _caveats(cfg, _stats(0.09), False, "", loss)[-1]
    assert why.startswith("why anchor does not win here: most training tokens sit in documents shorter")
    assert "raise --long-share" in why and "fp32 training removes the bf16 RoPE error" in why
    tie = _delta_cells(loaded["same"], loaded["full"], [1024, 2048])
    why = _caveats(DemoConfig(), _stats(0.71), True, "", tie)[-1]
    assert why == (
        "why anchor does not win here: 8 samples per task and length leave intervals wider than the difference: "
        "more --samples (or checkpoints) would be needed to tell"
    )
    assert "first 1000 documents" in _caveats(DemoConfig(), _stats(0.71), False, "", tie)[1]


def test_rope_table_prints_each_run_and_dtype(tmp_path):
    from harness.demo.rope import _rope_table

    def run(name, dtype, d, tokens, ckpt):
        return {
            "name": name,
            "checkpoint": ckpt,
            "dtype": dtype,
            "D": {"shifts": [0], "mean": [d]},
            "per_token": {"mean": tokens},
        }

    out = tmp_path / "demo"
    runs = [
        run("base", "bf16", 0.6, [0.3, 0.3], "/repo/assets/demo-base"),
        run("base", "fp32", 1e-4, [1e-5, 9e-5], "/repo/assets/demo-base"),
        run("anchor", "bf16", 0.5, [0.05, 0.45], str(out / "runs" / "anchor" / "ckpt-200")),
        run("anchor", "fp32", 2e-4, [0.0, 2e-4], str(out / "runs" / "anchor" / "ckpt-200")),
    ]
    lines = _rope_table(runs, out).splitlines()
    assert lines[0].split() == [
        "run",
        "checkpoint",
        "D",
        "bf16",
        "D",
        "fp32",
        "bf16/fp32",
        "first",
        "token",
        "bf16",
        "first",
        "token",
        "fp32",
    ]
    assert lines[2].split() == ["base", "demo-base", "6.00e-01", "1.00e-04", "6000x", "50%", "10%"]
    assert lines[3].split() == ["anchor", "runs/anchor/ckpt-200", "5.00e-01", "2.00e-04", "2500x", "10%", "0%"]


def _rope_runs(shares: list[float], ratio: float, model: str):
    runs = []
    for i, share in enumerate(shares):
        name, ckpt = f"r{i}", f"{model}-{i}"
        tokens = [share, 1 - share]  # D = 1 in bf16, the first token's share as given
        runs.append(
            {
                "name": name,
                "checkpoint": ckpt,
                "dtype": "bf16",
                "D": {"shifts": [0], "mean": [1.0]},
                "per_token": {"mean": tokens},
            }
        )
        runs.append(
            {
                "name": name,
                "checkpoint": ckpt,
                "dtype": "fp32",
                "D": {"shifts": [0], "mean": [1.0 / ratio]},
                "per_token": {"mean": [0.5, 0.5]},
            }
        )
    return runs


def test_rope_caveat_reports_both_findings_plainly():
    from harness.demo.config import DEFAULT_MODEL, DemoConfig
    from harness.demo.rope import rope_caveat

    low = rope_caveat(DemoConfig(), _rope_runs([0.01, 0.004], 7000, "m"))
    assert low.startswith(
        "RoPE: under a shift of every position id, bf16 changes attention 7,000-7,000x more than fp32"
    )
    assert "the paper's Section 2 finding)" in low
    assert "the first token carries only 0-1% of it here, where the paper finds it dominant" in low
    assert "pretrained with document masking" in low and str(DEFAULT_MODEL) == DemoConfig().model
    other = rope_caveat(DemoConfig(model="/models/smollm2"), _rope_runs([0.02], 7000, "m"))
    assert "document masking" not in other and "why is not known for this model" in other
    high = rope_caveat(DemoConfig(model="/models/smollm2"), _rope_runs([0.6, 0.4], 50, "m"))
    assert high.endswith("the first token carries 40-60% of it, as the paper finds")
    weak = rope_caveat(DemoConfig(), _rope_runs([0.5], 3, "m"))
    assert "a weak effect here" in weak
    assert rope_caveat(DemoConfig(), []) is None
