"""A tiny OpenAI-compatible server of ours for the tests: stdlib http.server on 127.0.0.1 only.

It serves a local transformers checkpoint with its own code (transformers' generate and a forward
pass, not the harness's runners), so the harness's openai backend is checked against an
independent computation, and it can misbehave on purpose:
  - `fail`: statuses (429, 500, 503, ...) answered to the next POSTs before any real answer;
  - `max_answers`: after that many real answers the server stops listening, like a killed one;
  - `max_requests`: a hard bound on requests handled (then 503 forever), so no test can loop;
  - `logprobs` False: echo + logprobs requests are refused (400), as some servers do;
  - `mangle(path, answer)`: while set, every 200 answer (GET /v1/models included) is replaced by what
    it returns (any JSON value, or bytes sent as they are): malformed replies on purpose.
Routes: GET /v1/models (id, root, max_model_len), POST /tokenize (with `tokenize`), POST /v1/completions (text or token-id prompt;
echo + logprobs for prompt log-probs), POST /v1/chat/completions (the tokenizer's chat template,
continue_final_message as vLLM does). Completions and chat take vLLM's extra sampling fields
`stop_token_ids` (end like EOS) and `min_tokens` (EOS and those ids masked for that many tokens), as
transformers' generate runs them; every POST body is kept in `bodies`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class TinyServer:
    def __init__(
        self,
        model_dir: str,
        name: str = "tiny",
        max_model_len: int = 2048,
        fail: list[int] | None = None,
        max_answers: int | None = None,
        max_requests: int = 500,
        report_context: bool = True,
        logprobs: bool = True,
        mangle: Callable[[str, dict], object] | None = None,
        tokenize: bool = False,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.name, self.root, self.max_model_len = name, str(model_dir), max_model_len
        self.fail = list(fail or [])
        self.max_answers, self.max_requests = max_answers, max_requests
        self.report_context = report_context
        self.logprobs = logprobs  # False: refuse echo + logprobs, as some servers do
        self.mangle = mangle
        self.tokenize = tokenize  # answer POST /tokenize (the count with the served tokenizer), as vLLM does
        self.requests: list[tuple[str, int]] = []  # (path, status) of every request handled
        self.bodies: list[dict] = []  # the JSON body of every POST, as received
        self.answers = 0
        self.dead = False  # set once max_answers is reached: later requests get no answer
        self._lock = threading.Lock()  # one model call at a time, and consistent counters
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> TinyServer:  # noqa: PYI034
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()

    # -- the model ---------------------------------------------------------------------------
    def _generate(self, ids: list[int], max_tokens: int, stop: list[str], body: dict | None = None) -> tuple[str, int]:
        torch = self.torch
        body = body or {}
        stops = [self.tok.eos_token_id, *body.get("stop_token_ids", [])]
        floor = {"min_new_tokens": body["min_tokens"]} if body.get("min_tokens") else {}
        with torch.inference_mode():
            out = self.model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                do_sample=False,
                max_new_tokens=max_tokens,
                eos_token_id=stops if len(stops) > 1 else self.tok.eos_token_id,
                pad_token_id=self.tok.eos_token_id,
                **floor,
            )
        new = out[0, len(ids) :].tolist()
        end = next((k for k, t in enumerate(new) if t in stops), None)
        if end is not None:  # vLLM leaves a stop id out of the text
            new = new[:end]
        text = self.tok.decode(new, skip_special_tokens=True)
        for s in stop:
            if s and s in text:
                text = text[: text.index(s)]
        return text, len(ids)

    def _prompt_logprobs(self, ids: list[int]) -> dict:
        torch = self.torch
        with torch.inference_mode():
            logits = self.model(torch.tensor([ids])).logits[0].float()
        lps = torch.log_softmax(logits, dim=-1)
        token_lps: list = [None]
        tops: list = [None]
        for pos in range(1, len(ids)):
            row = lps[pos - 1]
            best = int(row.argmax())
            token_lps.append(float(row[ids[pos]]))
            tops.append({self.tok.convert_ids_to_tokens(best): float(row[best])})
        return {"tokens": self.tok.convert_ids_to_tokens(ids), "token_logprobs": token_lps, "top_logprobs": tops}

    def _answer(self, path: str, body: dict) -> tuple[int, dict]:
        if body.get("model") != self.name:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
        if path == "/v1/completions":
            prompt = body["prompt"]
            ids = prompt if isinstance(prompt, list) else self.tok(prompt)["input_ids"]
            if len(ids) + body["max_tokens"] > self.max_model_len:
                return 400, {"error": {"message": "prompt too long"}}
            if body.get("echo") and body.get("logprobs"):
                if not self.logprobs:
                    return 400, {"error": {"message": "echo is not supported"}}
                lp = self._prompt_logprobs(ids)
                return 200, {"choices": [{"index": 0, "text": "", "logprobs": lp, "finish_reason": "length"}]}
            text, n = self._generate(ids, body["max_tokens"], body.get("stop") or [], body)
            choice = {"index": 0, "text": text, "finish_reason": "stop"}
            return 200, {"object": "text_completion", "choices": [choice], "usage": {"prompt_tokens": n}}
        if path == "/v1/chat/completions":
            cont = bool(body.get("continue_final_message"))
            text = self.tok.apply_chat_template(
                body["messages"], tokenize=False, add_generation_prompt=not cont, continue_final_message=cont
            )
            ids = self.tok(text, add_special_tokens=False)["input_ids"]  # the template writes BOS itself
            out, n = self._generate(ids, body["max_tokens"], body.get("stop") or [], body)
            msg = {"role": "assistant", "content": out}
            choice = {"index": 0, "message": msg, "finish_reason": "stop"}
            return 200, {"object": "chat.completion", "choices": [choice], "usage": {"prompt_tokens": n}}
        if path == "/tokenize" and self.tokenize:  # vLLM's route at the server root
            return 200, {"count": len(self.tok(body["prompt"])["input_ids"]), "max_model_len": self.max_model_len}
        return 404, {"error": {"message": f"no route {path}"}}

    # -- HTTP --------------------------------------------------------------------------------
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet tests
                pass

            def _send(self, status: int, body: object, headers: dict | None = None) -> None:
                if status == 200 and server.mangle is not None:
                    body = server.mangle(self.path, body)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                with server._lock:
                    server.requests.append((self.path, 200))
                entry = {"id": server.name, "object": "model", "root": server.root, "owned_by": "tests"}
                if server.report_context:
                    entry["max_model_len"] = server.max_model_len
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [entry]})
                else:
                    self._send(404, {"error": {"message": "no such route"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with server._lock:
                    server.bodies.append(body)
                    if server.dead:  # "killed": drop the connection unanswered
                        self.close_connection = True
                        return
                    if len(server.requests) >= server.max_requests:
                        status, answer, headers = 503, {"error": {"message": "request bound reached"}}, {}
                    elif server.fail:
                        status = server.fail.pop(0)
                        answer, headers = {"error": {"message": f"injected {status}"}}, {}
                        if status == 429:
                            headers = {"Retry-After": "0"}
                    else:
                        status, answer = server._answer(self.path, body)
                        headers = {}
                        server.answers += status == 200
                    server.requests.append((self.path, status))
                    stop_now = server.max_answers is not None and server.answers >= server.max_answers
                    server.dead = server.dead or stop_now
                self._send(status, answer, headers)
                if stop_now:  # like a killed server: nothing listens any more
                    threading.Thread(target=server.stop, daemon=True).start()

        return Handler
