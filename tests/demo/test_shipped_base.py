"""The shipped base model assets/demo-base: small, reproducible from the script, and it retrieves.

What makes `harness demo`'s scores meaningful is that this model already does some of what RULER
measures at 1K; a random model with the same tokenizer, scored the same way, gets nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.demo.config import DEFAULT_MODEL
from training import demo_base

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pretrain_demo_base.sh"


def _score(tmp_path, ckpt, task: str, samples: int) -> float:
    out = tmp_path / f"eval-{Path(ckpt).name}-{task}"
    rc = main(
        [
            "eval",
            "--ckpts",
            str(ckpt),
            "--tasks",
            task,
            "--lengths",
            "1k",
            "--samples",
            str(samples),
            "--max-model-len",
            "1024",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    suite = next(iter(json.loads((out / "results.json").read_text())["suites"].values()))
    return suite["per_task"][task]["1024"]["mean"]


def test_shipped_base_is_a_few_mb_with_the_demo_tokenizer(tmp_path):
    assert (DEFAULT_MODEL / "model.safetensors").stat().st_size < 4 * 2**20
    config = json.loads((DEFAULT_MODEL / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 2 and config["hidden_size"] == 128
    # The script's first step rebuilds exactly this tokenizer.
    rebuilt = demo_base.build_tokenizer(tmp_path / "tok")
    vocab = lambda d: json.loads((Path(d) / "tokenizer.json").read_text())["model"]
    assert vocab(rebuilt) == vocab(DEFAULT_MODEL)


def test_shipped_base_is_the_last_step_of_the_script():
    """The recorded training run is stage 3 of scripts/pretrain_demo_base.sh at its default step count."""
    meta = json.loads((DEFAULT_MODEL / "harness_training.json").read_text())
    steps = int(re.search(r"STAGE3_STEPS=\$\{STAGE3_STEPS:-(\d+)\}", SCRIPT.read_text()).group(1))
    assert meta["step"] == steps and meta["mode"] == "intradoc" and meta["window"] == 1024


def test_the_scripts_corpora_are_generated_unchanged(tmp_path):
    """The corpora the shipped model saw: each command in the script still writes the recorded sha256."""
    from training import demo_corpus

    commands = re.findall(
        r'demo_corpus "\$WORK/(\w+)\.jsonl" ([^#]*?)# sha256 ([0-9a-f]{16})', SCRIPT.read_text().replace("\\\n", " ")
    )
    assert [name for name, _, _ in commands] == ["repeat", "mixed", "long"]
    for name, args, digest in commands:
        assert demo_corpus.write(tmp_path / f"{name}.jsonl", **_write_kwargs(args)) == digest, name


def _write_kwargs(args: str) -> dict:
    """`--num-docs 60000 --copy-share 0.05` -> {"num_docs": 60000, "copy_share": 0.05} (demo_corpus.write's names)."""
    tokens = args.split()
    return {flag[2:].replace("-", "_"): float(v) if "." in v else int(v) for flag, v in zip(tokens[::2], tokens[1::2])}


@pytest.fixture(scope="module")
def random_base(tmp_path_factory):
    """The script's initial weights: same tokenizer and shape as the shipped model, no training."""
    return demo_base.build_initial_model(
        tmp_path_factory.mktemp("init"), layers=2, hidden=128, heads=8, max_len=8192, seed=0
    )


@pytest.mark.parametrize("task", ["niah_single_1", "vt"])
def test_shipped_base_retrieves_at_1k_and_a_random_model_does_not(tmp_path, random_base, task):
    assert _score(tmp_path, DEFAULT_MODEL, task, samples=8) > 0
    assert _score(tmp_path, random_base, task, samples=8) == 0
