"""`harness train` end to end (data files -> checkpoints eval can select) and its one-line errors."""

from __future__ import annotations

import json

import pytest

from harness.cli import main


def _args(model, data, out, *extra):
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
        "3",
        "--dtype",
        "fp32",
        "--no-progress",
        *extra,
    ]


def test_train_cli_writes_evaluable_checkpoints(tiny_llama_dir, corpus_path, tmp_path, capsys):
    from harness.models.sources import select_checkpoints
    from training.logging import read_log

    out = tmp_path / "run"
    code = main(
        _args(
            tiny_llama_dir,
            corpus_path,
            out,
            "--save-every",
            "1",
            "--keep-last",
            "2",
            "--rope-theta",
            "5e5",
            "--domain-tags",
            "domain",
            "--interleave-chunks",
            "2",
            "--max-docs",
            "40",
            "--lr",
            "1e-3",
        )
    )
    assert code == 0, capsys.readouterr().err
    ckpts = select_checkpoints(f"{out}/ckpt-<0..9>")
    assert [c.step for c in ckpts] == [2, 3]
    meta = ckpts[-1].training
    assert (
        meta["window"],
        meta["rope_theta"],
        meta["domain_tags"],
        meta["interleave_chunks"],
        meta["attention_kernel"],
    ) == (64, 5e5, "domain", 2, "sdpa-doc")
    config = json.loads((out / "ckpt-3" / "config.json").read_text())
    # window 64 on a model of 8192 positions: the model keeps its context (not the window)
    assert config["max_position_embeddings"] == 8192 and config["rope_parameters"]["rope_theta"] == 5e5
    rows = read_log(out / "log.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(r["tokens_per_s"] > 0 and r["lr"] == 1e-3 and r["loss_tokens"] > 0 for r in rows)
    # Same command again: resumes from the final state and does nothing.
    assert (
        main(
            _args(
                tiny_llama_dir,
                corpus_path,
                out,
                "--save-every",
                "1",
                "--keep-last",
                "2",
                "--rope-theta",
                "5e5",
                "--domain-tags",
                "domain",
                "--interleave-chunks",
                "2",
                "--max-docs",
                "40",
                "--lr",
                "1e-3",
            )
        )
        == 0
    )
    assert "already trained to step 3" in capsys.readouterr().out


def test_train_cli_mixture(tiny_llama_dir, corpus_path, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        _args(
            tiny_llama_dir,
            corpus_path,
            out,
            "--mixture",
            "tokens=20000,source=domain,long_threshold=1000",
            "--max-docs",
            "60",
            "--save-every",
            "3",
        )
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Token Ratio" in captured.out and "C4" in captured.out  # the Appendix-C style table, per domain
    assert "Token Ratio" in (out / "mixture.txt").read_text()
    assert (out / "ckpt-3" / "harness_training.json").exists()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model": "/nonexistent/model"}, "model not found"),
        ({"data": "/nonexistent/data.jsonl"}, "data not found"),
        ({"extra": ["--window", "8"]}, "--window 8"),
        ({"extra": ["--sp", "2"]}, "--sp 2 needs 2 processes"),
        ({"extra": ["--mode", "full", "--interleave-chunks", "2"]}, "--interleave-chunks"),
        ({"extra": ["--text-field", "body"]}, "text field 'body'"),
        ({"extra": ["--mixture", "C4=1"]}, "tokens=N"),
        ({"extra": ["--kernel", "varlen"]}, "varlen attention is CUDA-only"),
        ({"extra": ["--kernel", "flex"]}, "no backward on CPU"),
    ],
)
def test_train_cli_user_errors_are_one_line(change, message, tiny_llama_dir, corpus_path, tmp_path, capsys):
    model = change.get("model", tiny_llama_dir)
    data = change.get("data", corpus_path)
    assert main(_args(model, data, tmp_path / "run", *change.get("extra", []))) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err, err


def test_unknown_mode_exits_2(tiny_llama_dir, corpus_path, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(_args(tiny_llama_dir, corpus_path, tmp_path / "run", "--mode", "sliding"))
    assert exc.value.code == 2


@pytest.mark.slow
def test_harness_eval_reads_training_checkpoints(tiny_llama_dir, corpus_path, tmp_path):
    """The contract end to end: `harness eval --ckpts RUN/ckpt-<A..B>` loads what `harness train` wrote."""
    out = tmp_path / "run"
    assert (
        main(
            _args(
                tiny_llama_dir,
                corpus_path,
                out,
                "--save-every",
                "1",
                "--keep-last",
                "2",
                "--max-docs",
                "20",
                "--window",
                "256",
            )
        )
        == 0
    )  # eval's shortest length is 256
    res = tmp_path / "res"
    assert (
        main(
            [
                "eval",
                "--ckpts",
                f"{out}/ckpt-<1..3>",
                "--tasks",
                "niah_single_1",
                "--lengths",
                "256",
                "--samples",
                "1",
                "--out",
                str(res),
                "--no-progress",
                "--cache-dir",
                "none",
            ]
        )
        == 0
    )
    results = json.loads((res / "results.json").read_text())
    assert results["run"]["mode"] == "anchor"
    assert [c["step"] for c in results["run"]["checkpoints"]] == [2, 3]
    assert results["run"]["checkpoints"][-1]["training"]["window"] == 256


@pytest.mark.slow
def test_torchrun_ulysses_matches_single_process(tiny_llama_dir, corpus_path, tmp_path):
    """`torchrun --nproc-per-node 2 -m harness train --sp 2` (gloo, FSDP2 + Ulysses) logs the single-process curve."""
    import subprocess
    import sys

    from training.logging import read_log

    common = ["--max-docs", "30", "--lr", "1e-3", "--steps", "2", "--save-every", "2", "--keep-last", "1"]
    assert main(_args(tiny_llama_dir, corpus_path, tmp_path / "one", *common)) == 0
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "harness",
        *_args(tiny_llama_dir, corpus_path, tmp_path / "two", *common, "--sp", "2"),
    ]
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one = [r["loss"] for r in read_log(tmp_path / "one" / "log.jsonl")]
    two = [r["loss"] for r in read_log(tmp_path / "two" / "log.jsonl")]
    assert len(two) == 2 and two == pytest.approx(one, rel=1e-5)
    assert (tmp_path / "two" / "ckpt-2" / "model.safetensors").exists()
