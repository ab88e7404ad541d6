"""A fake OpenAI-compatible judge for the tests: stdlib http.server on 127.0.0.1.

GET /v1/models lists one model (id, root); POST /v1/chat/completions answers with `reply(prompt)`
(a function of the user turn) or, while `script` holds items, the next scripted reply text (or a
whole JSON body when an item is a dict). Every request body is kept in `requests`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JudgeServer:
    def __init__(self, reply, name: str = "judge", root: str = "/models/judge-v1"):
        self.reply, self.name, self.root = reply, name, root
        self.script: list = []
        self.requests: list[dict] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> JudgeServer:  # noqa: PYI034
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"data": [{"id": server.name, "root": server.root, "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if body.get("model") != server.name:
                    self._send(404, {"error": {"message": "no such model"}})
                    return
                item = server.script.pop(0) if server.script else server.reply(body["messages"][-1]["content"])
                if isinstance(item, dict):
                    self._send(200, item)
                    return
                msg = {"role": "assistant", "content": item}
                self._send(200, {"choices": [{"index": 0, "message": msg}], "usage": {"prompt_tokens": 1}})

        return Handler
