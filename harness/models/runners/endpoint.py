"""A small client for OpenAI-compatible HTTP servers (vLLM, SGLang, TGI, llama.cpp, hosted APIs).

    ep = Endpoint("http://127.0.0.1:8000", api_key=None)
    info = ep.describe("my-model")                  # {"id", "root", "max_model_len"}; UserError when not served
    reply = ep.post("/completions", {...}, Completion)  # validated; retries 429/5xx/bad replies with back-off

urllib for HTTP and pydantic for the reply schemas (harness/models/runners/replies.py): the backend works in
every environment the harness is installed in, .venv-vllm included (installed there with --no-deps;
pydantic is vLLM's own dependency), and needs no `openai` package.

Retries: a 429, a 5xx (500, 502, 503, 504, ...), a connection error (refused, reset, timed out) or a
malformed reply (not JSON, or not of the route's schema: a server mid-restart or overloaded can
answer 200 with an empty or error body) is tried again after 0.5 s, 1 s, 2 s, ... (doubled each
time, at most 30 s; a 429's Retry-After header is honoured up to that cap), `retries` times; then
EndpointError says what failed, naming the server's last answer. A malformed reply is never
returned, so it can never be stored as a prediction. Any other 4xx is the request's fault and is
not retried: RequestRejected carries the server's message.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import TypeVar

from harness.core.errors import UserError
from harness.models.runners.replies import ModelCard, ModelList, ReplyError, _Reply, parse

R = TypeVar("R", bound=_Reply)
_NOT_JSON = object()  # a 2xx answer whose body does not parse

RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 30.0


class EndpointError(UserError):
    """The server cannot be reached or keeps failing (after the retries)."""


class MalformedReply(EndpointError):
    """The server kept answering with replies that are not of the route's shape."""


