"""Shared by the failure-mode corpus (docs/failure-modes.md): `harness doctor` and `harness eval`
run in-process, as tests/doctor does, their check lines parsed by name."""

from __future__ import annotations

import json

import pytest

from harness.cli import main

STATUSES = ("PASS", "WARN", "FAIL", "SKIP")


class Ran:
    """What one in-process command left: exit code, stdout, stderr, and the doctor's lines by name."""

    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err
        self.lines = {line[6:22].strip(): line for line in out.splitlines() if line[:4] in STATUSES}

    def failed(self, name: str, *words: str) -> bool:
        """The check `name` printed a FAIL line holding every one of `words`."""
        line = self.lines.get(name, "")
        return line.startswith("FAIL") and all(w in line for w in words)

    @property
    def last_error(self) -> str:
        lines = self.err.strip().splitlines()
        return lines[-1] if lines else ""


@pytest.fixture
def run(capsys):
    """run("doctor", *args) / run("eval", *args): the command in-process, its output captured."""

    def _run(command: str, *args: str) -> Ran:
        capsys.readouterr()
        code = main([command, "--no-progress", *args])
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return _run


def served(server, tokenizer) -> list[str]:
    """The flags of a served model behind `server`, counted with `tokenizer`."""
    return ["--backend", "openai", "--base-url", server.url, "--model", "tiny", "--tokenizer", str(tokenizer),
            "--concurrency", "1", "--retries", "0"]  # fmt: skip


def records(out) -> list[dict]:
    """The records of a run's store (none when it stopped before writing any)."""
    path = out / "samples.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()[1:]]


@pytest.fixture(scope="session")
def eos_model(tiny_llama_dir, tmp_path_factory, bpe_tokenizer):
    """The tiny Llama made to emit EOS at once (an instruct model prompted the wrong way)."""
    from .models import constant_model

    return constant_model(tiny_llama_dir, tmp_path_factory.mktemp("eos") / "m", bpe_tokenizer.eos_token_id)
