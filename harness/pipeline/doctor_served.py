"""`harness doctor`'s probe of a served model at the run's longest request (harness/pipeline/doctor.py).

    from harness.pipeline.doctor_served import served_context_check
    check = served_context_check(cfg, tokenizer, context)   # one request: 1 token after the longest prompt

A server may accept a context on paper and not in practice: /v1/models reports no max_model_len
and --max-model-len claims more than the server takes (every request then answers 400, and a
harness that scores the empty answers reports 0.0 as a success: allenai/olmo-eval issue 310), or
the server cuts long prompts in silence (Ollama's num_ctx default: ollama/ollama issues 8099 and
3839, where a 160,689-token prompt was read as 16,387 with a 200 OK). One request settles both: a
prompt as long as the run's longest request (prompt + thinking + answer, less one token) with one
token to generate, the same admission rule the server applies to every request of the run, and the
prompt tokens the server says it read compared with the count of the local tokenizer.
"""

from __future__ import annotations

from harness.core.errors import UserError
from harness.pipeline.doctor_check import FAIL, PASS, SKIP, Check

_FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "


def _probe_text(tokenizer, tokens: int) -> tuple[str, int]:
    """A filler prompt of about `tokens` tokens as the runner counts them, and its exact count."""
    from harness.models.runners.common import prompt_ids

    unit = len(tokenizer(_FILLER, add_special_tokens=False)["input_ids"]) or 1
    ids = tokenizer(_FILLER * (tokens // unit + 2), add_special_tokens=False)["input_ids"]
    extra = len(prompt_ids(tokenizer, "a")) - len(tokenizer("a", add_special_tokens=False)["input_ids"])
    text = tokenizer.decode(ids[: max(1, tokens - extra)])
    return text, len(prompt_ids(tokenizer, text))


def served_context_check(cfg, tokenizer, context: int) -> Check:
    """A served model takes the run's longest request whole: no 400, no prompt read in part."""
    from harness.core.lengths import format_length
    from harness.models.runners.endpoint import Endpoint, EndpointError, RequestRejected, api_key_from_env
    from harness.models.runners.openai import prompt_truncated
    from harness.models.runners.replies import ChatCompletion, Completion
    from harness.pipeline.doctor_prompt import budget_needs

    needs = budget_needs(cfg, tokenizer, context)
    if not needs:
        return Check("served context", SKIP, "no generation task at a length: nothing to probe")
    need, task, L = max(needs)
    text, sent = _probe_text(tokenizer, min(need, context) - 1)
    ep = Endpoint(
        cfg.base_url, api_key_from_env(cfg.api_key_env), timeout=cfg.request_timeout, retries=min(cfg.retries, 2)
    )
    payload: dict = {"model": cfg.model, "max_tokens": 1, "temperature": 0.0}
    reply: ChatCompletion | Completion
    try:
        if cfg.chat_template:  # the server's template adds its own tokens: at least the text's arrive
            payload["messages"] = [{"role": "user", "content": text}]
            reply = ep.post("/chat/completions", payload, ChatCompletion)
        else:
            payload["prompt"] = text
            reply = ep.post("/completions", payload, Completion)
    except RequestRejected as exc:
        return Check(
            "served context",
            FAIL,
            f"the server refuses a prompt of {sent} tokens + 1 to generate, the size of the run's longest request "
            f"({task} at {format_length(L)}: {need} tokens with its budget) ({exc}): its context is shorter than "
            f"{context}; serve a longer --max-model-len, or pass the server's own with --max-model-len",
        )
    except (EndpointError, UserError) as exc:
        return Check("served context", FAIL, f"a probe at the run's longest request failed: {exc}")
    read = reply.usage.prompt_tokens if reply.usage else None
    if read is None:
        return Check(
            "served context", PASS, f"the server takes {sent} prompt tokens (it reports no usage: cuts not checked)"
        )
    if prompt_truncated(sent, read):
        return Check(
            "served context",
            FAIL,
            f"the server read {read} of the {sent} prompt tokens it was sent (a 200 OK): it cuts long prompts in "
            "silence (Ollama's num_ctx, a truncate setting of the server or a proxy), so the model never sees "
            f"most of the haystack; serve it with a context of at least {need} tokens",
        )
    return Check("served context", PASS, f"the server reads a {sent}-token prompt whole ({read} tokens counted there)")
