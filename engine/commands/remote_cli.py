"""A member's own command line against a shared studio (issue 46 item 6): ``studio --server URL COMMAND`` (or
``STUDIO_SERVER``), with the personal token made on the page in ``STUDIO_TOKEN``.

Light: stdlib only (urllib). The commands a member has on a shared studio, over its HTTP API (``studio.member_api``),
acting for the token's account under the page's rules:

- ``train SPEC [--name N] [--detach]``: submit a spec or a LLaMA-Factory training YAML (the file's text; the server
  reads the models and datasets it names on its side) and follow its log to the end (exit 0 completed, 1 failed or
  stopped); ``queue add SPEC [--name N]``: submit and return
- ``runs list``, ``runs show ID``, ``runs logs ID [--follow]``, ``runs stop ID``
- ``runs fetch ID [--out DIR]``: the files of the run's output folder (its adapter or model, configs, logs) into DIR
  (default ``./ID``)

The token goes only in the ``Authorization`` header, never on the command line (where ``ps`` shows it). HTTP or
HTTPS: the URL says which (behind a TLS proxy, give the ``https://`` address).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

COMMANDS = ("train", "queue", "runs")
ENDED = ("completed", "failed", "stopped")


class RemoteError(Exception):
    """What the shared studio answered (or why it could not be reached), in one line."""


class Client:
    def __init__(self, server: str, token: str, timeout: float = 60.0):
        self.base = server.rstrip("/") + "/api/v1/"
        self.token, self.timeout = token, timeout

    def _open(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            return urllib.request.urlopen(request, timeout=self.timeout)  # noqa: S310 - the URL the person named
        except urllib.error.HTTPError as exc:
            try:
                said = json.loads(exc.read().decode("utf-8")).get("error")
            except (ValueError, AttributeError):
                said = None
            raise RemoteError(said or f"the studio answered {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RemoteError(f"cannot reach the studio at {self.base[: -len('api/v1/')]}: {reason}") from None

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        with self._open(method, path, body) as answer:
            return json.loads(answer.read().decode("utf-8"))

    def download(self, path: str, target: Path) -> int:
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        size = 0
        with self._open("GET", path) as answer, open(part, "wb") as out:
            while chunk := answer.read(1 << 20):
                out.write(chunk)
                size += len(chunk)
        part.replace(target)
        return size


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="studio --server URL", description="your runs on a shared studio")
    sub = p.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="submit a spec or LLaMA-Factory YAML and follow it to the end")
    tr.add_argument("spec")
    tr.add_argument("--name")
    tr.add_argument("--detach", action="store_true", help="submit and return at once")
    q = sub.add_parser("queue").add_subparsers(dest="action", required=True)
    qa = q.add_parser("add", help="submit a spec or LLaMA-Factory YAML and return")
    qa.add_argument("spec")
    qa.add_argument("--name")
    r = sub.add_parser("runs").add_subparsers(dest="action", required=True)
    r.add_parser("list", help="your runs")
    for action, text in (("show", "a run's state, step and loss"), ("stop", "stop a run")):
        r.add_parser(action, help=text).add_argument("id")
    lg = r.add_parser("logs", help="a run's log")
    lg.add_argument("id")
    lg.add_argument("--follow", action="store_true", help="keep printing until the run ends")
    fe = r.add_parser("fetch", help="download a run's output folder")
    fe.add_argument("id")
    fe.add_argument("--out", help="where (default ./ID)")
    return p


def _follow(client: Client, run_id: str, interval: float = 1.0) -> str:
    """Print the run's log as it grows until it ends; its end state."""
    offset = 0
    while True:
        state = client.call("GET", f"runs/{run_id}")["status"]  # read first: the log below is then complete
        chunk = client.call("GET", f"runs/{run_id}/log?offset={offset}")
        if chunk["text"]:
            sys.stdout.write(chunk["text"])
            sys.stdout.flush()
        offset = chunk["offset"]
        if state in ENDED and not chunk["text"]:
            return state
        if not chunk["text"]:
            time.sleep(interval)


def _submit(client: Client, spec: str, name: str | None) -> dict:
    try:
        text = Path(spec).read_text(encoding="utf-8")
    except OSError as exc:
        raise RemoteError(f"{spec}: {exc.strerror or exc}") from None
    return client.call("POST", "runs", {"spec": text, "name": name})


def _run(args, client: Client) -> int:
    if args.command in ("train", "queue"):
        made = _submit(client, args.spec, args.name)
        print(f"{made['id']}: {made['status']}", flush=True)
        if args.command == "queue" or args.detach:
            return 0
        end = _follow(client, made["id"])
        print(f"{made['id']}: {end}")
        return 0 if end == "completed" else 1
    if args.action == "list":
        rows = client.call("GET", "runs")["runs"]
        for r in rows:
            print(f"{r['id']}  {r['status']:<9}  {r['name']}")
        if not rows:
            print("no runs of yours")
    elif args.action == "show":
        for key, value in client.call("GET", f"runs/{urllib.parse.quote(args.id)}").items():
            print(f"{key:8} {value if value is not None else '-'}")
    elif args.action == "stop":
        client.call("POST", f"runs/{urllib.parse.quote(args.id)}/stop")
        print(f"stopping {args.id}")
    elif args.action == "logs":
        if args.follow:
            return 0 if _follow(client, args.id) == "completed" else 1
        sys.stdout.write(client.call("GET", f"runs/{urllib.parse.quote(args.id)}/log")["text"])
    elif args.action == "fetch":
        out = Path(args.out or args.id).expanduser()
        files = client.call("GET", f"runs/{urllib.parse.quote(args.id)}/files")["files"]
        total = 0
        for f in files:
            rel = Path(f["path"])
            if rel.is_absolute() or ".." in rel.parts:
                raise RemoteError(f"the studio named a file outside the run's folder: {f['path']}")
            total += client.download(
                f"runs/{urllib.parse.quote(args.id)}/files/{urllib.parse.quote(f['path'])}", out / rel
            )
        print(f"fetched {len(files)} files ({total} bytes) of {args.id} into {out}")
    return 0


def cli(server: str, argv: list[str]) -> int:
    """``studio --server URL COMMAND ...``: 0 done, 1 the run failed or the studio refused, 2 bad use."""
    token = os.environ.get("STUDIO_TOKEN", "").strip()
    if not token:
        print(
            "studio --server: set STUDIO_TOKEN to a token made in the studio's Runs tab (Command-line tokens)",
            file=sys.stderr,
        )
        return 2
    if not argv or argv[0] not in COMMANDS:
        print(f"studio --server: only {', '.join(COMMANDS)} go to a shared studio", file=sys.stderr)
        return 2
    args = _parser().parse_args(argv)
    try:
        return _run(args, Client(server, token))
    except RemoteError as exc:
        print(f"studio --server: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
