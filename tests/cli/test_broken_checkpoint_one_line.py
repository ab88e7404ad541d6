"""Every broken checkpoint is one `error:` line on stderr, exit 2, with nothing before it.

An attack on main found checkpoint errors that printed a library's warning (torch's pickle-protocol
note, transformers' "You are using a model of type ...", three times) before our line, and a damaged
pytorch_model.bin that ended in a traceback. Each case runs `harness eval` in a fresh process, as a
user would: in-process, pytest's own logging capture swallows what transformers' handler prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good_ckpt(tmp_path_factory) -> Path:
    from harness.pipeline.embedded_eval import ensure_checkpoints

    root = tmp_path_factory.mktemp("embedded") / "runs"
    ensure_checkpoints(root, steps=(10,))
    return root / "ckpt-10"


def _edit_config(d: Path, **changes) -> None:
    cfg = json.loads((d / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (d / "config.json").write_text(json.dumps(cfg))


def _halve(f: Path) -> None:
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])


BREAKS = {
    "config.json missing": lambda d: (d / "config.json").unlink(),
    "config.json not JSON": lambda d: (d / "config.json").write_text("{not json"),
    "max_position_embeddings a string": lambda d: _edit_config(d, max_position_embeddings="4096"),
    "config of another model": lambda d: _edit_config(
        d, hidden_size=2 * json.loads((d / "config.json").read_text())["hidden_size"]
    ),
    "unknown model_type": lambda d: _edit_config(d, model_type="nonexistent", architectures=None),
    "generation_config.json not JSON": lambda d: (d / "generation_config.json").write_text("{bad"),
    "weights missing": lambda d: (d / "model.safetensors").unlink(),
    "weights truncated": lambda d: _halve(d / "model.safetensors"),
    "weights empty": lambda d: (d / "model.safetensors").write_bytes(b""),
    "pytorch_model.bin not a torch file": lambda d: (
        (d / "model.safetensors").unlink(),
        (d / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01."),
    ),
    "tokenizer missing": lambda d: ((d / "tokenizer.json").unlink(), (d / "tokenizer_config.json").unlink()),
    "tokenizer.json not JSON": lambda d: (d / "tokenizer.json").write_text("{"),
}


@pytest.mark.parametrize("case", list(BREAKS))
def test_a_broken_checkpoint_is_one_error_line(case, good_ckpt, tmp_path):
    ckpt = tmp_path / "runs" / "ckpt-1"
    shutil.copytree(good_ckpt, ckpt)
    BREAKS[case](ckpt)
    out = tmp_path / "out"
    argv = ["eval", "--ckpts", str(ckpt), "--tasks", "vt", "--lengths", "1k", "--samples", "1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "harness", *argv, "--out", str(out), "--no-progress"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert not (out / "results.json").exists()
