"""`harness train --log-to tensorboard,wandb`: the dashboards' own readers see the JSONL log's values.

TensorBoard's event files are read back with TensorBoard's EventAccumulator; W&B's offline run file
(<run>/wandb/offline-run-*/run-*.wandb, the LevelDB-style record log of wandb's transaction format:
a 7-byte ':W&B' header, then 32 KiB blocks of CRC/length/type-framed chunks holding wandb.proto Records)
with wandb's own protobuf classes. W&B is not installed by scripts/setup.sh: its test skips without it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import struct

import numpy as np
import pytest

from harness.cli import main

LOGGED = ("loss", "lr", "tokens_per_s", "grad_norm")


def _args(model, data, out, *extra, steps=3):
    return [
        "train",
        "--model",
        str(model),
        "--data",
        str(data),
        "--out",
        str(out),
        "--mode",
        "anchor",
        "--window",
        "64",
        "--steps",
        str(steps),
        "--dtype",
        "fp32",
        "--no-progress",
        "--max-docs",
        "20",
        "--save-every",
        "100",
        "--lr",
        "1e-3",
        *extra,
    ]


def _tensorboard_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    # TensorBoard's own reader (imported by name: tensorboard ships no type information)
    reader = importlib.import_module("tensorboard.backend.event_processing.event_accumulator")
    acc = reader.EventAccumulator(str(log_dir), size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_log_to_tensorboard_matches_jsonl(tiny_llama_dir, corpus_path, tmp_path, capsys):
    from training.logging import read_log

    out = tmp_path / "run"
    assert main(_args(tiny_llama_dir, corpus_path, out, "--log-to", "tensorboard")) == 0, capsys.readouterr().err
    # Resumed to step 5 (a new event file): TensorBoard shows one curve 1..5, as log.jsonl does.
    assert main(_args(tiny_llama_dir, corpus_path, out, "--log-to", "tensorboard", steps=5)) == 0
    assert "resumed from step 3" in capsys.readouterr().out
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    rows = read_log(out / "log.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    scalars = _tensorboard_scalars(out / "tensorboard")
    assert set(LOGGED) <= set(scalars), sorted(scalars)
    for tag in LOGGED:
        # TensorBoard keeps scalars as float32: equal to the JSONL value rounded to float32.
        expected = [(r["step"], float(np.float32(r[tag]))) for r in rows]
        assert scalars[tag] == expected, tag
    assert all(v > 0 for _, v in scalars["tokens_per_s"]) and all(v == pytest.approx(1e-3) for _, v in scalars["lr"])


def test_tensorboard_after_a_kill_shows_one_curve(tiny_llama_dir, run_job, tmp_path):
    """Killed after step 5 with the newest state at 3: the resumed run's steps 4-5 replace the first ones."""
    from training.logging import read_log

    from .helpers import small_job

    job = small_job(tiny_llama_dir, tmp_path / "killed", steps=6, save_state_every=3)
    run_job(job, stop_after=5, log_to=["tensorboard"])
    assert run_job(job, log_to=["tensorboard"])["resumed_from"] == 3
    rows = read_log(tmp_path / "killed" / "log.jsonl")
    scalars = _tensorboard_scalars(tmp_path / "killed" / "tensorboard")
    assert len(list((tmp_path / "killed" / "tensorboard").glob("events.out.tfevents.*"))) == 2
    assert scalars["loss"] == [(r["step"], float(np.float32(r["loss"]))) for r in rows]
    assert [s for s, _ in scalars["loss"]] == [1, 2, 3, 4, 5, 6]


def _wandb_records(path):
    """The Records of a .wandb file (wandb's transaction log: LevelDB log framing, protobuf payloads)."""
    pb = importlib.import_module("wandb.proto.wandb_internal_pb2")  # wandb's own record classes

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    block, pos, chunk, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pos += 7
        if length == 0 and kind == 0:  # zero padding to the block's end
            pos += left - 7
            continue
        chunk += data[pos : pos + length]
        pos += length
        if kind in (1, 4):  # FULL or LAST
            record = pb.Record()
            record.ParseFromString(chunk)
            records.append(record)
            chunk = b""
    return records


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb not installed (pip install -e '.[wandb]')")
def test_log_to_wandb_offline_run(tiny_llama_dir, corpus_path, tmp_path, capsys, monkeypatch):
    from training.logging import read_log

    # No WANDB_MODE, no key, no ~/.netrc: offline, decided by the harness, not by a prompt.
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_PROJECT", "WANDB_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home"))
    out = tmp_path / "run"
    code = main(_args(tiny_llama_dir, corpus_path, out, "--log-to", "wandb,tensorboard"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "W&B: offline" in captured.out and "wandb sync" in captured.out
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, list((out / "wandb").iterdir())
    files = list(runs[0].glob("run-*.wandb"))
    assert len(files) == 1 and (runs[0] / "files").is_dir()
    history = {}
    for record in _wandb_records(files[0]):
        if record.WhichOneof("record_type") == "history":
            items = {(i.key or ".".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
            history[record.history.step.num] = items
    rows = read_log(out / "log.jsonl")
    assert sorted(history) == [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert {k: history[r["step"]][k] for k in LOGGED} == {k: r[k] for k in LOGGED}
    assert (out / "tensorboard").is_dir()  # both sinks at once


@pytest.mark.parametrize(
    "log_to, missing, message",
    [
        ("mlflow", None, "--log-to 'mlflow' is not a log sink"),
        ("tensorboard,bogus", None, "--log-to 'bogus' is not a log sink"),
        ("tensorboard", "tensorboard", "`pip install tensorboard`"),
        ("wandb", "wandb", "`pip install wandb`"),
    ],
)
def test_log_to_errors_are_one_line_before_training(
    log_to, missing, message, tiny_llama_dir, corpus_path, tmp_path, capsys, monkeypatch
):
    from training import logging as train_logging

    if missing is not None:
        real = train_logging._installed
        monkeypatch.setattr(train_logging, "_installed", lambda module: module != missing and real(module))
    out = tmp_path / "run"
    assert main(_args(tiny_llama_dir, corpus_path, out, "--log-to", log_to)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err, err
    assert not out.exists()  # nothing loaded, nothing trained


def test_python_api_checks_sinks_first(tmp_path):
    """train(job, log_to=...) fails the same way before reading the model (a path that does not exist)."""
    from harness.core.errors import UserError
    from training.loop import train

    from .helpers import small_job

    job = small_job(tmp_path / "no-model", tmp_path / "run")
    with pytest.raises(UserError, match="not a log sink"):
        train(job, log_to=["tensorboard", "nope"], progress=False)
    assert not (tmp_path / "run").exists()
