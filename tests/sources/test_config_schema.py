"""Checkpoint configs are validated at the boundary (harness/models/sources/config_schema.py): a wrong type,
a NaN rope theta or weights of other shapes than the config implies is one line each, before any
work, in eval and train alike; every config transformers itself writes is accepted."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from harness.core.errors import UserError
from harness.models.sources.config_schema import check_config_and_shapes, validate_config

from .sources_util import run_cli

EVAL = ("--tasks", "vt", "--lengths", "1k", "--samples", "1", "--no-progress", "--cache-dir", "none")


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _edited(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    text = edit(config)
    (dst / "config.json").write_text(text if isinstance(text, str) else json.dumps(config))
    return dst


def _nan_theta(config: dict) -> str:
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 12345.0}
    return json.dumps(config).replace("12345.0", "NaN")  # what a tool writing NaN leaves in the file


BAD = {
    "string-positions": (lambda c: c.update(max_position_embeddings="1024"), "max_position_embeddings is '1024'"),
    "nan-theta": (_nan_theta, "rope_parameters.rope_theta is nan"),
    "bool-heads": (lambda c: c.update(num_attention_heads=True), "num_attention_heads is True"),
    "other-shapes": (
        lambda c: c.update(intermediate_size=100),
        "mlp.down_proj.weight has shape [64, 128] but config.json implies [64, 100]",
    ),
    "more-layers": (lambda c: c.update(num_hidden_layers=3), "lack layer 2"),
    "fewer-layers": (lambda c: c.update(num_hidden_layers=1), "hold layer 1"),
    "other-vocab": (lambda c: c.update(vocab_size=5000), "has shape [4096, 64] but config.json implies [5000, 64]"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_config_is_one_line_before_any_work(case, tiny_llama_dir, tmp_path):
    edit, expected = BAD[case]
    model = _edited(Path(tiny_llama_dir), tmp_path / "model", edit)
    with pytest.raises(UserError, match=expected.replace("[", r"\[")):
        check_config_and_shapes(model)
    out = tmp_path / "out"
    code, _, err = run_cli("eval", "--ckpts", str(model), *EVAL, "--out", str(out))
    assert code == 2 and expected in _one_line(err)
    assert not out.exists()  # no half-written store
    run = tmp_path / "run"
    argv = ["train", "--model", str(model), "--data", str(tmp_path / "none.jsonl"), "--out", str(run)]
    code, _, err = run_cli(*argv, "--mode", "anchor", "--window", "64", "--steps", "1", "--no-progress")
    assert code == 2 and expected in _one_line(err)
    assert not run.exists()


def test_gguf_metadata_is_checked_by_the_same_schema(tiny_llama_dir, tmp_path):
    from harness.models.sources import source_for

    from .gguf_fixture import write_tiny_gguf

    model = _edited(Path(tiny_llama_dir), tmp_path / "model", lambda c: c.update(rope_theta=0.0))
    model_cfg = json.loads((model / "config.json").read_text())
    model_cfg.pop("rope_parameters", None)
    (model / "config.json").write_text(json.dumps(model_cfg))
    bad = write_tiny_gguf(model, tmp_path / "zero-theta.gguf")  # rope.freq_base 0.0
    with pytest.raises(UserError, match="GGUF metadata.*rope_theta is 0.0"):
        source_for(str(bad)).check("hf")


def test_every_config_transformers_writes_is_accepted():
    """No false refusals: the default config of every model type transformers knows (800 of them,
    vision and audio ones included, some with per-layer dimensions) passes the schema."""
    from transformers import CONFIG_MAPPING

    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(CONFIG_MAPPING.keys()):
            try:
                data = json.loads(CONFIG_MAPPING[name]().to_json_string())
            except Exception:  # noqa: BLE001, S112 (a config class that needs arguments: not ours to judge)
                continue
            validate_config(data, name)
            checked += 1
    assert checked > 500


def test_real_checkpoints_pass(tiny_llama_dir):
    check_config_and_shapes(Path(tiny_llama_dir))
    demo = Path(__file__).resolve().parents[2] / "assets" / "demo-base"
    if (demo / "config.json").is_file():
        check_config_and_shapes(demo)
