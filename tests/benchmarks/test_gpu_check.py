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
    runner = [r for r in body if r[0] == "runner" and r[1].startswith("hf bf16 L=128, 2 samples")]
    assert len(runner) == 1 and "samples/s" in runner[0][2] and "rows 1," in runner[0][2] and runner[0][3] == "ok"
    assert ["runner", "greedy outputs identical across 2 runs, L=128", "True", "ok"] in body
    assert {r[1].split()[-1] for r in body if r[0] == "diagnose" and r[3] == "measured"} == {"bf16", "fp32"}
    # the pass alone (held to the target on CUDA) and with the error-source breakdown
    for what in ("pass vs", "pass + error sources vs"):
        assert len([r for r in body if r[0] == "diagnose" and f"L=128 {what} plain forward" in r[1]]) == 2, what
    # Every row was printed when measured, before the table.
    first_table_line = out.index("| section")
    for r in body:
        assert out.index("row: " + " | ".join(r)) < first_table_line
    for section in ("kernels", "train", "diagnose"):
        assert f"section {section}: " in out and any(
            r[0] == section
            and r[3] == "skipped: needs CUDA"
            or r[0] == section
            and r[3].startswith("skipped: needs CUDA")
            for r in body
        )


def test_synthetic_runner_and_bad_section(capsys):
    """Without --model/--samples the runner section builds its own random Llama (byte tokenizer)."""
    from harness.core.errors import UserError

    gpu_check = _load()
    assert gpu_check.main(["--sections", "runner", "--small", "--per-file", "3"]) == 0
    out = capsys.readouterr().out
    assert "row: runner | bf16 matmul peak, this device | " in out
    for length in (128, 256):
        assert f"row: runner | hf bf16 L={length}, 3 samples | " in out
        assert f"row: runner | greedy outputs identical across 2 runs, L={length} | True | ok" in out
        assert f"row: runner | utilisation L={length} | prompt " in out and "of the bf16 matmul peak" in out
    # the decode width at the shortest length and the one nearest 32K (here 256): DECODE_ROWS vs one row
    from harness.models.runners.common import DECODE_ROWS

    for length in (128, 256):
        line = next(
            ln
            for ln in out.splitlines()
            if ln.startswith(f"row: runner | decode width 1 vs {DECODE_ROWS}, L={length} |")
        )
        assert " tok/s = x" in line and line.endswith("| measured")
        assert " ms a step, 2 layers; " in line  # the --small model's layers: the per-layer cost is readable
        assert f"per-row attention at {DECODE_ROWS}: " in line and "(one call per layer x" in line
    assert gpu_check.main(["--sections", "runner", "--model", "x"]) == 0
    assert "skipped: give both --model and --samples" in capsys.readouterr().out
    with pytest.raises(UserError, match="unknown section"):
        gpu_check.main(["--sections", "kernel"])


def test_budget_skips_the_rows_left(capsys):
    gpu_check = _load()
    assert gpu_check.main(["--small", "--sections", "train,diagnose", "--budget", "1e-9"]) == 0
    out = capsys.readouterr().out
    assert "row: train | L=1024 full / anchor s/step |  | skipped: --budget 0s spent" in out
    assert "| diagnose | --size small" in out and "skipped: --budget" in out
    assert "measured" not in out


def test_a_section_that_raises_keeps_the_others(monkeypatch, capsys):
    """A GPU run is one shot: a section that raises adds a FAIL row, the sections after it still run,
    the table is printed and the exit code says FAIL."""
    gpu_check = _load()

    def boom(args, rows):
        rows.add("diagnose", "measured first", "2", "ok")
        raise RuntimeError("CUDA out of memory\nsecond line")

    monkeypatch.setattr(gpu_check, "section_diagnose", boom)
    monkeypatch.setattr(gpu_check, "section_runner", lambda args, rows: rows.add("runner", "a row", "1", "ok"))
    assert gpu_check.main(["--sections", "diagnose,runner"]) == 1
    out = capsys.readouterr().out
    assert "row: diagnose | measured first | 2 | ok" in out
    assert "row: diagnose | section raised | RuntimeError: CUDA out of memory | FAIL" in out
    assert "row: runner | a row | 1 | ok" in out
    assert out.index("row: runner | a row") < out.index("\n| section ")  # the table follows every row


def test_imports_need_only_torch_transformers_tqdm():
    """What each section imports works with the packages the GPU image lacks made unimportable."""
    import subprocess
    import sys

    gpu_check = _load()
    code = f"""
import sys
# A None entry makes `import x` raise ModuleNotFoundError and find_spec("x") return None, as on
# a machine without the package.
for name in {gpu_check.ABSENT_ON_GPU_IMAGE!r}:
    sys.modules[name] = None
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "benchmarks")!r}]
import gpu_check, train_step, diagnose_rope, decode_width, utilisation
import harness.models.runners.decode, harness.models.runners.prefix, harness.models.runners.common
import harness.models.runners.hf, harness.models.runners.base, harness.models.embedded, harness.diagnose.rope, harness.core.errors
import training.attention, training.attention.varlen, training.attention.flex, training.attention.sdpa_doc
import training.attention.dense, training.modes, training.loop
from training.attention import register
for k in ("dense", "sdpa-doc", "flex", "varlen"):
    register(k)
print("imports ok")
"""
    res = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert res.returncode == 0 and "imports ok" in res.stdout, res.stderr[-2000:]


def test_record_appends(tmp_path, monkeypatch):
    gpu_check = _load()
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "RESULTS.md").write_text("# kept\n")
    gpu_check.main(["--sections", "runner", "--model", "x", "--record"])
    text = (tmp_path / "benchmarks" / "RESULTS.md").read_text()
    assert text.startswith("# kept\n\n## ") and "UTC, CPU" in text and "| runner " in text
    assert [p.name for p in (tmp_path / "benchmarks").iterdir()] == ["RESULTS.md"]  # no temp file left
