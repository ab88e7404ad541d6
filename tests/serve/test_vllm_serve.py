"""--backend openai against a real `vllm serve` (vLLM-CPU in .venv-vllm) on 127.0.0.1.

    VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm/bin/python -m pytest -q -m vllm tests/serve

Greedy predictions through the endpoint equal the offline vLLM backend's on the same checkpoint;
killing the server mid-run keeps what is stored and says so in one line; a restarted server
computes only the rest; a dead URL is one line. One server at a time, always killed at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

from harness.cli import main
from harness.pipeline.store import read_store

CONTEXT = 2048
COMMON = ["--tasks", "niah_single_1,vt", "--lengths", "1k", "--samples", "3", "--no-progress", "--cache-dir", "none"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve_command() -> list[str]:
    """`vllm serve MODEL`. vllm-cpu installs no "vllm" package metadata, which the `vllm` command
    reads for --version and fails without: there, the same server's module entry point, which
    takes the model as --model."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm")
        return [str(Path(sys.executable).with_name("vllm")), "serve"]
    except PackageNotFoundError:
        return [sys.executable, "-m", "vllm.entrypoints.launchers.api_server.entry", "--model"]


class VLLMServer:
    """`vllm serve` in its own process group on 127.0.0.1; log in a file; kill() is SIGKILL."""

    def __init__(self, model_dir: Path, log: Path, port: int | None = None):
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log
        cmd = [*_serve_command(), str(model_dir), "--served-model-name", "tiny", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--max-model-len", str(CONTEXT), "--dtype", "float32"]
        cmd += ["--enforce-eager", "--seed", "0", "--max-num-seqs", "8"]
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
        self._log = open(log, "wb")  # noqa: SIM115 (the server writes to it until kill() closes it)
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 600  # minutes on a busy 2-core machine
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.kill()
                pytest.fail(f"vllm serve exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(1)
        self.kill()
        pytest.fail(f"vllm serve did not answer within 600 s:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def completions_served(self) -> int:
        return self.log_path.read_text(errors="replace").count('"POST /v1/completions HTTP/1.1" 200')

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)
        self._log.close()


@pytest.fixture(scope="module")
def offline(tiny_llama_dir, tmp_path_factory):
    """The offline vLLM backend's records, computed before any server starts (one engine at a time)."""
    out = tmp_path_factory.mktemp("offline")
    argv = ["eval", "--backend", "vllm", "--ckpts", str(tiny_llama_dir), "--dtype", "float32"]
    assert main([*argv, "--max-model-len", str(CONTEXT), *COMMON, "--out", str(out)]) == 0
    return {(r["task"], r["index"]): r for r in read_store(out / "samples.jsonl")[1]}


@pytest.fixture(scope="module")
def server(offline, tiny_llama_dir, tmp_path_factory):
    s = VLLMServer(tiny_llama_dir, tmp_path_factory.mktemp("serve") / "vllm.log")
    try:
        yield s
    finally:
        s.kill()


def _served(url: str, model_dir: Path, *extra: str) -> list[str]:
    return ["eval", "--backend", "openai", "--base-url", url, "--model", "tiny", "--tokenizer", str(model_dir), *extra]


def test_served_predictions_equal_the_offline_backend(server, offline, tiny_llama_dir, tmp_path):
    assert main([*_served(server.url, tiny_llama_dir), *COMMON, "--out", str(tmp_path)]) == 0
    api = {(r["task"], r["index"]): r for r in read_store(tmp_path / "samples.jsonl")[1]}
    assert api.keys() == offline.keys() and len(api) == 6
    for key, rec in api.items():
        assert rec["prediction"] == offline[key]["prediction"], key
        assert rec["num_tokens"] == offline[key]["num_tokens"]
    assert any(r["prediction"].strip() for r in api.values())
    rec = next(iter(api.values()))
    assert rec["settings"]["endpoint"] == {"model": "tiny", "root": str(tiny_llama_dir)}
    prov = json.loads((tmp_path / "results.json").read_text())["provenance"]
    assert prov["endpoint"]["served_max_model_len"] == CONTEXT  # read from /v1/models


def test_loglikelihood_through_vllm_serve_equals_transformers(server, tiny_llama_dir):
    from harness.models.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings
    from harness.models.runners.registry import get_runner

    endpoint = {"base_url": server.url}
    settings = RunnerSettings(backend="openai", max_model_len=CONTEXT, endpoint=endpoint, tokenizer=str(tiny_llama_dir))
    api = get_runner("openai", "tiny", settings)
    hf = get_runner("hf", str(tiny_llama_dir), RunnerSettings(backend="hf", dtype="float32"))
    try:
        greedy = hf.generate([GenerationRequest("The grass is green. The sky is", 3)])[0]
        reqs = [
            LoglikelihoodRequest("The grass is green. The sky is", greedy),
            LoglikelihoodRequest("The grass is green. ", "The sky is blue"),
        ]
        a, b = api.loglikelihood(reqs), hf.loglikelihood(reqs)
    finally:
        hf.close()
    assert [g for _, g in a] == [g for _, g in b] and a[0][1] is True
    assert [x for x, _ in a] == pytest.approx([x for x, _ in b], abs=2e-3)


def test_kill_mid_run_then_resume_computes_only_the_rest(server, tiny_llama_dir, tmp_path):
    """Runs last in this module: it kills the module's server."""
    n = 16
    args = _served(server.url, tiny_llama_dir, "--tasks", "vt", "--lengths", "1k", "--samples", str(n))
    args += ["--batch-size", "1", "--concurrency", "1", "--retries", "1", "--no-progress", "--cache-dir", "none"]
    args += ["--out", str(tmp_path)]
    store = tmp_path / "samples.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen([sys.executable, "-m", "harness", *args], stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and run.poll() is None:
            if store.exists() and store.read_text().count('"type": "sample"') >= 2:
                break
            time.sleep(0.05)
        server.kill()
        err = run.communicate(timeout=120)[1]
    finally:
        if run.poll() is None:
            run.kill()
    stored = len(read_store(store)[1])
    assert run.returncode == 2 and 2 <= stored < n, (run.returncode, stored, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the server at "), err
    assert f"{stored} samples are stored" in lines[0] and "re-run the same command" in lines[0]

    # The server is gone: a dead URL is one line too.
    assert main(args) == 2

    again = VLLMServer(tiny_llama_dir, tmp_path / "vllm2.log", port=server.port)  # restarted where it was
    try:
        assert main([*args]) == 0
        assert again.completions_served() == n - stored  # only the rest was sent
    finally:
        again.kill()
    assert sorted(r["index"] for r in read_store(store)[1]) == list(range(n))