class RequestRejected(UserError):
    """The server answered a request with a 4xx other than 429: retrying cannot help."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def api_base(url: str) -> str:
    """The API root requests are made under: `http://host:port` and `http://host:port/` mean
    `http://host:port/v1` (vLLM's, SGLang's and llama.cpp's root); any other path is kept."""
    if not url or "://" not in url:
        raise UserError(f"--base-url {url!r} is not a URL: pass e.g. http://127.0.0.1:8000/v1")
    parsed = urllib.parse.urlsplit(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"--base-url {url!r} is not an http(s) URL: pass e.g. http://127.0.0.1:8000/v1")
    path = parsed.path.rstrip("/")
    if not path:
        path = "/v1"
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


def api_key_from_env(var: str | None) -> str | None:
    """The API key: from --api-key-env VAR (which must be set), else OPENAI_API_KEY when set, else none."""
    if var:
        value = os.environ.get(var)
        if not value:
            raise UserError(f"--api-key-env {var}: the environment variable {var} is not set: export it first")
        return value
    return os.environ.get("OPENAI_API_KEY") or None


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def _error_text(body: bytes) -> str:
    """The server's own message from an error body (OpenAI: {"error": {"message"}}; vLLM: {"message"})."""
    try:
        data = json.loads(body)
    except ValueError:
        return _one_line(body.decode(errors="replace"))
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return _one_line(str(err.get("message") or err.get("detail") or data))
        return _one_line(str(err))
    return _one_line(str(data))


class Endpoint:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        retries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.base = api_base(base_url)
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self._sleep = sleep

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def _once(self, method: str, path: str, payload: dict | None) -> tuple[int, object, str, float | None]:
        """(status, parsed JSON body or _NOT_JSON, error text, Retry-After seconds). Status 0: no answer."""
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as exc:
            retry_after = None
            try:
                retry_after = float(exc.headers.get("Retry-After", ""))
            except (TypeError, ValueError):
                pass
            body = exc.read() if exc.fp is not None else b""
            return exc.code, None, _error_text(body) or exc.reason, retry_after
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, cut off
            reason = getattr(exc, "reason", exc)
            return 0, None, _one_line(str(reason)) or type(exc).__name__, None
        try:
            return status, json.loads(raw), "", None
        except (ValueError, RecursionError):
            return status, _NOT_JSON, f"not JSON: {raw[:120]!r}", None

    def request(
        self, method: str, path: str, schema: type[R], payload: dict | None = None, retries: int | None = None
    ) -> R:
        """The answer of one request as `schema`, tried again on 429/5xx/connection errors and on
        malformed replies with back-off."""
        tries = 1 + (self.retries if retries is None else retries)
        delay = BACKOFF_START_S
        status, err, bad_reply = 0, "", None
        for attempt in range(tries):
            status, body, err, retry_after = self._once(method, path, payload)
            bad_reply = None
            if 200 <= status < 300:
                try:
                    if body is _NOT_JSON:
                        raise ReplyError(err)
                    return parse(schema, body)
                except ReplyError as exc:
                    bad_reply = str(exc)
            elif status in (401, 403):
                raise UserError(
                    f"{self.base} refused the request ({status}: {err}): check the key in --api-key-env "
                    "(default OPENAI_API_KEY)"
                )
            elif status and status not in RETRY_STATUSES:
                raise RequestRejected(status, f"{self.base}{path} rejected the request ({status}: {err})")
            if attempt + 1 < tries:
                wait = min(BACKOFF_CAP_S, max(delay, retry_after or 0.0))
                self._sleep(wait)
                delay = min(BACKOFF_CAP_S, delay * 2)
        if bad_reply is not None:
            raise MalformedReply(
                f"the server at {self.base} answered {method} {path} with a malformed reply after {tries} tries: "
                f"{bad_reply}"
            )
        what = f"answered {status} ({err})" if status else f"cannot be reached ({err})"
        raise EndpointError(f"the server at {self.base} {what} after {tries} tries")

    def post(self, path: str, payload: dict, schema: type[R]) -> R:
        return self.request("POST", path, schema, payload)

    def models(self) -> list[ModelCard]:
        """/v1/models' entries. Unreachable at planning time is one clear error (few retries)."""
        try:
            return self.request("GET", "/models", ModelList, retries=min(self.retries, 2)).data
        except MalformedReply as exc:
            raise MalformedReply(f"{exc}; is --base-url an OpenAI-compatible API?") from None
        except EndpointError as exc:
            raise EndpointError(f"{exc}: start the server or fix --base-url") from None

    def describe(self, model: str) -> dict:
        """{"id", "root", "max_model_len"} of a served model; UserError listing the served ones if absent.

        `root` is what vLLM reports as the model the name serves (the checkpoint path or hub name;
        the id itself elsewhere), `max_model_len` the served context (None when not reported)."""
        served = self.models()
        entry = next((m for m in served if m.id == model), None)
        if entry is None:
            names = ", ".join(sorted(m.id for m in served)) or "none"
            raise UserError(f"model {model!r} is not served at {self.base} (it serves: {names}): pass one with --model")
        return {"id": model, "root": entry.root or model, "max_model_len": entry.context}


def server_token_count(base_url: str, model: str, prompt: str, api_key_env: str | None = None) -> int | None:
    """The server's own token count of `prompt` (special tokens included, as the server adds them),
    from POST /tokenize at the server root (vLLM, SGLang) or under the API root; None when the server
    has no such route or answers something else (harness doctor then says it cannot compare)."""
    ep = Endpoint(base_url, api_key_from_env(api_key_env), timeout=30.0, retries=0)
    root = ep.base.removesuffix("/v1")
    payload = {"model": model, "prompt": prompt, "add_special_tokens": True}
    for base in dict.fromkeys((root, ep.base)):
        ep.base = base  # api_base would put /v1 back on the server root
        status, body, _, _ = ep._once("POST", "/tokenize", payload)
        if not 200 <= status < 300 or not isinstance(body, dict):
            continue
        count, tokens = body.get("count"), body.get("tokens")
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            return count
        if isinstance(tokens, list):
            return len(tokens)
    return None
