"""harness.core.hub: offline and unreachable hubs fail at once, the hub is asked at most once per run, and
`harness generate` / `harness eval` without a network say so in one line per task (exit 2)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core import hub
from harness.core.errors import TaskUnavailable

ROOT = Path(__file__).resolve().parents[2]
DEAD_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused


@pytest.fixture
def fresh_hub(monkeypatch):
    """No offline variables, a refused endpoint, and a hub state forgotten before and after."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", DEAD_ENDPOINT)
    hub.reset()
    yield
    hub.reset()


def _count_connections(monkeypatch):
    calls = []
    real = socket.create_connection

    def counting(address, *a, **k):
        calls.append(address)
        return real(address, *a, **k)

    monkeypatch.setattr(socket, "create_connection", counting)
    return calls


def test_offline_variable_means_no_request(monkeypatch):
    calls = _count_connections(monkeypatch)
    hub.reset()
    for value, offline in (("1", True), ("true", True), ("0", False), ("", False)):
        monkeypatch.setenv("HF_HUB_OFFLINE", value)
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "")
        assert (hub.offline_reason() is not None) == offline
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(hub.HubUnreachable, match="offline: HF_DATASETS_OFFLINE is set"):
        hub.load_dataset("cais/mmlu", "all", split="test")
    assert calls == []
    assert issubclass(hub.HubUnreachable, TaskUnavailable)  # loaders report the task unavailable
    hub.reset()


def test_unreachable_hub_is_probed_once(fresh_hub, monkeypatch):
    calls = _count_connections(monkeypatch)
    assert hub.endpoint() == ("127.0.0.1", 9)
    for _ in range(3):
        with pytest.raises(hub.HubUnreachable, match=r"cannot connect to 127\.0\.0\.1:9"):
            hub.download("THUDM/LongBench-v2", "data.json")
    assert calls == [("127.0.0.1", 9)]


def test_connection_error_during_a_call_marks_the_hub_unreachable(fresh_hub, monkeypatch):
    """A probe that passes but a request that fails to connect: later calls do not try again."""
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: type("S", (), {"close": lambda self: None})())
    tried = []

    class ConnectError(Exception):
        pass

    def failing(*a, **k):
        tried.append(a)
        raise ConnectError("connection reset")

    with pytest.raises(hub.HubUnreachable, match="ConnectError: connection reset"):
        hub._call(failing, 1)
    with pytest.raises(hub.HubUnreachable):
        hub._call(failing, 2)
    assert tried == [(1,)]
    # other errors (a missing config, a bad file) are the caller's to word, and do not mark the hub
    hub.reset()
    with pytest.raises(ValueError):
        hub._call(lambda: (_ for _ in ()).throw(ValueError("no such config")))
    assert hub.offline_reason() is None


def _cli(args, tmp_path, **env_extra):
    drop = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(HF_ENDPOINT=DEAD_ENDPOINT, PYTHONPATH=str(ROOT), HARNESS_CACHE=str(tmp_path / "cache"), **env_extra)
    for var in ("HARNESS_LONGBENCH", "HARNESS_LONGBENCH_V2", "HARNESS_BABILONG"):
        env.pop(var, None)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return proc, time.perf_counter() - start


def test_generate_without_network_fails_fast_with_one_line_per_task(tmp_path):
    """The issue's command: 21 LongBench tasks, hub unreachable. Before: 16 minutes of retries, 484
    lines, exit 0 with nothing written. Now: no retry, one line per task naming the flag, the
    variable and the files, and exit 2."""
    proc, seconds = _cli(
        ["generate", "--suite", "longbench", "--lengths", "4k", "--samples", "2", "--out", "x"], tmp_path
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Retrying" not in out and "Traceback" not in out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    unavailable = [ln for ln in lines if ": unavailable: " in ln]
    assert len(unavailable) == 21 and len(lines) <= 23
    for ln in unavailable:
        assert "cannot connect to 127.0.0.1:9" in ln and "--longbench DIR" in ln and "HARNESS_LONGBENCH=DIR" in ln
        assert "<task>.jsonl files of THUDM/LongBench's data.zip" in ln
    assert lines[-1].startswith("error: no task can run: ") and "trec" in lines[-1]
    assert not (tmp_path / "x").exists()  # a command that can do nothing writes nothing
    # retries alone would take about 20 s per task (7 minutes here); one refused connection takes
    # milliseconds, so even a loaded machine stays far below that
    assert seconds < 300, f"took {seconds:.0f} s"


def test_eval_without_network_names_every_task_in_one_error(tmp_path, tiny_llama_dir):
    proc, _ = _cli(
        ["eval", "--ckpts", str(tiny_llama_dir), "--suite", "longbench-icl", "--out", "o", "--no-progress"], tmp_path
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    errors = [ln for ln in out.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "Retrying" not in out
    for task in ("trec", "triviaqa", "samsum", "lsht"):
        assert f"{task}: LongBench {task} not found (cannot connect to 127.0.0.1:9" in errors[0]
    assert not (tmp_path / "o").exists()  # a rejected command writes nothing


def test_behind_a_proxy_the_first_failed_call_decides(fresh_hub, monkeypatch):
    calls = _count_connections(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")

    def refused(*a, **k):
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(hub.HubUnreachable, match="ConnectionRefusedError"):
        hub._call(refused)
    assert calls == []  # no direct probe: the proxy is the way out
    with pytest.raises(hub.HubUnreachable):
        hub.download("THUDM/LongBench-v2", "data.json")
