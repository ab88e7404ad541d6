"""benchmarks/gpu_check.py's sweep section end to end on CPU at its small shape: a pack of real RULER
samples made by benchmarks/sweep_pack.py, the random model built, saved and loaded by the hf runner,
each task timed through generate_each, a task the budget does not reach estimated, the per-task
table's columns, and the projection's arithmetic redone from the printed seconds.

    OMP_NUM_THREADS=1 pytest -q tests/benchmarks/test_gpu_check_sweep.py
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

COLUMNS = [
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
    "h, 500 on 8 GPUs",
    "source",
]


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    """Two RULER tasks at 512 tokens, 2 samples each, with the embedded tokenizer."""
    import sweep_pack

    from harness.models.embedded import default_tokenizer_dir

    out = tmp_path_factory.mktemp("pack") / "pack.tar.xz"
    sweep_pack.prepare(out, default_tokenizer_dir(), 512, 2, ["fwe", "niah_single_1"], log=lambda *_: None)
    return out


def _tables(out: str) -> tuple[list[list[str]], list[list[str]]]:
    """(the gpu_check table's rows, the sweep's per-task table with its header first)."""
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")]
    cells = [[c.strip() for c in ln.split("|")[1:-1]] for ln in lines]
    start = next(i for i, c in enumerate(cells) if c[0] == "section")
    per_task = next(i for i, c in enumerate(cells) if c[0] == "task")
    return cells[start + 1 : per_task], cells[per_task:]


def test_pack_holds_the_samples_and_their_tokenizer(pack, tmp_path):
    import sweep_pack

    with tarfile.open(pack) as tar:
        names = tar.getnames()
    assert "manifest.json" in names and "tokenizer/tokenizer.json" in names
    assert any(n.startswith("samples/fwe/512/") and n.endswith(".jsonl") for n in names)
    p = sweep_pack.read_pack(pack, tmp_path / "x", per_task=1)
    assert p.length == 512 and list(p.samples) == ["fwe", "niah_single_1"]
    assert [len(v) for v in p.samples.values()] == [1, 1]
    m = p.manifest
    assert m["tasks"]["fwe"]["max_new_tokens"] == 50 and m["tasks"]["niah_single_1"]["max_new_tokens"] == 128
    assert m["tasks"]["fwe"]["data"] == "real" and m["samples"] == 2 and m["seed"] == 42
    s = p.samples["niah_single_1"][0]
    assert s["num_tokens"] + s["max_new_tokens"] <= 512 and s["index"] == 0
    assert (p.tokenizer_dir / "tokenizer.json").is_file()


def test_sweep_small_end_to_end(pack, monkeypatch, capsys):
    """The first task is measured, the second left to the estimate (as a budget would leave it)."""
    import ruler_sweep

    monkeypatch.setattr(ruler_sweep, "fits", lambda timings, samples, left: not list(timings))
    gpu_check = _load()
    assert gpu_check.main(["--sections", "sweep", "--small", "--sweep-pack", str(pack), "--budget", "0"]) == 0
    out = capsys.readouterr().out
    body, per_task = _tables(out)
    sweep = {r[1]: r for r in body if r[0] == "sweep"}
    build = next(r for k, r in sweep.items() if k.startswith("small Llama-3 shape random bf16 weights"))
    assert build[3] == "measured" and "load by the hf runner" in build[1]
    assert sweep["one 512-token prefill, small Llama-3 shape"][2].endswith("GB")
    invariance = sweep["decoding rows in one call = each row alone (8B heads, bf16, 1-20,000 keys)"]
    assert invariance[3] == "ok" and invariance[2].startswith("8/8 rows the same bits")
    measured = sweep["niah_single_1 L=512, 2 samples"]
    assert measured[3] == "measured"  # the runner counted every prompt as the pack's generator did
    for part in ("s/sample at", "TFLOP/s; decode", "tok/s, rows 2.0 of 8", "128/128 new"):
        assert part in measured[2], part
    assert sweep["fwe L=512, 2 samples"][3].startswith("skipped: --budget")
    assert sweep["fwe L=512, estimate"][3] == "estimated"

    assert per_task[0] == COLUMNS
    rows = {r[0]: dict(zip(COLUMNS, r)) for r in per_task[1:]}
    assert rows["niah_single_1"]["source"] == "measured" and rows["niah_single_1"]["samples"] == "2"
    assert rows["niah_single_1"]["new tokens"] == "128/128"  # random weights decode the whole budget
    assert rows["fwe"]["source"] == "estimated"
    # The projection: seconds per sample summed over the tasks x 500 / 8 GPUs / 3600
    seconds = float(rows["niah_single_1"]["s/sample"]) + float(rows["fwe"]["s/sample"])
    assert float(rows["all"]["s/sample"]) == pytest.approx(seconds, abs=0.011)
    assert float(rows["all"]["h, 500 on 8 GPUs"]) == pytest.approx(seconds * 500 / 8 / 3600, abs=0.006)
    for name in ("niah_single_1", "fwe"):
        share = float(rows[name]["s/sample"]) * 500 / 8 / 3600
        assert float(rows[name]["h, 500 on 8 GPUs"]) == pytest.approx(share, abs=0.0006)
    projection = sweep["projection: 500 samples x 2 tasks on 8 GPUs, L=512"]
    assert projection[3] == "measured"  # the 3-hour target is held only for the 8B shape at 128K on CUDA
    assert "x 500 / 8 GPUs / 3600 = " in projection[2] and "vs reference 26 h" in projection[2]
    assert "1 of 2 tasks measured" in projection[2]


def test_no_pack_is_a_skip_and_sweep_runs_only_when_named(tmp_path, capsys):
    gpu_check = _load()
    assert gpu_check.main(["--sections", "sweep", "--sweep-pack", str(tmp_path / "absent.tar.xz")]) == 0
    assert "skipped: no pack (python benchmarks/sweep_pack.py makes it)" in capsys.readouterr().out
    assert "sweep" in gpu_check.SECTIONS and "sweep" not in gpu_check.DEFAULT_SECTIONS


def test_the_device_side_needs_only_torch_transformers(pack, tmp_path):
    """What the GPU machine imports for the sweep works with the packages its image lacks made
    unimportable, and reads the pack there."""
    gpu_check = _load()
    code = f"""
