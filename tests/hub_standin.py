"""A local stand-in for the Hugging Face hub's file API, served on 127.0.0.1 for the real ``huggingface_hub`` client
(pointed at it with ``HF_ENDPOINT``). It answers what ``hf_hub_download``, ``HfApi.model_info`` /
``dataset_info`` and ``get_hf_file_metadata`` ask:

- ``GET /api/{models|datasets}/{repo}[/revision/{revision}]``: the repo's info, with ``sha`` and, per file, its size,
  git blob id and (``*.safetensors`` / ``*.bin`` / ``*.parquet``, the hub's LFS files) ``lfs.sha256``;
- ``GET /api/{models|datasets}/{repo}/tree/{revision}``: its files and folders, recursively, in one page (what
  ``snapshot_download`` lists);
- ``HEAD`` and ``GET`` of ``/[datasets/]{repo}/resolve/{revision}/{file}`` with the hub's headers (``X-Repo-Commit``,
  ``ETag``, ``Content-Length``) and byte ranges (``Range: bytes=N-``, answered 206 with ``Content-Range``);
- ``GET /api/models?search=...&limit=...&sort=...&expand=...`` (``HfApi.list_models``): the models whose id holds
  ``search`` (case-insensitive), most downloaded first with ``sort=downloads``; each as the hub lists it: ``_id`` and
  ``id`` and, without ``expand``, its default fields (likes, downloads, tags, private, ...), with ``expand`` just the
  fields asked for (``gated``: false / "manual" / "auto"; ``cardData.license``; ``safetensors``: parameters by dtype
  and their total, read from the repo's safetensors headers as the hub does), ``full`` adding sha, siblings and
  gating. ``meta`` gives a repo's downloads, likes, licence, tags, ``gated`` ("auto") or ``safetensors`` (a large
  model's counts without its bytes). ``model_info(..., expand=...)`` answers the same fields;
- the hub's error codes (``X-Error-Code: RepoNotFound`` / ``GatedRepo`` / ``EntryNotFound`` / ``RevisionNotFound``)
  so the client raises its own exceptions. A gated repo answers 401 without a token and 403 with a token that is not
  in ``tokens`` (when ``tokens`` is set; any token passes otherwise).

Uploads, as ``HfApi.create_repo`` / ``upload_file`` / ``create_commit`` make them: ``POST /api/repos/create``
(recording the repo's visibility in ``private``), ``POST /api/models/{repo}/preupload/{revision}`` (every file
"regular": its bytes travel inside the commit) and ``POST /api/models/{repo}/commit/{revision}`` (the NDJSON commit;
its files land in ``repos``). Uploads need an ``Authorization`` header (401 without; with ``tokens`` set, one of them);
the tokens seen are kept in ``auth_seen``.

Faults a test can switch on: ``throttle`` (bytes per second of every body), ``stall`` (file names whose body stops
after the file's first ``stall_after`` bytes until the server shuts down), ``corrupt`` (file names served with other
bytes than the ones their metadata and ETag describe), ``sizes`` (file sizes the repo info claims instead),
``search_delay`` (seconds the search waits before it answers). Requests are recorded (method, path, Range header)
so a test can see what was fetched. Nothing inside the project is mocked: the project talks to this server through
the real client.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/(?:(?P<type>datasets)/)?(?P<repo>[^/]+/[^/]+|[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_TREE = re.compile(
    r"^/api/(?P<type>models|datasets)/(?P<repo>[^/]+/[^/]+|[^/]+?)/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$"
)
_LIST = re.compile(r"^/api/models/?$")
_INFO = re.compile(r"^/api/(?P<type>models|datasets)/(?P<repo>[^/]+/[^/]+|[^/]+?)(?:/revision/(?P<rev>[^/]+))?$")
LFS_SUFFIXES = (".safetensors", ".bin", ".parquet", ".pt", ".gguf")


def git_blob_id(data: bytes) -> str:
    """The git object id of a file's content: what the hub reports as ``blobId`` (the ETag of a non-LFS file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _expand(query: dict[str, list[str]]) -> list[str]:
    return [*query.get("expand", []), *query.get("expand[]", [])]


