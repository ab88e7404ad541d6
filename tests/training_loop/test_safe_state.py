"""Loading a run folder runs none of its code (issue 24 §3).

The resume state is read with torch.load(weights_only=True): a state.pt planted in a shared run
folder whose unpickling would run a shell command is refused with one line, before anything of it
runs, and the run folder is left as it was; a state written by an earlier version (numpy arrays
pickled) is refused the same way with how to go on. The RNG streams stored in safe types come back
exactly (resume stays bit-exact: test_loop.py and test_crash_safety.py compare the curves)."""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path

import pytest

from harness.cli import main


def _args(model, data, out, *extra) -> list[str]:
    return ["train", "--model", str(model), "--data", str(data), "--out", str(out), "--mode", "anchor",
            "--window", "64", "--dtype", "fp32", "--max-docs", "20", "--lr", "1e-3", "--no-progress",
            "--save-every", "10", "--save-state-every", "1", *extra]  # fmt: skip


class _Payload:
    """Unpickling this runs `sh -c "touch MARKER"` (what a hostile state.pt does)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch '{self.marker}'",)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.fixture
def trained(tiny_llama_dir, corpus_path, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "2")) == 0
    capsys.readouterr()
    return out


def _plant(path: Path, marker: Path, how: str) -> None:
    import torch

    evil = {"format": 2, "step": 2, "signature": {}, "model": {}, "optimizer": {}, "scheduler": {}, "data": {}}
    evil["rng"] = _Payload(marker)
    if how == "torch.save":
        torch.save(evil, path)
    else:  # a bare pickle (torch.load's legacy, non-zip format)
        path.write_bytes(pickle.dumps(evil))


@pytest.mark.parametrize("how", ["torch.save", "pickle"])
@pytest.mark.parametrize("which", ["newest", "both"])
def test_planted_pickle_payload_never_runs(how, which, trained, tiny_llama_dir, corpus_path, tmp_path, capsys):
    import torch

    # The payload is live: loading it the way resume used to (weights_only=False) runs the command.
    probe, probe_marker = tmp_path / "probe.pt", tmp_path / "probe-ran"
    _plant(probe, probe_marker, how)
    try:
        torch.load(probe, weights_only=False)
    except RuntimeError:  # a bare pickle: torch wanted its legacy magic number, after running the payload
        assert how == "pickle"
    assert probe_marker.exists()

    marker = tmp_path / "payload-ran"
    _plant(trained / "state" / "step-2" / "state.pt", marker, how)
    if which == "both":  # no genuine state to fall back to either
        _plant(trained / "state" / "step-1" / "state.pt", marker, how)
    before = _snapshot(trained)
    assert main(_args(tiny_llama_dir, corpus_path, trained, "--steps", "3")) == 2
    msg = _one_line_error(capsys)
    assert not marker.exists()
    state = trained / "state" / "step-2" / "state.pt"
    assert f"{state} was not loaded: it holds more than tensors and plain values (" in msg, msg
    if how == "torch.save":  # torch names what the pickle would import, read from its opcodes
        assert "system" in msg, msg
    assert "never resume a run folder you do not trust" in msg
    assert _snapshot(trained) == before  # nothing trained, nothing rewritten, no fallback to step-1


def test_state_of_an_earlier_version_is_refused_with_how_to_go_on(
    trained, tiny_llama_dir, corpus_path, tmp_path, capsys
):
    """Format 1 pickled numpy's RNG state as an ndarray: not loadable without unpickling numpy objects."""
    import numpy as np
    import torch

    path = trained / "state" / "step-2" / "state.pt"
    state = torch.load(path, weights_only=True)
    del state["format"]
    for rng in state["rng"]:
        rng["numpy"] = np.random.get_state()
    torch.save(state, path)
    before = _snapshot(trained)
    assert main(_args(tiny_llama_dir, corpus_path, trained, "--steps", "3")) == 2
    msg = _one_line_error(capsys)
    assert f"{path} was not loaded" in msg and "numpy" in msg and "before state format 2" in msg, msg
    assert f"delete {trained / 'state'} to train from step 0" in msg
    assert _snapshot(trained) == before


