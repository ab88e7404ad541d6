"""The demo's base model: checked as `harness train` checks it before any file is written, and, when
it is a GGUF file or a packaged model name, converted once into a save_pretrained folder under --out
that every stage then reads."""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import UserError
from harness.demo.config import DEFAULT_MODEL, DemoConfig
from harness.demo.subcommands import _cli


def _model_file_source(model: str):
    """The model source of a GGUF file or a packaged model name (harness.models.sources), else None:
    folders and hub names are used as they are."""
    from harness.models.sources import model_file_source

    return model_file_source(model)


def converted_folder(model: str, out: Path) -> Path:
    """Where the demo keeps a GGUF/packaged model converted to a save_pretrained folder (named by the model)."""
    name = Path(model).name
    return out / "models" / (name.removesuffix(".gguf"))


def _as_folder(cfg: DemoConfig, out: Path) -> DemoConfig:
    """cfg with a GGUF file or packaged model converted once (`harness convert`) into a folder under
    --out: training, evaluation and the diagnostic then read one dequantised copy, and a re-run
    finds it there."""
    from dataclasses import replace

    if _model_file_source(cfg.model) is None:
        return cfg
    folder = converted_folder(cfg.model, out)
    if not (folder / "config.json").is_file():
        print(f"  converting {cfg.model} to a save_pretrained folder: {folder}", flush=True)
        _cli(["convert", cfg.model, "--out", str(folder)])
    return replace(cfg, model=str(folder))


def _check_model(model: str) -> None:
    """The base model, checked as `harness train` checks it (training.model_files), before any file is written."""
    from training.model_files import check_model_dir, check_model_path

    if _model_file_source(model) is not None:  # a GGUF file or packaged model: its source checked it
        return
    try:
        if check_model_path(model):
            check_model_dir(Path(model))
    except UserError as exc:
        if Path(model) == DEFAULT_MODEL:
            raise UserError(
                f"{exc} (the shipped base model is missing or damaged in this checkout: restore it with "
                "`git checkout -- assets/demo-base` or rebuild it with scripts/pretrain_demo_base.sh)"
            ) from None
        raise
