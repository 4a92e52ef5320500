"""A local stand-in for the Hugging Face hub's file API, served on 127.0.0.1 for the real ``huggingface_hub`` client
(pointed at it with ``HF_ENDPOINT``). It answers what ``hf_hub_download`` asks: ``HEAD`` and ``GET`` of
``/{repo}/resolve/{revision}/{file}`` with the hub's headers (``X-Repo-Commit``, ``ETag``, ``Content-Length``),
byte ranges, and the hub's error codes (``X-Error-Code: RepoNotFound`` / ``GatedRepo`` / ``EntryNotFound`` /
``RevisionNotFound``) so the client raises its own exceptions. Requests are recorded so a test can see what was
fetched. Nothing inside the project is mocked: the project talks to this server through the real client.
"""

from __future__ import annotations

import hashlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+|[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class HubStandin:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.gated: set[str] = set()
        self.requests: list[tuple[str, str]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _answer(self, body: bool) -> None:
                standin.requests.append((self.command, self.path))
                m = _RESOLVE.match(self.path.split("?", 1)[0])
                if not m:
                    return self._error(404, "EntryNotFound", "no such route", body)
                repo, rev, name = m.group("repo"), m.group("rev"), m.group("file")
                if repo not in standin.repos:
                    return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}", body)
                if repo in standin.gated and "authorization" not in {k.lower() for k in self.headers}:
                    return self._error(401, "GatedRepo", f"Access to model {repo} is restricted.", body)
                if rev not in ("main", COMMIT):
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", body)
                files = standin.repos[repo]
                if name not in files:
                    return self._error(404, "EntryNotFound", f"{name} does not exist", body)
                data = files[name]
                start, end = 0, len(data) - 1
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    a, _, b = rng[6:].partition("-")
                    start = int(a or 0)
                    end = int(b) if b else end
                chunk = data[start : end + 1]
                self.send_response(206 if rng else 200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("Content-Length", str(len(chunk)))
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.end_headers()
                if body:
                    self.wfile.write(chunk)

            def _error(self, status: int, code: str, text: str, body: bool) -> None:
                payload = f'{{"error": "{text}"}}'.encode()
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", text)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def add_folder(self, repo: str, folder: Path) -> None:
        """Serve every file of ``folder`` (a model folder) as ``repo``."""
        self.repos[repo] = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}

    def __enter__(self) -> HubStandin:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
