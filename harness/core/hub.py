"""The one door from the task loaders to the Hugging Face hub.

    from harness.core import hub
    rows = hub.load_dataset("cais/mmlu", "all", split="test")     # HubUnreachable when offline
    path = hub.download("THUDM/LongBench-v2", "data.json")

Without a network, `datasets` and `huggingface_hub` retry every request for about 20 s, once per
task and file: a suite of 21 tasks took 16 minutes to say that nothing could be loaded. Here the
hub is asked at most once per process:
  - HF_HUB_OFFLINE / HF_DATASETS_OFFLINE (any value but "", 0, false) mean offline: no request;
  - before the first request one TCP connection to the hub's endpoint (HF_ENDPOINT, default
    huggingface.co:443) is tried with a short timeout (not behind an HTTPS proxy, where only the
    proxy's answer tells); when it fails, or when a hub call later fails
    with a connection error, the hub is marked unreachable for the rest of the run and every later
    call raises HubUnreachable at once.
The loaders turn HubUnreachable into their one "unavailable" line naming the local folder, flag,
environment variable and files (tasks.data_sources).
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlparse

from harness.core.errors import TaskUnavailable

PROBE_TIMEOUT_S = 3.0
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")

_lock = threading.Lock()
_unreachable: str | None = None  # why the hub is out of reach for this run (None: not known to be)
_probed = False


class HubUnreachable(TaskUnavailable):
    """The hub cannot be asked (offline, or no connection): the message says why."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def offline_reason() -> str | None:
    """Why the hub must not be asked ("HF_HUB_OFFLINE is set", ...), or None."""
    for var in _OFFLINE_VARS:
        if _truthy(os.environ.get(var)):
            return f"offline: {var} is set"
    return _unreachable


def endpoint() -> tuple[str, int]:
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    return url.hostname or "huggingface.co", port


def _proxy() -> str | None:
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        if os.environ.get(var):
            return os.environ[var]
    return None


def mark_unreachable(reason: str) -> None:
    """No more hub requests in this process (the first failure says why)."""
    global _unreachable
    with _lock:
        if _unreachable is None:
            _unreachable = reason


def reset() -> None:
    """Forget what was learned about the hub (tests; a long-lived process after the network returns)."""
    global _unreachable, _probed
    with _lock:
        _unreachable, _probed = None, False


def check() -> None:
    """Raise HubUnreachable unless the hub may be asked; probes the connection once per process."""
    global _probed
    reason = offline_reason()
    if reason is None and not _probed and _proxy() is None:  # behind a proxy a direct connection proves nothing
        host, port = endpoint()
        try:
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
        except OSError as exc:
            mark_unreachable(f"cannot connect to {host}:{port} ({exc.strerror or type(exc).__name__})")
        _probed = True
        reason = offline_reason()
    if reason is not None:
        raise HubUnreachable(f"the hub is unreachable: {reason}")


def _is_connection_error(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    connection = {
        "ConnectionError",
        "ConnectError",
        "ConnectTimeout",
        "Timeout",
        "TimeoutException",
        "LocalEntryNotFoundError",  # huggingface_hub: no connection and nothing cached
        "OfflineModeIsEnabled",
    }
    return bool(names & connection) or isinstance(exc, (socket.timeout, socket.gaierror, ConnectionError))


def _call(fn, *args, **kwargs):
    check()
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if _is_connection_error(exc) or (exc.__cause__ is not None and _is_connection_error(exc.__cause__)):
            mark_unreachable(f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}".rstrip(": "))
            raise HubUnreachable(f"the hub is unreachable: {offline_reason()}") from None
        raise


def load_dataset(*args, **kwargs):
    """datasets.load_dataset through the door (HubUnreachable instead of minutes of retries)."""
    import datasets

    return _call(datasets.load_dataset, *args, **kwargs)


def download(repo: str, filename: str, repo_type: str = "dataset") -> str:
    """huggingface_hub.hf_hub_download of one file of a hub repository; the local path."""
    from huggingface_hub import hf_hub_download

    return _call(hf_hub_download, repo, filename, repo_type=repo_type)


def first_line(exc: BaseException) -> str:
    """A hub error as a short phrase for an "unavailable" line."""
    text = str(exc).strip()
    return (text.splitlines()[0][:150] if text else type(exc).__name__).removeprefix("the hub is unreachable: ")
