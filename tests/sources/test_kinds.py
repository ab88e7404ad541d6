"""The model-source interface (harness/models/sources/base.py): a new kind is one class, and planning,
the runners and results.json take it without a change; run.model names the model itself."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from harness.models.checkpoints import load_checkpoint
from harness.models.sources import base, run_model, select_sources
from harness.models.sources.base import LoadTarget, ModelSource
from harness.pipeline.store import read_store

from .sources_util import run_cli

ALIASES: dict[str, str] = {}


class AliasSource(ModelSource):
    """A kind made up for this test: `alias:NAME` names a folder registered in ALIASES."""

    kind = "alias-test"
    priority = 5

    @classmethod
    def claims(cls, item: str) -> bool:
        return item.startswith("alias:")

    @classmethod
    def expand(cls, item: str) -> list[ModelSource]:
        folder = ALIASES[item.split(":", 1)[1]]
        ck = dataclasses.replace(load_checkpoint(folder), path=item, kind=cls.kind, model=item, label=item[6:])
        return [cls(ck)]

    @classmethod
    def owns(cls, path: str) -> bool:
        return path.startswith("alias:")

    @classmethod
    def load_target(cls, path: str) -> LoadTarget:
        folder = ALIASES[path.split(":", 1)[1]]
        return LoadTarget(folder, {}, folder, {})

    @classmethod
    def context_of(cls, path: str, max_model_len: int | None) -> int:
        from harness.models.runners.common import folder_context_length

        return folder_context_length(ALIASES[path.split(":", 1)[1]], max_model_len)

    def tokenizer_id(self):
        return ("alias", self.checkpoint.path)

    def load_tokenizer(self, light: bool = False):
        from harness.models.tokenization import load_tokenizer

        return load_tokenizer(ALIASES[self.checkpoint.path.split(":", 1)[1]])


@pytest.fixture
def alias_kind(monkeypatch, tiny_llama_dir):
    base.kinds()  # discover the package's own kinds first
    monkeypatch.setitem(base._KINDS, AliasSource.kind, AliasSource)
    monkeypatch.setitem(ALIASES, "tiny", str(tiny_llama_dir))
    return AliasSource


def test_a_new_kind_is_one_class(alias_kind, tiny_llama_dir, tmp_path):
    out = tmp_path / "out"
    common = ["--tasks", "vt", "--lengths", "1k", "--samples", "2", "--no-progress", "--cache-dir", "none"]
    code, _, err = run_cli("eval", "--ckpts", "alias:tiny", *common, "--out", str(out))
    assert code == 0, err
    records = read_store(out / "samples.jsonl")[1]
    assert len(records) == 2 and {r["checkpoint"]["path"] for r in records} == {"alias:tiny"}
    results = json.loads((out / "results.json").read_text())
    assert results["run"]["model"] == "alias:tiny" and results["run"]["name"] == "tiny"
    assert results["run"]["checkpoints"][0]["kind"] == "alias-test"
    # the same weights as a folder: the same predictions
    code, _, err = run_cli("eval", "--ckpts", str(tiny_llama_dir), *common, "--out", str(tmp_path / "f"))
    assert code == 0, err
    folder = read_store(tmp_path / "f" / "samples.jsonl")[1]
    assert [r["prediction"] for r in folder] == [r["prediction"] for r in records]


def test_run_model_names_the_model(ckpt_series_dir, tiny_llama_dir, tmp_path):
    """A plain folder is the model; a training run's ckpt-N have the run folder as their model."""
    assert run_model(select_sources(str(tiny_llama_dir))) == str(tiny_llama_dir)
    assert run_model(select_sources(f"{ckpt_series_dir}/ckpt-*")) == str(ckpt_series_dir)
    other = tmp_path / "other-model"
    shutil.copytree(tiny_llama_dir, other)
    assert run_model(select_sources(f"{tiny_llama_dir},{other}")) == sorted([str(tiny_llama_dir), str(other)])


@pytest.fixture
def ckpt_series_dir(tmp_path, tiny_llama_dir):
    root = tmp_path / "run"
    for step in (10, 20):
        shutil.copytree(tiny_llama_dir, root / f"ckpt-{step}")
    return root
