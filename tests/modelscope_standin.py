"""A local stand-in for ModelScope's repository API, served on 127.0.0.1 for the real ``modelscope`` client (pointed
at it with ``MODELSCOPE_ENDPOINT``). It answers what ``snapshot_download`` and ``HubApi.list_repo_files`` ask:

- ``GET /api/v1/models/{repo}/repo/files?Revision=&Recursive=``: a model repo's files (Path, Name, Size, Sha256,
  Type blob), wrapped as ModelScope wraps it (``{"Code": 200, "Data": {"Files": [...]}, "Success": true}``);
- ``GET /api/v1/datasets/{repo}/repo/tree?Revision=&Recursive=&PageNumber=&PageSize=``: a dataset repo's files, one
  page;
- ``GET /api/v1/{models|datasets}/{repo}/repo?Revision=&FilePath=``: a file's bytes;
- 404 with ModelScope's JSON error for anything else (an unknown repo, ``internalAccelerationInfo``).
Requests are recorded (method, path) so a test can see what was fetched. Nothing inside the project is mocked.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

_LIST = re.compile(r"^/api/v1/(?P<type>models|datasets)/(?P<repo>[^/]+/[^/]+)/repo/(?:files|tree)$")
_FILE = re.compile(r"^/api/v1/(?P<type>models|datasets)/(?P<repo>[^/]+/[^/]+)/repo$")


class ModelScopeStandin:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.datasets: dict[str, dict[str, bytes]] = {}
        self.requests: list[tuple[str, str]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _json(self, status: int, obj) -> None:
                self._send(status, json.dumps(obj).encode(), "application/json")

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                standin.requests.append((self.command, self.path))
                url = urlparse(self.path)
                query = parse_qs(url.query)
                listing, single = _LIST.match(url.path), _FILE.match(url.path)
                match = listing or single
                store = None
                if match:
                    store = (standin.repos if match["type"] == "models" else standin.datasets).get(match["repo"])
                if store is None:
                    self._json(404, {"Code": 10010205001, "Message": "repo not found", "Success": False})
                    return
                if listing:
                    files = [
                        {
                            "Path": path,
                            "Name": path.rsplit("/", 1)[-1],
                            "Size": len(data),
                            "Sha256": hashlib.sha256(data).hexdigest(),
                            "Type": "blob",
                            "Revision": "master",
                        }
                        for path, data in sorted(store.items())
                    ]
                    self._json(200, {"Code": 200, "Data": {"Files": files}, "Success": True})
                    return
                name = (query.get("FilePath") or [""])[0]
                if name not in store:
                    self._json(404, {"Code": 10010205002, "Message": "file not found", "Success": False})
                    return
                self._send(200, store[name], "application/octet-stream")

            do_HEAD = do_GET  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ModelScopeStandin:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