def safetensors_counts(files: dict[str, bytes]) -> dict | None:
    """The parameters by dtype and their total, from the safetensors headers of a repo's files (as the hub reads
    them); None without safetensors files."""
    counts: dict[str, int] = {}
    for name, data in files.items():
        if not name.endswith(".safetensors") or len(data) < 8:
            continue
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + n])
        for key, tensor in header.items():
            if key != "__metadata__":
                size = 1
                for dim in tensor["shape"]:
                    size *= dim
                counts[tensor["dtype"]] = counts.get(tensor["dtype"], 0) + size
    return {"parameters": counts, "total": sum(counts.values())} if counts else None


class HubStandin:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.datasets: dict[str, dict[str, bytes]] = {}
        self.gated: set[str] = set()
        self.tokens: set[str] = set()  # when set, a gated repo's files need ``Authorization: Bearer <one of them>``
        self.throttle: int | None = None  # bytes per second of a body
        self.stall: set[str] = set()  # file names whose body stalls after ``stall_after`` bytes
        self.stall_after = 1024
        self.corrupt: set[str] = set()  # file names served with bytes that do not match their checksum
        self.sizes: dict[str, int] = {}  # file name -> the size the repo info claims (a repo too large for the disk)
        self.meta: dict[str, dict] = {}  # repo -> what the search lists: downloads, likes, license, tags, gated, ...
        self.search_delay = 0.0  # seconds the search waits before it answers (a hub that answers slowly)
        self.requests: list[tuple[str, str]] = []
        self.private: dict[str, bool] = {}  # repo -> private, as created
        self.commits: list[tuple[str, list[str]]] = []  # (repo, paths) of every commit
        self.auth_seen: set[str] = set()
        self.ranges: list[tuple[str, str]] = []  # (path, Range header) of every ranged GET
        self._closing = threading.Event()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _auth(self) -> str | None:
                value = self.headers.get("Authorization") or ""
                return value.split(" ", 1)[1] if value.lower().startswith("bearer ") else (value or None)

            def _answer(self, body: bool) -> None:
                standin.requests.append((self.command, self.path))
                path = self.path.split("?", 1)[0]
                if _LIST.match(path):
                    return self._list(urllib.parse.parse_qs(self.path.partition("?")[2]), body)
                tree = _TREE.match(path)
                if tree:
                    return self._tree(tree.group("type"), tree.group("repo"), tree.group("rev"), body)
                info = _INFO.match(path)
                if info:
                    return self._info(info.group("type"), info.group("repo"), info.group("rev") or "main", body)
                m = _RESOLVE.match(path)
                if not m:
                    return self._error(404, "EntryNotFound", "no such route", body)
                table = standin.datasets if m.group("type") == "datasets" else standin.repos
                repo, rev, name = m.group("repo"), m.group("rev"), m.group("file")
                if repo not in table:
                    return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}", body)
                if repo in standin.gated:
                    token = self._auth()
                    if token is None:
                        return self._error(401, "GatedRepo", f"Access to model {repo} is restricted.", body)
                    if standin.tokens and token not in standin.tokens:
                        text = f"Access to model {repo} is restricted and you are not in the authorized list."
                        return self._error(403, "GatedRepo", text, body)
                if rev not in ("main", COMMIT):
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", body)
                files = table[repo]
                if name not in files:
                    return self._error(404, "EntryNotFound", f"{name} does not exist", body)
                data = files[name]
                etag = hashlib.sha256(data).hexdigest()
                if name in standin.corrupt:  # same length, other bytes: only a checksum tells
                    data = bytes(b ^ 0xFF for b in data)
                start, end = 0, len(data) - 1
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    standin.ranges.append((path, rng))
                    a, _, b = rng[6:].partition("-")
                    start = int(a or 0)
                    end = int(b) if b else end
                chunk = data[start : end + 1]
                self.send_response(206 if rng else 200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{etag}"')
                self.send_header("Content-Length", str(len(chunk)))
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.end_headers()
                if body:
                    self._send_body(name, chunk, start)

            def _send_body(self, name: str, chunk: bytes, start: int) -> None:
                try:
                    if name in standin.stall:  # the file's first ``stall_after`` bytes, then nothing, on every try
                        self.wfile.write(chunk[: max(0, standin.stall_after - start)])
                        self.wfile.flush()
                        standin._closing.wait()  # a server that stops sending: the client's timeout must fire
                        return
                    if not standin.throttle:
                        self.wfile.write(chunk)
                        return
                    step = max(1, standin.throttle // 20)
                    for i in range(0, len(chunk), step):
                        if standin._closing.is_set():
                            return
                        self.wfile.write(chunk[i : i + step])
                        self.wfile.flush()
                        time.sleep(step / standin.throttle)
                except (BrokenPipeError, ConnectionResetError):  # the client went away (cancelled)
                    self.close_connection = True

            def _info(self, kind: str, repo: str, rev: str, body: bool) -> None:
                table = standin.datasets if kind == "datasets" else standin.repos
                if repo not in table:
                    return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}", body)
                if rev not in ("main", COMMIT):
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", body)
                siblings = []
                for name, data in sorted(table[repo].items()):
                    size = standin.sizes.get(name, len(data))
                    entry = {"rfilename": name, "size": size, "blobId": git_blob_id(data)}
                    if name.endswith(LFS_SUFFIXES):
                        entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": size}
                        entry["lfs"]["pointerSize"] = 134
                    siblings.append(entry)
                gated = "manual" if repo in standin.gated else False
                info = {"id": repo, "_id": repo, "sha": COMMIT, "private": False, "gated": gated}
                info["siblings"] = siblings
                expand = _expand(urllib.parse.parse_qs(self.path.partition("?")[2]))
                if expand and kind == "models":  # the hub answers just the fields asked for
                    info = standin.listing(repo, expand)
                self._send_json(200, info, body)

            def _list(self, query: dict[str, list[str]], body: bool) -> None:
                """``GET /api/models``: the search (``HfApi.list_models``), one page."""
                if standin.search_delay:
                    standin._closing.wait(standin.search_delay)
                search = (query.get("search") or [""])[0].lower()
                author = (query.get("author") or [""])[0]
                prefix = f"{author}/" if author else ""
                names = [r for r in standin.repos if search in r.lower() and r.startswith(prefix)]
                sort = (query.get("sort") or [""])[0]
                if sort in ("downloads", "likes"):
                    names.sort(key=lambda r: -int(standin.meta.get(r, {}).get(sort, 0)))
                limit = int((query.get("limit") or ["1000"])[0])
                full = (query.get("full") or [""])[0].lower() in ("true", "1")
                card = (query.get("cardData") or [""])[0].lower() in ("true", "1")
                expand = _expand(query)
                items = [standin.listing(r, expand, full=full, card=card) for r in names[:limit]]
                self._send_json(200, items, body)

            def _tree(self, kind: str, repo: str, rev: str, body: bool) -> None:
                """The repo's files, recursively, in one page (what ``snapshot_download`` lists)."""
                table = standin.datasets if kind == "datasets" else standin.repos
                if repo not in table:
                    return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}", body)
                if rev not in ("main", COMMIT):
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", body)
                entries, folders = [], set()
                for name, data in sorted(table[repo].items()):
                    parts = name.split("/")
                    folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
                    entry = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": name}
                    if name.endswith(LFS_SUFFIXES):
                        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                    entries.append(entry)
                entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in sorted(folders)]
                self._send_json(200, entries, body)

            def _error(self, status: int, code: str, text: str, body: bool) -> None:
                payload = json.dumps({"error": text}).encode()
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", text)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def _send_json(self, status: int, obj, body: bool = True) -> None:
                """``obj`` as JSON; headers only when ``body`` is false (a HEAD request)."""
                payload = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def do_POST(self) -> None:  # noqa: N802
                standin.requests.append((self.command, self.path))
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                token = self._auth()
                if token is None or (standin.tokens and token not in standin.tokens):
                    return self._error(401, "Unauthorized", "Invalid credentials in Authorization header", True)
                standin.auth_seen.add(token)
                path = self.path.split("?", 1)[0]
                if path == "/api/repos/create":
                    req = json.loads(data)
                    repo = f"{req['organization']}/{req['name']}" if req.get("organization") else req["name"]
                    if repo in standin.repos:
                        return self._error(409, "RepoExists", "You already created this model repo", True)
                    standin.repos[repo] = {}
                    standin.private[repo] = req.get("visibility", "private" if req.get("private") else "public") == (
                        "private"
                    )
                    return self._send_json(200, {"url": f"{standin.url}/{repo}", "name": repo})
                m = re.match(r"^/api/models/(?P<repo>.+)/(?P<op>preupload|commit)/(?P<rev>[^/]+)$", path)
                if not m or m.group("repo") not in standin.repos:
                    return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}", True)
                repo = m.group("repo")
                if m.group("op") == "preupload":
                    files = json.loads(data)["files"]
                    answer = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]
                    return self._send_json(200, {"files": answer, "commitOid": COMMIT})
                paths = []
                for line in data.splitlines():
                    item = json.loads(line) if line.strip() else {}
                    if item.get("key") == "file":
                        value = item["value"]
                        standin.repos[repo][value["path"]] = base64.b64decode(value["content"])
                        paths.append(value["path"])
                standin.commits.append((repo, paths))
                url = f"{standin.url}/{repo}/commit/{COMMIT}"
                return self._send_json(200, {"commitUrl": url, "commitOid": COMMIT, "success": True})

            def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def listing(self, repo: str, expand: list[str], *, full: bool = False, card: bool = False) -> dict:
        """One model as the hub's search lists it: ``_id``, ``id`` and the fields ``expand`` names, or the default
        fields (with ``full``, sha, siblings and gating too; with ``card``, the card's metadata)."""
        meta = self.meta.get(repo, {})
        files = self.repos.get(repo, {})
        licence = meta.get("license")
        tags = [*meta.get("tags", ["transformers"]), *([f"license:{licence}"] if licence else [])]
        if any(n.endswith(".safetensors") for n in files):
            tags.append("safetensors")
        fields = {
            "author": repo.split("/")[0] if "/" in repo else None,
            "downloads": int(meta.get("downloads", 0)),
            "likes": int(meta.get("likes", 0)),
            "private": False,
            "gated": meta.get("gated", "manual" if repo in self.gated else False),
            "tags": tags,
            "pipeline_tag": meta.get("pipeline_tag", "text-generation"),
            "library_name": "transformers",
            "createdAt": "2026-01-01T00:00:00.000Z",
            "lastModified": "2026-01-01T00:00:00.000Z",
            "sha": COMMIT,
            "trendingScore": 0,
            "cardData": {"license": licence, "library_name": "transformers"} if licence else {},
            "safetensors": meta.get("safetensors") or safetensors_counts(files),
            "siblings": [{"rfilename": n} for n in sorted(files)],
        }
        item = {"_id": repo, "id": repo}
        if expand:
            item.update({k: fields[k] for k in expand if k in fields and fields[k] is not None})
            return item
        keys = ["likes", "trendingScore", "private", "downloads", "tags", "pipeline_tag", "library_name", "createdAt"]
        if full:
            keys += ["author", "sha", "lastModified", "gated", "siblings"]
        item.update({k: fields[k] for k in keys})
        item["modelId"] = repo
        if card and fields["cardData"]:
            item["cardData"] = fields["cardData"]
        return item

    def add_folder(self, repo: str, folder: Path) -> None:
        """Serve every file of ``folder`` (a model folder) as ``repo``."""
        self.repos[repo] = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}

    def __enter__(self) -> HubStandin:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
