"""Fake OpenAI-compatible servers for the failure-mode corpus: tests/serve/tiny_server.py's TinyServer
(a local transformers checkpoint behind stdlib http.server), made to misbehave the way public
trackers report real servers doing (docs/failure-modes.md names each source).

  - ThinkingServer: a reasoning model, scripted: "<think>" and `thought` tokens of thinking, then
    "</think>" and the first 7-digit number of the prompt (the needle's value), every part cut at
    max_tokens as a server cuts it; a prompt that already closed the thought is answered at once.
    `parser=True`: the thought goes to `reasoning_content` and the content is null when the budget
    ran out inside it (vLLM's reasoning parsers).
  - TruncatingServer: keeps only the last `keep` tokens of a prompt and says so in usage.prompt_tokens
    only (Ollama's num_ctx default).
  - QuietCapServer: reports no max_model_len and answers 400 to a prompt + max_tokens past `cap`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))

from tiny_server import TinyServer

__all__ = ["QuietCapServer", "ThinkingServer", "TinyServer", "TruncatingServer"]


class ThinkingServer(TinyServer):
    def __init__(self, model_dir: str, thought: int = 200, parser: bool = False, answer: str | None = None, **kw):
        super().__init__(model_dir, **kw)
        self.thought, self.parser, self.answer = thought, parser, answer

    def _script(self, prompt: str) -> tuple[str, str]:
        """(thinking, answer) this model writes after `prompt`."""
        found = re.findall(r"\b\d{7}\b", prompt)
        answer = self.answer or (found[0] if found else "I do not know.")
        if "</think>" in prompt:  # the thought was closed for it (a thinking budget): answer now
            return "", answer
        return "<think>\n" + "Let me look for it again. " * (self.thought // 7 + 1) + "\n</think>\n\n", answer

    def _cut(self, text: str, max_tokens: int) -> tuple[str, bool]:
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        return self.tok.decode(ids[:max_tokens]), len(ids) > max_tokens

    def _generate(self, ids, max_tokens, stop, body=None):
        thinking, answer = self._script(self.tok.decode(ids, skip_special_tokens=True))
        text, _ = self._cut(thinking + answer, max_tokens)
        for s in stop:
            if s and s in text:
                text = text[: text.index(s)]
        return text, len(ids)

    def _answer(self, path, body):
        status, answer = super()._answer(path, body)
        if not (self.parser and path == "/v1/chat/completions" and status == 200):
            return status, answer
        message = answer["choices"][0]["message"]
        content = message["content"]
        if "</think>" in content:
            thought, _, rest = content.partition("</think>")
            message.update(content=rest.lstrip(), reasoning_content=thought.removeprefix("<think>"))
        else:  # the budget ran out inside the thought: no content at all
            message.update(content=None, reasoning_content=content.removeprefix("<think>"))
            answer["choices"][0]["finish_reason"] = "length"
        return status, answer


class TruncatingServer(TinyServer):
    def __init__(self, model_dir: str, keep: int = 256, **kw):
        super().__init__(model_dir, **kw)
        self.keep = keep

    def _answer(self, path, body):
        if path == "/v1/completions" and not body.get("echo"):
            prompt = body["prompt"]
            ids = prompt if isinstance(prompt, list) else self.tok(prompt)["input_ids"]
            body = {**body, "prompt": ids[-self.keep :]}  # the head (instructions, needles) is gone
        return super()._answer(path, body)


class QuietCapServer(TinyServer):
    def __init__(self, model_dir: str, cap: int = 1200, **kw):
        super().__init__(model_dir, report_context=False, max_model_len=cap, **kw)
