"""A model judge behind an OpenAI-compatible API, for the tasks that need one (HELMET's LongQA and
summarization).

    harness eval --suite helmet --judge-base-url http://127.0.0.1:8001/v1 --judge-model gpt-4o ...

The flags reach the tasks through environment variables (as the data folders do), so every
worker sees the same judge. A judged task asks `judge_settings()` at planning time: it names the
judge (base URL, model id, the root the server reports for it, and the sampling settings HELMET
uses: temperature 0.1, top_p 0.9, seed 42), which goes into provenance and into each judged
record's settings["judge"] (a different judge computes new records). Without the flags those
tasks are unavailable, with one line naming them.

Judge replies are untrusted: the request goes through harness/models/runners/endpoint.py's Endpoint
(retries, reply-shape checks) and the reply's text must hold the JSON scores the task asks for,
each a number in its allowed range. A reply that does not is asked again (the judge samples at
temperature 0.1), up to ATTEMPTS times; then JudgeReplyError stops the run with one line (the
records already scored stay in the store; re-running resumes) - a sample is never scored 0
because its judge said something unreadable.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import lru_cache

from harness.core.errors import TaskUnavailable, UserError

ENV_BASE_URL = "HARNESS_JUDGE_BASE_URL"
ENV_MODEL = "HARNESS_JUDGE_MODEL"
ENV_API_KEY_ENV = "HARNESS_JUDGE_API_KEY_ENV"
FLAGS = "--judge-base-url URL --judge-model NAME"
ATTEMPTS = 3
PROMPTS_SOURCE = "princeton-nlp/HELMET@4526dfb scripts/eval_gpt4_{longqa,summ}.py"


class JudgeReplyError(UserError):
    """The judge's replies could not be read as the scores asked for."""


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    model: str
    api_key_env: str | None = None
    temperature: float = 0.1  # HELMET: OpenAIModel("gpt-4o-2024-05-13", temperature=0.1), do_sample
    top_p: float = 0.9
    seed: int = 42
    timeout: float = 600.0
    retries: int = 5


def set_judge(base_url: str | None, model: str | None, api_key_env: str | None = None) -> None:
    """--judge-base-url / --judge-model / --judge-api-key-env: both or neither of the first two."""
    if bool(base_url) != bool(model):
        raise UserError(f"a judge needs both flags: pass {FLAGS}")
    if base_url and model:
        from harness.models.runners.endpoint import api_base

        os.environ[ENV_BASE_URL] = api_base(base_url)
        os.environ[ENV_MODEL] = model
        if api_key_env:
            os.environ[ENV_API_KEY_ENV] = api_key_env
        else:
            os.environ.pop(ENV_API_KEY_ENV, None)


def configured(what: str) -> JudgeConfig:
    """The judge set by the flags; TaskUnavailable naming the flags when none is."""
    base, model = os.environ.get(ENV_BASE_URL), os.environ.get(ENV_MODEL)
    if not base or not model:
        raise TaskUnavailable(f"{what} is scored by a model judge: pass {FLAGS} (an OpenAI-compatible server)")
    return JudgeConfig(base, model, os.environ.get(ENV_API_KEY_ENV) or None)


def _endpoint(cfg: JudgeConfig):
    from harness.models.runners.endpoint import Endpoint, api_key_from_env

    return Endpoint(cfg.base_url, api_key_from_env(cfg.api_key_env), timeout=cfg.timeout, retries=cfg.retries)


@lru_cache(maxsize=8)
def _describe(cfg: JudgeConfig) -> dict:
    try:
        info = _endpoint(cfg).describe(cfg.model)
    except UserError as exc:  # unreachable, or not serving that model: name the judge's flags
        raise UserError(f"judge: {exc} (the judge is set by {FLAGS})") from None
    return {"base_url": _endpoint(cfg).base, "model": info["id"], "root": info["root"]}


def judge_settings(cfg: JudgeConfig, max_tokens: int, prompts: str = PROMPTS_SOURCE) -> dict:
    """What identifies the judge in provenance and in each judged record's settings["judge"];
    `prompts` names where the task's judge prompts come from (HELMET's by default)."""
    return {
        **_describe(cfg),
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "seed": cfg.seed,
        "max_tokens": max_tokens,
        "prompts": prompts,
    }


def ask(cfg: JudgeConfig, prompt: str, max_tokens: int) -> str:
    """The judge's reply text to one user turn (HELMET sends no system turn)."""
    payload = {
        "model": cfg.model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "seed": cfg.seed,
    }
    ep = _endpoint(cfg)
    try:  # served-safety's reply schemas: Endpoint validates the reply's shape (retried, then one error)
        from harness.models.runners.replies import ChatCompletion  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        body = ep.post("/chat/completions", payload)  # type: ignore[call-arg, unused-ignore]
    else:
        body = ep.post("/chat/completions", payload, ChatCompletion)  # type: ignore[call-arg, unused-ignore]
    content = _content(body)
    if not isinstance(content, str):
        raise JudgeReplyError(f"the judge at {cfg.base_url} answered without a message text: {str(body)[:120]!r}")
    return content


def _content(body):
    """The first choice's message text, from a validated reply object or a plain JSON dict."""
    if not isinstance(body, dict):
        choices = getattr(body, "choices", None) or []
        return getattr(getattr(choices[0], "message", None), "content", None) if choices else None
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = first.get("message")
    return message.get("content") if isinstance(message, dict) else None


def parse_json(text: str, code_block_fallback: bool = False) -> dict | None:
    """HELMET's parse_json: the last {...} of the reply as JSON (eval_gpt4_summ.py also tries the
    last ```json block when that fails); None when neither parses."""
    matches = re.findall(r"\{.*?\}", text, re.DOTALL)
    if not matches:
        return None
    try:
        out = json.loads(matches[-1])
    except ValueError:
        if not code_block_fallback:
            return None
        blocks = re.findall(r"(?:```json)(.+)(?:```)", text, re.DOTALL)
        try:
            out = json.loads(blocks[-1]) if blocks else None
        except ValueError:
            return None
    return out if isinstance(out, dict) else None


def number(value, low: float, high: float | None = None) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value
        and (high is None or value <= high)
    )


def judged(
    cfg: JudgeConfig,
    prompt: str,
    max_tokens: int,
    read: Callable[[dict], bool],
    what: str,
    code_block_fallback: bool = False,
) -> dict:
    """The judge's scores for one prompt: the parsed JSON for which read(scores) holds, asked up
    to ATTEMPTS times; JudgeReplyError when no reply qualifies."""
    reply = ""
    for _ in range(ATTEMPTS):
        reply = ask(cfg, prompt, max_tokens)
        scores = parse_json(reply, code_block_fallback)
        if scores is not None and read(scores):
            return scores
    head = " ".join(reply.split())[:120]
    raise JudgeReplyError(
        f"the judge {cfg.model!r} gave no readable scores for {what} in {ATTEMPTS} replies (last: {head!r}): "
        "check --judge-model is an instruction-following model; re-run to resume"
    )


def config_dict(cfg: JudgeConfig) -> dict:
    return asdict(cfg)
