"""The served-model runner: any server speaking the OpenAI API (vLLM, SGLang, TGI, llama.cpp, hosted).

    vllm serve runs/anchor/ckpt-2000 --served-model-name anchor --max-model-len 131072 --port 8000
    harness eval --backend openai --base-url http://127.0.0.1:8000/v1 --model anchor \\
        --tokenizer runs/anchor/ckpt-2000 --suite ruler --lengths 4k-128k

Prompts are built and length-fitted by the evaluation loop with the LOCAL tokenizer
(--tokenizer, default the model name), exactly as for the in-process runners; this runner only
sends them. Two routes:
  - completions (/v1/completions, base models): the prompt text, greedy (temperature 0),
    max_tokens = the task's tokens to generate; the server adds BOS as the local count does.
  - chat (/v1/chat/completions, with --chat): the messages (optional system turn, the task input as
    the user turn); the server applies its chat template. The answer prefix, when kept, is sent as
    the start of the assistant's turn with vLLM's `continue_final_message` (servers without that
    extension need --no-answer-prefix, as instruct and reasoning models usually do anyway).
Loglikelihood requests (MMLU, HellaSwag, ppl) go to the completions route as token ids with
`echo` + `logprobs=1`, the way lm-eval's local-completions does: the prompt's own log-probs and the
top-1 at each position give the sum and the greedy flag.

Requests run on `concurrency` threads (default 8); harness/models/runners/endpoint.py retries 429, 5xx and
connection errors with exponential back-off. The evaluation loop hands over one batch at a time and
stores it when it is done, so a server that dies mid-run loses at most the batch in flight.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from harness.core.errors import UserError
from harness.models.runners.base import GenerationRequest, LoglikelihoodRequest, RunnerSettings
from harness.models.runners.common import cut_at_stop, encode_pair, prompt_ids, text_stop_ids
from harness.models.runners.endpoint import Endpoint, EndpointError, RequestRejected, api_key_from_env
from harness.models.runners.registry import register_runner
from harness.models.runners.replies import ChatCompletion, Completion, CompletionChoice, ScoredCompletion

DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_RETRIES = 5


def endpoint_from_settings(settings: RunnerSettings) -> Endpoint:
    ep = settings.endpoint or {}
    if not ep.get("base_url"):
        raise UserError("--backend openai needs --base-url URL (e.g. http://127.0.0.1:8000/v1)")
    return Endpoint(
        ep["base_url"],
        api_key=api_key_from_env(ep.get("api_key_env")),
        timeout=float(ep.get("timeout") or DEFAULT_TIMEOUT_S),
        retries=int(ep.get("retries", DEFAULT_RETRIES)),
    )


def prompt_truncated(sent: int, read: int) -> bool:
    """Whether a server read materially fewer prompt tokens than it was sent (it cut the prompt): more
    than 5% (and 8 tokens) fewer. Two tokenizers of one model differ by a token or two (BOS, a merge);
    a server that truncates (Ollama's num_ctx, a proxy's limit) reads a fraction."""
    return read < sent - max(8, sent // 20)


def prompt_logprobs_missing(endpoint: Endpoint, model: str, ids: list[int]) -> str | None:
    """Why the server cannot score loglikelihood tasks (None when it returns prompt log-probs):
    one short echo + logprobs request, sent when planning so those tasks are reported unavailable
    with the reason instead of failing (or scoring 0) later."""
    payload = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "logprobs": 1, "echo": True}
    try:
        choice = endpoint.post("/completions", payload, Completion).choices[0]
    except RequestRejected as exc:
        return f"the server refuses prompt log-probs (echo + logprobs): {exc}"
    ranked = choice.prompt_logprobs
    plain = choice.logprobs.token_logprobs if choice.logprobs else None
    if (ranked is not None and len(ranked) >= len(ids)) or (plain is not None and len(plain) >= len(ids)):
        return None
    return (
        "the server returns no prompt log-probs (echo + logprobs), which loglikelihood tasks need (vLLM returns them)"
    )


@register_runner("openai", local=False, help="a served model behind an OpenAI-compatible API (--base-url, --model)")
class OpenAIRunner:
    """A model behind an OpenAI-compatible HTTP API, evaluated through the Runner interface."""

    # The loop hands over --batch-size requests at a time and stores each batch as it finishes
    # (the requests of a batch still run `concurrency` at a time).
    submit_all = False

    def __init__(self, model: str, settings: RunnerSettings):
        from transformers import AutoTokenizer

        if not settings.max_model_len:
            raise UserError("--backend openai needs the served context: the server reports none, pass --max-model-len")
        self.settings = settings
        self.model = model
        self.endpoint = endpoint_from_settings(settings)
        self.concurrency = max(1, int((settings.endpoint or {}).get("concurrency") or DEFAULT_CONCURRENCY))
        self.max_model_len = int(settings.max_model_len)
        name = settings.tokenizer or model
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(name)
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(f"cannot load tokenizer {name!r} ({first}): pass --tokenizer DIR_OR_HUB") from None
        self.eos_id = self.tokenizer.eos_token_id
        self.chat = bool(settings.chat_template)
        self._warned = False
        self._lock = threading.Lock()

    # -- helpers -----------------------------------------------------------------------------
    def _map(self, fn, items: list) -> list:
        """fn over items on `concurrency` threads, results in item order; the first error is raised."""
        if len(items) <= 1 or self.concurrency == 1:
            return [fn(x) for x in items]
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(items)))
        try:
            futures = [pool.submit(fn, x) for x in items]
            return [f.result() for f in futures]
        finally:
            # On an error, requests not yet started are dropped (a dead server would make each of
            # them wait out its retries); those in flight finish.
            pool.shutdown(wait=True, cancel_futures=True)

    def _check_fits(self, n_prompt: int, n_new: int) -> None:
        if n_prompt + n_new > self.max_model_len:
            raise UserError(
                f"a prompt of {n_prompt} tokens + {n_new} to generate exceeds the served context "
                f"{self.max_model_len}: serve a longer --max-model-len or evaluate shorter lengths"
            )

    def _note_count(self, local: int, served: int | None) -> None:
        """Warn once when the server counts the prompt differently from the local tokenizer; stop
        when it read a fraction of it (it cut the prompt: the answer is not to the task asked)."""
        if served is not None and prompt_truncated(local, served):
            raise EndpointError(self._truncated(local, served))
        if served is None or served == local or self._warned:
            return
        with self._lock:
            if not self._warned:
                self._warned = True
                print(
                    f"warning: the server counted {served} prompt tokens where the local tokenizer counts {local}: "
                    "pass --tokenizer with the served model's tokenizer (lengths are counted locally)",
                    file=sys.stderr,
                )

    def _truncated(self, sent: int, read: int) -> str:
        return (
            f"the server at {self.endpoint.base} read {read} of the {sent} prompt tokens it was sent: it cuts long "
            "prompts in silence (Ollama's num_ctx, a truncate setting of the server or a proxy) or counts with another "
            "tokenizer than --tokenizer, so its answer is not to the prompt measured and is not stored; serve the model "
            "with a longer context, or pass its own tokenizer (harness doctor checks both)"
        )

    # -- generation --------------------------------------------------------------------------
    def _complete(self, r: GenerationRequest) -> str:
        n_prompt = len(prompt_ids(self.tokenizer, r.prompt))
        self._check_fits(n_prompt, r.max_new_tokens)
        payload: dict = {
            "model": self.model,
            "max_tokens": r.max_new_tokens,
            "temperature": 0.0,
            "n": 1,
            "seed": 0,
        }
        if r.stop:
            payload["stop"] = list(r.stop)
        # Token stops and a minimum length (LongBench pred.py's samsum) as vLLM's extra sampling fields,
        # the ids from the local tokenizer; sent only when set, so every other request is as it was.
        if r.stop_tokens:
            payload["stop_token_ids"] = sorted(text_stop_ids(self.tokenizer, r.stop_tokens))
        if r.min_new_tokens > 0:
            payload["min_tokens"] = r.min_new_tokens
        if self.chat:
            if not r.messages:
                raise UserError("--chat needs the task input as messages: this task gave only a prompt text")
            messages = [dict(m) for m in r.messages]
            payload["messages"] = messages
            if messages[-1]["role"] == "assistant":
                # The answer prefix starts the assistant's turn (vLLM/SGLang extension).
                payload.update(continue_final_message=True, add_generation_prompt=False)
            try:
                chat = self.endpoint.post("/chat/completions", payload, ChatCompletion)
            except RequestRejected as exc:
                hint = (
                    "; the answer prefix is sent as the start of the assistant's turn (continue_final_message), "
                    "pass --no-answer-prefix for servers without that extension"
                    if messages[-1]["role"] == "assistant"
                    else ""
                )
                raise UserError(f"{exc}{hint}") from None
            # content is null only when a reasoning parser took the whole output as thinking.
            text = chat.choices[0].message.content or ""
            usage, finish = chat.usage, chat.choices[0].finish_reason
        else:
            payload["prompt"] = r.prompt
            completion = self.endpoint.post("/completions", payload, Completion)
            text, usage, finish = completion.choices[0].text, completion.usage, completion.choices[0].finish_reason
        if finish == "content_filter":
            # The provider withheld the answer: no prediction exists, and storing "" would score a
            # 0 the model never earned. The run stops here (what is stored stays) with the reason.
            raise EndpointError(
                f"{self.endpoint.base} withheld an answer (finish_reason 'content_filter', the provider's content "
                "filter): it is not stored as a prediction; evaluate this task on an unfiltered deployment or "
                "leave it out with --exclude"
            )
        self._note_count(n_prompt, usage.prompt_tokens if usage else None)
        return cut_at_stop(text, r.stop)

    def generate(self, requests: list[GenerationRequest]) -> list[str]:
        return self._map(self._complete, requests)

    # -- loglikelihood -----------------------------------------------------------------------
    def _score(self, pair: tuple[list[int], list[int]]) -> tuple[float, bool]:
        ctx, cont = pair
        # One generated token rides along (max_tokens 0 is refused by many servers).
        self._check_fits(len(ctx) + len(cont), 1)
        payload = {
            "model": self.model,
            "prompt": ctx + cont,
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": 1,
            "echo": True,
        }
        choice = self.endpoint.post("/completions", payload, ScoredCompletion).choices[0]
        return self._sum_prompt_logprobs(choice, range(len(ctx), len(ctx) + len(cont)), cont)

    def _sum_prompt_logprobs(self, choice: CompletionChoice, positions: range, cont: list[int]) -> tuple[float, bool]:
        """(sum of the continuation's log-probs, whether each token is the top-1), from a reply the
        schema checked (every value finite and <= 0, only position 0 without one)."""
        ranked = choice.prompt_logprobs  # vLLM: {token id: {"logprob", "rank"}} per position
        if ranked is not None and len(ranked) >= positions.stop:
            entries = [(ranked[p] or {}).get(str(t)) for p, t in zip(positions, cont)]
            if all(e is not None and e.rank is not None for e in entries):
                return sum(e.logprob for e in entries if e), all(e.rank == 1 for e in entries if e)
        lp = choice.logprobs
        token_lps = lp.token_logprobs if lp else None
        tops = lp.top_logprobs if lp else None
        if not token_lps or not tops or len(token_lps) < positions.stop:
            raise UserError(
                f"{self.endpoint.base} returned no prompt log-probs (echo + logprobs): loglikelihood tasks "
                "need a server that returns them (vLLM does)"
            )
        total: float = 0.0
        greedy = True
        for pos in positions:
            tok_lp, top = token_lps[pos], tops[pos]
            # The schema lets only position 0 go without; the context (never empty) comes first.
            assert tok_lp is not None and top is not None
            total += tok_lp
            # The OpenAI form keys the top-1 by its text: greedy when the prompt token's own
            # log-prob is the best at its position.
            greedy = greedy and tok_lp >= max(top.values(), default=tok_lp)
        return total, greedy

    def loglikelihood(self, requests: list[LoglikelihoodRequest]) -> list[tuple[float, bool]]:
        pairs = [encode_pair(self.tokenizer, self.eos_id, r.context, r.continuation) for r in requests]
        return self._map(self._score, pairs)

    def close(self) -> None:
        """Nothing to free: the model lives in the server."""