import sys
for name in {gpu_check.ABSENT_ON_GPU_IMAGE!r}:
    sys.modules[name] = None
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "benchmarks")!r}]
import gpu_check, ruler_sweep, sweep_model, sweep_pack, sweep_projection, utilisation
import harness.models.runners.hf, harness.models.runners.base
from pathlib import Path
p = sweep_pack.read_pack(Path({str(pack)!r}), Path({str(tmp_path / "unpacked")!r}))
print("ok", sorted(p.samples))
"""
    res = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert res.returncode == 0 and "ok ['fwe', 'niah_single_1']" in res.stdout, res.stderr[-2000:]


def test_a_pack_of_another_format_is_refused(tmp_path):
    import io

    import sweep_pack

    path = tmp_path / "old.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        data = json.dumps({"format": 99, "length": 1, "tasks": {}}).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ValueError, match="pack format 99"):
        sweep_pack.read_pack(path, tmp_path / "x")


def test_the_padding_invariance_check_can_fail(monkeypatch):
    """The device row compares the batched call with each row alone; a kernel that let a row's bits
    follow its neighbours' padding (here: the per-row kernel on exact lengths standing in for the
    alone side) is counted, not passed."""
    gpu_check = _load()
    from harness.models.runners import decode

    assert gpu_check.padding_invariance("cpu")["same_bits"] == 8
    monkeypatch.setitem(decode.KERNELS, "per-row-padded-512", decode.per_row_attention)
    assert gpu_check.padding_invariance("cpu")["same_bits"] < 8
