"""CPU path of benchmarks/gpu_check.py at its smallest size: every section runs, the table lists each
check, CUDA-only checks are skipped with a message, and the runner gives identical greedy outputs.

    OMP_NUM_THREADS=1 pytest -q tests/benchmarks/test_gpu_check.py
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _samples(directory: Path) -> None:
    # Two short RULER-shaped samples (Sample.to_json fields the runner section reads).
    d = directory / "niah_single_1"
    d.mkdir(parents=True)
    rows = [
        {
            "task": "niah_single_1",
            "length": 128,
            "index": i,
            "input": f"The magic number is {i}7. " * 8,
            "answer_prefix": " Answer:",
            "references": [f"{i}7"],
            "max_new_tokens": 6,
        }
        for i in range(2)
    ]
    (d / "128.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_cpu_path_smallest(tmp_path, tiny_llama_dir, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("checks the CPU path")
    gpu_check = _load()
    _samples(tmp_path / "samples")
    rc = gpu_check.main(["--small", "--model", str(tiny_llama_dir), "--samples", str(tmp_path / "samples")])
    out = capsys.readouterr().out
    assert rc == 0, out
    table = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert table[0].split("|")[1].strip() == "section"
    body = [[c.strip() for c in ln.split("|")[1:-1]] for ln in table[1:]]
    # Every training mode is checked for every CPU kernel, against the fp32 dense reference.
    from training.modes import MODES

    for mode in MODES:
        for kernel in ("dense", "sdpa-doc", "flex", "varlen-cpu-emulation"):
            row = [r for r in body if r[0] == "kernels" and r[1].startswith(f"{mode} {kernel} ")]
            assert len(row) == 1 and row[0][3] == "ok" and float(row[0][2]) < 0.1, (mode, kernel, row)
    assert any(r[0] == "train" and r[1].startswith("L=1024") and r[3] == "measured" for r in body)
    assert any(r[0] == "runner" and r[1].startswith("hf bf16, 2 samples") and "samples/s" in r[2] for r in body)
    assert ["runner", "greedy outputs identical across 2 runs", "True", "ok"] in body
    assert {r[1].split()[-1] for r in body if r[0] == "diagnose" and r[3] == "ok"} == {"bf16", "fp32"}
    for section in ("kernels", "train", "diagnose"):
        assert f"section {section}: " in out and any(
            r[0] == section
            and r[3] == "skipped: needs CUDA"
            or r[0] == section
            and r[3].startswith("skipped: needs CUDA")
            for r in body
        )


def test_runner_skip_and_bad_section(capsys):
    from harness.errors import UserError

    gpu_check = _load()
    assert gpu_check.main(["--sections", "runner"]) == 0
    assert "section runner: hf bf16 on RULER samples skipped: give --model and --samples" in capsys.readouterr().out
    with pytest.raises(UserError, match="unknown section"):
        gpu_check.main(["--sections", "kernel"])


def test_record_appends(tmp_path, monkeypatch):
    gpu_check = _load()
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "benchmarks").mkdir()
    gpu_check.main(["--sections", "runner", "--record"])
    text = (tmp_path / "benchmarks" / "RESULTS.md").read_text()
    assert text.startswith("\n## ") and "UTC, CPU" in text and "| runner " in text
