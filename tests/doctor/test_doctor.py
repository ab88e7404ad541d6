"""`harness doctor` and the degenerate-output reports on broken set-ups built locally: an EOS-only
model, a model that repeats one token, a tokenizer that adds no BOS, a context shorter than the
length asked (harness/pipeline/doctor.py, harness/core/degenerate.py)."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from harness.cli import main


def _constant_model(src, dst, token_id: int):
    """A copy of a tiny Llama whose greedy next token is always `token_id`: attention and MLP
    outputs zeroed (the residual stream is the input embedding), every embedding one positive
    vector v, and the output row of `token_id` equal to v, every other row 0."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        v = torch.rand(model.config.hidden_size) + 0.5
        model.model.embed_tokens.weight.copy_(v.expand_as(model.model.embed_tokens.weight))
        model.lm_head.weight.zero_()
        model.lm_head.weight[token_id] = v
    model.save_pretrained(str(dst))
    for f in src.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, dst / f.name)
    return dst


@pytest.fixture(scope="module")
def eos_model(tiny_llama_dir, tmp_path_factory, bpe_tokenizer):
    return _constant_model(tiny_llama_dir, tmp_path_factory.mktemp("eos") / "m", bpe_tokenizer.eos_token_id)


@pytest.fixture(scope="module")
def repeat_model(tiny_llama_dir, tmp_path_factory, bpe_tokenizer):
    word = bpe_tokenizer(" the", add_special_tokens=False)["input_ids"][-1]
    return _constant_model(tiny_llama_dir, tmp_path_factory.mktemp("rep") / "m", word)


def _doctor(capsys, *args):
    code = main(["doctor", "--no-progress", *args])
    out = capsys.readouterr().out
    return (
        code,
        {line[6:22].strip(): line for line in out.splitlines() if line[:4] in ("PASS", "WARN", "FAIL", "SKIP")},
        out,
    )


def test_eos_only_model_fails_on_empty_outputs_fast(eos_model, capsys):
    t0 = time.monotonic()
    code, lines, _out = _doctor(capsys, "--ckpts", str(eos_model), "--lengths", "1k")
    assert code == 1 and time.monotonic() - t0 < 60
    assert lines["canaries"].startswith("FAIL") and "empty" in lines["canaries"]
    assert "emits EOS at once" in lines["canaries"]
    assert lines["context"].startswith("PASS") and lines["tokenizer eos"].startswith("PASS")


def test_repeating_model_fails(repeat_model, capsys):
    code, lines, _ = _doctor(capsys, "--ckpts", str(repeat_model), "--lengths", "1k", "--canaries", "2")
    assert code == 1 and lines["canaries"].startswith("FAIL")
    assert "same text" in lines["canaries"] or "max new tokens" in lines["canaries"]


def test_length_beyond_the_context_fails_with_its_number(tiny_llama_dir, capsys):
    # tiny_llama_dir has 8192 positions: 16K does not fit
    code, lines, _ = _doctor(capsys, "--ckpts", str(tiny_llama_dir), "--tasks", "niah_single_1", "--lengths", "16k")
    assert code == 1 and lines["context"].startswith("FAIL") and "8192" in lines["context"]
    assert lines["canaries"].startswith("SKIP")


def test_rope_scaling_lost_is_named(tiny_llama_dir, tmp_path, capsys):
    """A context set past the trained positions without RoPE scaling (a conversion that lost it)."""
    m = tmp_path / "m"
    shutil.copytree(tiny_llama_dir, m)
    _, lines, _ = _doctor(capsys, "--ckpts", str(m), "--lengths", "16k", "--max-model-len", "16384", "--canaries", "0")
    assert lines["rope"].startswith("WARN") and "no RoPE scaling" in lines["rope"]
    _code, lines, _ = _doctor(
        capsys,
        "--ckpts", str(m), "--lengths", "16k", "--max-model-len", "16384", "--canaries", "0",
        "--rope-scaling", '{"rope_type": "linear", "factor": 2.0}',
    )  # fmt: skip
    assert lines["rope"].startswith("PASS") and "linear" in lines["rope"]


def test_rope_scaling_that_does_not_reach_the_length_is_named(tiny_llama_dir, tmp_path, capsys):
    """A YaRN factor 4 on 8192 positions covers 32K: at 64K (a 1M card's sweep cut down) it is
    extrapolation again; Llama 3.1's "llama3" type covers its own max_position_embeddings."""
    m = tmp_path / "m"
    shutil.copytree(tiny_llama_dir, m)
    cfg = json.loads((m / "config.json").read_text())
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}
    (m / "config.json").write_text(json.dumps({**cfg, "rope_scaling": yarn}))
    args = ["--ckpts", str(m), "--max-model-len", "65536", "--canaries", "0"]
    _, lines, _ = _doctor(capsys, *args, "--lengths", "64k")
    assert lines["rope"].startswith("WARN") and "past the 32768 positions RoPE scaling yarn" in lines["rope"]
    _, lines, _ = _doctor(capsys, *args, "--lengths", "32k")
    assert lines["rope"].startswith("PASS") and "yarn" in lines["rope"]
    llama3 = {"rope_type": "llama3", "factor": 2.0, "original_max_position_embeddings": 4096}
    llama3 |= {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
    (m / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 65536, "rope_scaling": llama3}))
    _, lines, _ = _doctor(capsys, *args, "--lengths", "64k")
    assert lines["rope"].startswith("PASS") and "llama3" in lines["rope"]


