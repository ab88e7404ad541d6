"""benchmarks/train_step.py runs end to end at a toy size (no timing asserted: speed lives in the script)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "train_step.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_train_step", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_step_benchmark_small(capsys):
    bench = _load()
    rows = bench.run_cpu(bench.main.__globals__["argparse"].Namespace(lengths=[512], steps=1, threads=1))
    assert rows[0]["window"] == 512 and rows[0]["full"] > 0 and rows[0]["anchor"] > 0
    assert 0 < rows[0]["pairs"] <= 1
    assert bench.main(["--section", "cuda", "--steps", "1"]) == 0
    out = capsys.readouterr().out
    assert "anchor/full" in out
    import torch

    if not torch.cuda.is_available():
        assert "skipped, no CUDA device" in out


def test_lognormal_windows_have_realistic_documents():
    bench = _load()
    wins = bench.windows(8192, 6, 1024, seed=1)
    lengths = []
    for w in wins:
        starts = w.doc_starts
        ends = starts[1:] + [len(w)]
        lengths += [e - s for s, e in zip(starts, ends)]
    assert all(len(w) == 8192 and w.input_ids[0] == 0 for w in wins)
    # Many short pieces and a few long ones: the median sits well below the mean.
    lengths.sort()
    assert lengths[len(lengths) // 2] < sum(lengths) / len(lengths)


def test_probe_cost_section_small(capsys):
    """The probes section at a toy window: both timings positive, the table printed with the default marked."""
    bench = _load()
    ns = bench.main.__globals__["argparse"].Namespace
    res = bench.run_probes(ns(threads=1, probe_window=256, probe_every=0, probe_rounds=1, probe_steps=1))
    assert res["window"] == 256 and res["step"] > 0 and res["probe"] > 0 and res["probe_steps"] > 0
    assert set(res["parts"]) == {"needle", "position", "rope"} and res["rope_len"] == 256
    out = capsys.readouterr().out
    assert "In-loop probes at window 256" in out and "(default)" in out
