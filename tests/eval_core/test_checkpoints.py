"""Checkpoint selection, fingerprints and tokenizer checks (harness/models/checkpoints.py)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from safetensors.numpy import save_file

from harness.core.errors import UserError
from harness.models.checkpoints import (
    check_same_tokenizer,
    fingerprint,
    run_name_default,
    step_of,
)
from harness.models.sources import select_checkpoints


def make_ckpt(path, value: float = 0.0, size: int = 16, training: dict | None = None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": size}))
    save_file({"w": np.full((size,), value, dtype=np.float32)}, str(path / "model.safetensors"))
    if training is not None:
        (path / "harness_training.json").write_text(json.dumps(training))
    return path


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """runs/anchor/ckpt-1940 .. ckpt-2000 every 10, plus a state dir that is not a checkpoint."""
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "runs" / "anchor"
    for step in range(1940, 2001, 10):
        make_ckpt(root / f"ckpt-{step}", value=step, training={"schema_version": 1, "mode": "anchor", "step": step})
    (root / "state").mkdir()
    return root


def steps(ckpts):
    return [c.step for c in ckpts]


def test_range_is_inclusive_and_sorted_by_step(run_dir):
    ckpts = select_checkpoints("runs/anchor/ckpt-<1950..2000>")
    assert steps(ckpts) == [1950, 1960, 1970, 1980, 1990, 2000]
    assert all(c.local for c in ckpts)
    assert ckpts[0].path == os.path.join("runs", "anchor", "ckpt-1950")
    assert ckpts[-1].training == {"schema_version": 1, "mode": "anchor", "step": 2000}
    assert steps(select_checkpoints("runs/anchor/ckpt-<1955..1975>")) == [1960, 1970]
    assert steps(select_checkpoints("runs/anchor/ckpt-<2000..2000>")) == [2000]


def test_last_n_after_sorting(run_dir):
    assert steps(select_checkpoints("runs/anchor/ckpt-<1900..2100>", last=5)) == [1960, 1970, 1980, 1990, 2000]
    with pytest.raises(UserError, match="--last 9"):
        select_checkpoints("runs/anchor/ckpt-<1900..2100>", last=9)
    with pytest.raises(UserError, match="positive"):
        select_checkpoints("runs/anchor/ckpt-2000", last=0)


def test_numeric_not_lexicographic_sort(tmp_path):
    for step in (990, 1000, 20):
        make_ckpt(tmp_path / f"ckpt-{step}")
    assert steps(select_checkpoints(str(tmp_path / "ckpt-*"))) == [20, 990, 1000]
    assert steps(select_checkpoints(str(tmp_path / "ckpt-*"), last=2)) == [990, 1000]


def test_glob_skips_non_directories_and_comma_lists_dedupe(run_dir):
    (run_dir / "ckpt-2000.txt").write_text("x")  # matched by the glob, but a file: skipped
    assert steps(select_checkpoints("runs/anchor/ckpt-2*")) == [2000]
    assert steps(select_checkpoints("runs/anchor/ckpt-19[5-6]0")) == [1950, 1960]
    got = select_checkpoints("runs/anchor/ckpt-2000, runs/anchor/ckpt-1940,runs/anchor/ckpt-<1990..2000>")
    assert steps(got) == [1940, 1990, 2000]


def test_no_match_and_reversed_range(run_dir):
    with pytest.raises(UserError, match="no checkpoint directory matches"):
        select_checkpoints("runs/anchor/ckpt-<3000..4000>")
    with pytest.raises(UserError, match="reversed checkpoint range <2000..1950>"):
        select_checkpoints("runs/anchor/ckpt-<2000..1950>")
    with pytest.raises(UserError, match="no checkpoint matches"):
        select_checkpoints("runs/anchor/ckpt-5000")
    with pytest.raises(UserError, match="no checkpoint directory matches"):
        select_checkpoints("runs/other/*")
    with pytest.raises(UserError, match="empty item"):
        select_checkpoints("runs/anchor/ckpt-2000,,runs/anchor/ckpt-1990")


def test_non_model_directory_is_named(run_dir):
    (run_dir / "ckpt-1985").mkdir()
    with pytest.raises(UserError, match=r"ckpt-1985 is not a loadable model: no config.json"):
        select_checkpoints("runs/anchor/ckpt-<1950..2000>")
    (run_dir / "ckpt-1985" / "config.json").write_text("{}")
    with pytest.raises(UserError, match=r"ckpt-1985 is not a loadable model: no \*.safetensors"):
        select_checkpoints("runs/anchor/ckpt-<1950..2000>")
    with pytest.raises(UserError, match="is a file"):
        select_checkpoints("runs/anchor/ckpt-2000/config.json")


def test_missing_shard_is_named(tmp_path):
    ck = make_ckpt(tmp_path / "ckpt-5")
    (ck / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model.safetensors", "b": "model-2.safetensors"}})
    )
    with pytest.raises(UserError, match="model-2.safetensors"):
        select_checkpoints(str(ck))


def test_hub_names():
    (c,) = select_checkpoints("meta-llama/Llama-2-7b-hf@main")
    assert (c.path, c.step, c.local, c.fingerprint) == (
        "meta-llama/Llama-2-7b-hf@main",
        None,
        False,
        "hub:meta-llama/Llama-2-7b-hf@main",
    )
    (c,) = select_checkpoints("hub:gpt2")
    assert (c.path, c.fingerprint, c.local) == ("gpt2", "hub:gpt2", False)
    assert run_name_default([c]) == "gpt2"


def test_step_of():
    assert step_of("runs/a/ckpt-2000") == 2000
    assert step_of("checkpoint_500") == 500
    assert step_of("global_step2000") == 2000
    assert step_of("gpt2") is None
    assert step_of("Llama-2-7b-hf") is None
    assert step_of("iter_0001000") == 1000 and step_of("runs/a/2000") == 2000 and step_of("step-3") == 3
    # Model names that end in digits after a separator are models, not step N of their parent folder.
    for name in ("Mistral-7B-v0.1", "SmolLM2-135M-Instruct.Q4_1", "models/qwen_2", "opt-1.3"):
        assert step_of(name) is None, name
    # A checkpoint word inside a longer word is no checkpoint word: Writer-2 is not "iter 2".
    for name in ("Writer-2", "Jupiter-1", "Arbiter_3", "laststep5"):
        assert step_of(name) is None, name
    for name in ("iteration_1000", "steps_1000", "checkpoints-1000", "epoch_3-step_1000", "checkpoint-1000"):
        assert step_of(name) == 1000, name


def test_last_n_never_chooses_among_stepless_checkpoints(tmp_path):
    """--last picks by step: where it would keep some step-less checkpoints and drop others it could
    only go by path (model-200 after model-1000), so it is refused; keeping all of them, or none, is fine."""
    for name in ("model-200", "model-1000", "ckpt-5", "ckpt-7"):
        make_ckpt(tmp_path / name)
    spec = str(tmp_path / "*")
    assert steps(select_checkpoints(spec, last=2)) == [5, 7]  # the step-less ones sort first and are dropped
    assert steps(select_checkpoints(spec, last=4)) == [None, None, 5, 7]
    with pytest.raises(UserError, match=r"--last 3 picks checkpoints by step, but .*model-1000 has no step"):
        select_checkpoints(spec, last=3)
    with pytest.raises(UserError, match="no step in its name"):
        select_checkpoints(str(tmp_path / "model-*"), last=1)


def test_fingerprint_follows_content_not_path_or_mtime(tmp_path):
    a = make_ckpt(tmp_path / "a" / "ckpt-10", value=1.0)
    fp = fingerprint(a)
    assert len(fp) == 16
    b = tmp_path / "b" / "ckpt-10"
    shutil.copytree(a, b)
    os.utime(b / "model.safetensors", (1, 1))
    assert fingerprint(b) == fp  # a copy is the same checkpoint
    make_ckpt(a, value=2.0)  # re-trained in place: same path, same sizes, new weights
    assert fingerprint(a) != fp
    make_ckpt(a, value=1.0)
    assert fingerprint(a) == fp
    (a / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 16, "rope_theta": 5e6}))
    assert fingerprint(a) != fp


def test_fingerprint_of_large_file_sees_head_and_tail(tmp_path):
    n = 1 << 20  # 4 MiB of float32: larger than the 2 MiB read in full
    ck = tmp_path / "ckpt-1"
    ck.mkdir()
    (ck / "config.json").write_text("{}")
    w = np.zeros(n, dtype=np.float32)
    save_file({"w": w}, str(ck / "model.safetensors"))
    fp = fingerprint(ck)
    w[-1] = 1.0  # the last tensor value lies in the last MiB
    save_file({"w": w}, str(ck / "model.safetensors"))
    fp_tail = fingerprint(ck)
    w[0] = 1.0
    save_file({"w": w}, str(ck / "model.safetensors"))
    assert len({fp, fp_tail, fingerprint(ck)}) == 3


def test_retrained_dir_gets_new_checkpoint_identity(run_dir):
    before = select_checkpoints("runs/anchor/ckpt-2000")[0]
    make_ckpt(run_dir / "ckpt-2000", value=-1.0)
    after = select_checkpoints("runs/anchor/ckpt-2000")[0]
    assert before.path == after.path and before.fingerprint != after.fingerprint


def test_tokenizer_mismatch(tmp_path, bpe_tokenizer_dir, byte_tokenizer_dir):
    a, b, c = (make_ckpt(tmp_path / "run" / f"ckpt-{s}") for s in (1, 2, 3))
    for ck, tok in ((a, bpe_tokenizer_dir), (b, bpe_tokenizer_dir), (c, byte_tokenizer_dir)):
        for f in os.listdir(tok):
            shutil.copy(os.path.join(tok, f), ck / f)
    ab = select_checkpoints(f"{a},{b}")
    check_same_tokenizer(ab)
    check_same_tokenizer(ab + select_checkpoints("org/model"))  # hub models are not read
    with pytest.raises(UserError, match="different tokenizers"):
        check_same_tokenizer(select_checkpoints(str(tmp_path / "run" / "ckpt-*")))
    (c / "tokenizer.json").unlink()
    for f in os.listdir(c):
        if f.startswith(("tokenizer", "special")):
            (c / f).unlink()
    with pytest.raises(UserError, match="no tokenizer files"):
        check_same_tokenizer(select_checkpoints(f"{a},{c}"))


def test_tiny_llama_is_a_loadable_checkpoint(tiny_llama_dir):
    (c,) = select_checkpoints(str(tiny_llama_dir))
    assert c.local and c.training is None and len(c.fingerprint) == 16
    check_same_tokenizer([c])


def test_run_name_default(run_dir, tmp_path):
    assert run_name_default(select_checkpoints("runs/anchor/ckpt-<1950..2000>")) == "anchor"
    make_ckpt(tmp_path / "runs" / "base" / "ckpt-5")
    assert run_name_default(select_checkpoints("runs/base/ckpt-5,runs/anchor/ckpt-2000")) == "base+anchor"
    plain = make_ckpt(tmp_path / "models" / "llama-base")
    assert run_name_default(select_checkpoints(str(plain))) == "llama-base"