def test_a_rope_scaling_transformers_refuses_is_one_line(tiny_llama_dir, tmp_path, capsys):
    """A "llama3" rope_scaling without its frequency factors (a hand-edited config for a longer
    context): transformers raises KeyError, which ended doctor and eval in a traceback."""
    m = tmp_path / "m"
    shutil.copytree(tiny_llama_dir, m)
    cfg = json.loads((m / "config.json").read_text())
    bad = {"rope_type": "llama3", "factor": 2.0, "original_max_position_embeddings": 4096}
    (m / "config.json").write_text(json.dumps({**cfg, "rope_scaling": bad}))
    code, lines, _ = _doctor(capsys, "--ckpts", str(m), "--lengths", "1k", "--canaries", "0")
    assert code == 1 and lines["model"].startswith("FAIL") and "low_freq_factor" in lines["model"]
    argv = ["eval", "--ckpts", str(m), "--tasks", "vt", "--lengths", "1k", "--samples", "1", "--no-progress"]
    assert main([*argv, "--no-doctor", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "config.json is not one transformers can load" in err[-1]
    assert "Traceback" not in "\n".join(err)


def test_tokenizer_without_bos_and_chat_checks(tiny_llama_dir, byte_tokenizer_dir, tmp_path, capsys):
    m = tmp_path / "m"
    shutil.copytree(tiny_llama_dir, m)
    cfg = json.loads((m / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (m / "tokenizer_config.json").write_text(json.dumps(cfg))
    code, lines, _ = _doctor(capsys, "--ckpts", str(m), "--lengths", "1k", "--canaries", "0")
    assert code == 0 and lines["chat"].startswith("WARN") and "--chat" in lines["chat"]
    code, lines, _ = _doctor(capsys, "--ckpts", str(m), "--lengths", "1k", "--canaries", "0", "--chat")
    assert lines["chat"].startswith("PASS") and lines["answer prefix"].startswith("WARN")
    # a tokenizer that is not the model's: the byte tokenizer adds no BOS
    for f in m.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            f.unlink()
    for f in byte_tokenizer_dir.iterdir():
        shutil.copy(f, m / f.name)
    code, lines, _ = _doctor(capsys, "--ckpts", str(m), "--lengths", "1k", "--canaries", "0")
    assert lines["tokenizer bos"].startswith("WARN") and "BOS" in lines["tokenizer bos"]


def test_eval_names_empty_predictions_and_records_the_share(eos_model, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        ["eval", "--ckpts", str(eos_model), "--tasks", "niah_single_1", "--lengths", "1k", "--samples", "3",
         "--out", str(out), "--no-progress"]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    last = printed.strip().splitlines()[-1]
    assert "all 3 predictions are empty" in last and "harness doctor" in last
    results = json.loads((out / "results.json").read_text())
    cell = results["suites"]["custom"]["per_task"]["niah_single_1"]["1024"]
    assert cell["degenerate"] == {"empty": 1.0, "at_max": 0.0, "repeat": 0.0, "n": 3}
    assert cell["bound"] == "floor" and results["degenerate"]["empty"] == 1.0
    assert "!empty" in printed and "(floor)" in printed  # the table flags the cell
    # the leaderboard marks it too
    from leaderboards.build import build, load_runs

    board = build(load_runs([str(out / "results.json")]))
    cells = [c for c in board["rows"][0]["cells"].values() if c.get("degenerate")]
    assert cells and "empty" in cells[0]["title"]


def test_eval_stops_on_a_failing_cheap_check(tiny_llama_dir, tmp_path, capsys):
    """A tokenizer larger than the model's vocabulary: eval stops before any work, --no-doctor runs."""
    from harness.models.embedded import build_tokenizer

    m = tmp_path / "m"
    shutil.copytree(tiny_llama_dir, m)
    for f in m.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            f.unlink()
    big = build_tokenizer(tmp_path / "tok", vocab_size=8192)  # ids past the model's 4096 embeddings
    for f in big.iterdir():
        shutil.copy(f, m / f.name)
    out = tmp_path / "out"
    args = [
        "eval",
        "--ckpts",
        str(m),
        "--tasks",
        "niah_single_1",
        "--lengths",
        "1k",
        "--samples",
        "1",
        "--out",
        str(out),
    ]
    assert main([*args, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "vocabulary" in err and "--no-doctor" in err and not out.exists()


def test_repetition_detector():
    from harness.core.degenerate import is_repeating

    assert is_repeating("the the the the the the the the")
    assert is_repeating("The answer is 42. 42. 42. 42. 42. 42. 42.")
    assert not is_repeating("The special magic number for fair-sun is 7381924.")
    assert not is_repeating("")


def test_the_cheap_checks_keep_a_rerun_light(tiny_llama_dir, tmp_path):
    """eval's checks before planning read only the generation tokenizer and config.json: a re-run
    with nothing to compute still imports neither torch nor transformers (benchmarks/rerun_noop.py)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "out"
    argv = ["eval", "--ckpts", str(tiny_llama_dir), "--tasks", "vt", "--lengths", "1k", "--samples", "1",
            "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    code = (
        "import sys\nfrom harness.cli import main\n"
        f"rc = main({argv!r})\n"
        "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "print('HEAVY', rc, heavy)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert "HEAVY 0 []" in done.stdout, done.stdout + done.stderr