def test_rng_streams_round_trip_exactly_through_a_safe_load(tmp_path):
    import numpy as np
    import torch

    from training.rng_streams import rng_state, set_rng_state

    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    # Leave a cached Gaussian in both Python's and numpy's state: it must come back too.
    random.gauss(0, 1)
    np.random.standard_normal()
    torch.save(rng_state(), tmp_path / "rng.pt")

    def draws():
        return (
            [random.random() for _ in range(5)],
            random.gauss(0, 1),
            np.random.standard_normal(),
            np.random.randint(0, 2**31, size=5).tolist(),
            torch.rand(5).tolist(),
        )

    want = draws()
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert draws() == want


# ---------------------------------------------------------------- pytorch_model.bin weights


def _bin_model(tiny_llama_dir: Path, dest: Path, payload: _Payload | None, zipped: bool = True) -> Path:
    """The tiny model with its weights as pytorch_model.bin (plus `payload` when given)."""
    import shutil

    import torch
    from safetensors.torch import load_file

    shutil.copytree(tiny_llama_dir, dest)
    weights: dict = load_file(dest / "model.safetensors")
    (dest / "model.safetensors").unlink()
    if payload is not None:
        weights["evil"] = payload
    torch.save(weights, dest / "pytorch_model.bin", _use_new_zipfile_serialization=zipped)
    return dest


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
def test_bin_weights_payload_is_one_line_in_every_command(zipped, tiny_llama_dir, corpus_path, tmp_path, capsys):
    marker = tmp_path / "payload-ran"
    model = _bin_model(tiny_llama_dir, tmp_path / "model", _Payload(marker), zipped)
    weights = model / "pytorch_model.bin"
    capsys.readouterr()
    commands = {
        "eval": ["eval", "--ckpts", str(model), "--tasks", "vt", "--lengths", "1k", "--samples", "1",
                 "--no-progress", "--cache-dir", "none", "--out", str(tmp_path / "eval")],
        "train": _args(model, corpus_path, tmp_path / "train", "--steps", "1"),
        "diagnose": ["diagnose", "rope", "--ckpt", str(model), "--dtypes", "fp32", "--shifts", "0,2",
                     "--seq-len", "64", "--logit-lengths", "none", "--num-samples", "1", "--no-plots",
                     "--device", "cpu", "--out", str(tmp_path / "diag")],
    }  # fmt: skip
    for name, argv in commands.items():
        assert main(argv) == 2, name
        msg = _one_line_error(capsys)
        assert f"{weights} was not loaded: it holds more than tensors and plain values (" in msg, (name, msg)
        assert "system" in msg and "safetensors" in msg, (name, msg)
        assert not marker.exists(), name
    assert not (tmp_path / "train").exists() and not (tmp_path / "eval" / "samples.jsonl").exists()


def test_plain_bin_weights_still_load(tiny_llama_dir, tmp_path):
    """Only payloads are refused: a .bin of tensors evaluates like the safetensors checkpoint."""
    import json

    from harness.pipeline.store import read_store

    model = _bin_model(tiny_llama_dir, tmp_path / "model", None)
    common = ["--tasks", "vt", "--lengths", "1k", "--samples", "1", "--no-progress", "--cache-dir", "none"]
    assert main(["eval", "--ckpts", str(model), *common, "--out", str(tmp_path / "bin")]) == 0
    assert main(["eval", "--ckpts", str(tiny_llama_dir), *common, "--out", str(tmp_path / "st")]) == 0
    got, want = (read_store(tmp_path / d / "samples.jsonl")[1] for d in ("bin", "st"))
    assert [r["prediction"] for r in got] == [r["prediction"] for r in want]
    assert json.loads((tmp_path / "bin" / "results.json").read_text())
