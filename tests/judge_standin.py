"""A local stand-in for an OpenAI-compatible judge endpoint (``POST /v1/chat/completions``) on 127.0.0.1, started by a
test: it records every request (headers and JSON body) and answers with ``reply(prompt)``: a str (the judge's
message content), an int (an HTTP error status) or None (a body that is not an OpenAI reply)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JudgeStandin:
    def __init__(self, reply):
        self.reply, self.requests = reply, []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with outer.lock:
                    outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                answer = outer.reply(body["messages"][-1]["content"]) if self.path == "/v1/chat/completions" else 404
                if isinstance(answer, int):
                    self._send(answer, {"error": {"message": "stand-in error"}})
                elif answer is None:
                    self._send(200, {"unexpected": True})
                else:
                    self._send(200, {"id": "x", "object": "chat.completion", "model": body.get("model"),
                                     "choices": [{"index": 0, "finish_reason": "stop",
                                                  "message": {"role": "assistant", "content": answer}}]})  # fmt: skip

            def _send(self, code: int, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
