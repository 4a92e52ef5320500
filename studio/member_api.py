"""The shared studio's HTTP API for a member's own command line (issue 46 item 6), under ``/api/v1/``.

A request carries ``Authorization: Bearer <token>`` (a personal token made on the page: ``engine.core.api_tokens``)
and acts for the token's account (``engine.core.accounts.acting_for``) under the page's rules: the same ownership
checks (another member's run id answers as unknown), what the page may run and send (``engine.core.page_trust``),
the member's quotas and secrets. Nothing else of the studio is reachable with a token, and a token reaches nothing
without team mode. JSON in and out; errors are ``{"error": one line}`` with 400 / 401 / 404. Routes:

- ``GET  runs``: the account's runs; ``POST runs`` ``{"spec": YAML text (ours or a LLaMA-Factory training YAML),
  "name": optional}``: submitted as from the page, ``{"id", "status"}``
- ``GET  runs/ID``: the run, its last logged step and loss; ``POST runs/ID/stop``
- ``GET  runs/ID/log?offset=N`` and ``runs/ID/events?offset=N``: what was written after byte N, and the new offset
- ``GET  runs/ID/files``: the files of its output folder; ``GET runs/ID/files/PATH``: one of them

Light: FastAPI (gradio's), the engine's runs; no torch. Installed as an ASGI middleware in front of the login guard
(``studio.app.launch_kwargs``): ``/api/v1/`` paths are answered here, everything else passes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, Request  # at module level: the routes' annotations are resolved from here
from fastapi.responses import FileResponse, JSONResponse

from engine.core import accounts, api_tokens, events

PREFIX = "/api/v1/"
LOG_CHUNK = 256 << 10  # bytes of log or events per answer at most: a client asks again from the new offset
MAX_SPEC = 1 << 20  # characters of a submitted spec


class _Refused(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status, self.text = status, text


def _owner(authorization: str | None) -> str:
    scheme, _, token = str(authorization or "").partition(" ")
    owner = api_tokens.owner_of(token.strip()) if scheme.lower() == "bearer" and accounts.team_mode() else None
    if owner is None:
        raise _Refused(401, "no valid token: make one in the Runs tab (Command-line tokens), set it as STUDIO_TOKEN")
    return owner


def _run(run_id: str):
    from engine.runs import records as records_mod
    from engine.runs import registry as runs

    try:
        return runs.get(run_id)
    except records_mod.RunsError as exc:  # another member's run is an unknown one
        raise _Refused(404, str(exc)) from None


def _summary(rec) -> dict[str, Any]:
    return {
        "id": rec.id,
        "name": rec.name,
        "status": rec.status,
        "kind": rec.kind,
        "created": rec.created,
        "started": rec.started,
        "ended": rec.ended,
        "reason": str(rec.reason or ""),
        "tags": list(rec.tags or []),
    }


def _submit(body: dict) -> dict:
    import yaml

    from engine.lf import compat as lf_compat
    from engine.runs import records as records_mod
    from engine.runs import registry as runs
    from engine.spec.schema import SpecError

    text = body.get("spec") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise _Refused(400, 'spec: send {"spec": "<the YAML text>"}')
    if len(text) > MAX_SPEC:
        raise _Refused(400, f"spec: {len(text)} characters, more than a spec holds ({MAX_SPEC})")
    try:
        data = yaml.safe_load(text)
        spec = lf_compat.lf_text_to_spec(text) if lf_compat.is_lf_args(data) else data
        run_id = runs.submit(spec, name=(body.get("name") or None))
    except SpecError as exc:
        raise _Refused(400, "; ".join(f"{p}: {m}" for p, m in exc.problems)) from None
    except (yaml.YAMLError, records_mod.RunsError, ValueError) as exc:
        raise _Refused(400, str(exc).replace("\n", " ")) from None
    return {"id": run_id, "status": runs.get(run_id).status}


def _tail(path: Path, offset: int) -> tuple[bytes, int]:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, offset))
            data = fh.read(LOG_CHUNK)
    except FileNotFoundError:
        return b"", offset
    return data, max(0, offset) + len(data)


def _output_file(rec, rel: str) -> Path:
    root = Path(rec.output_dir).resolve()
    path = (root / rel).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise _Refused(404, f"{rel}: no such file in run {rec.id}'s output folder")
    return path


def build_api():
    """The FastAPI app of these routes (mounted by ``MemberAPI``)."""
    api = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @api.exception_handler(_Refused)
    async def _refused(_request: Request, exc: _Refused):
        return JSONResponse({"error": exc.text}, status_code=exc.status)

    from engine.runs.records import RunsError

    @api.exception_handler(RunsError)
    async def _runs_refused(_request: Request, exc: RunsError):  # e.g. stopping a run shared read-only
        return JSONResponse({"error": str(exc).replace("\n", " ")}, status_code=400)

    def acting(authorization: str | None):
        return accounts.acting_for(_owner(authorization))

    @api.get(PREFIX + "runs")
    def list_runs(authorization: str | None = Header(default=None)):
        from engine.runs import registry as runs

        with acting(authorization):
            return {"runs": [_summary(r) for r in runs.list_runs()]}

    @api.post(PREFIX + "runs")
    async def submit(request: Request, authorization: str | None = Header(default=None)):
        owner = _owner(authorization)
        try:
            body = await request.json()
        except ValueError:
            raise _Refused(400, 'send a JSON body: {"spec": "<the YAML text>", "name": "..."}') from None
        from starlette.concurrency import run_in_threadpool

        def work():
            with accounts.acting_for(owner):
                return _submit(body)

        return await run_in_threadpool(work)

    @api.get(PREFIX + "runs/{run_id}")
    def show(run_id: str, authorization: str | None = Header(default=None)):
        with acting(authorization):
            rec = _run(run_id)
            logged = [e for e in events.read_jsonl(rec.events_path)[0] if e.get("type") == "log"]
            last = logged[-1] if logged else {}
            return {**_summary(rec), "step": last.get("step"), "loss": (last.get("payload") or {}).get("loss")}

    @api.post(PREFIX + "runs/{run_id}/stop")
    def stop(run_id: str, authorization: str | None = Header(default=None)):
        from engine.runs import registry as runs

        with acting(authorization):
            rec = _run(run_id)
            runs.stop(rec.id, wait=False)
            return {"id": rec.id, "stopping": True}

    @api.get(PREFIX + "runs/{run_id}/log")
    def log(run_id: str, offset: int = 0, authorization: str | None = Header(default=None)):
        with acting(authorization):
            data, new = _tail(_run(run_id).log_path, offset)
            return {"text": data.decode("utf-8", errors="replace"), "offset": new}

    @api.get(PREFIX + "runs/{run_id}/events")
    def run_events(run_id: str, offset: int = 0, authorization: str | None = Header(default=None)):
        with acting(authorization):
            found, new = events.read_jsonl(_run(run_id).events_path, max(0, offset))
            return {"events": found, "offset": new}

    @api.get(PREFIX + "runs/{run_id}/files")
    def files(run_id: str, authorization: str | None = Header(default=None)):
        with acting(authorization):
            rec = _run(run_id)
            root = Path(rec.output_dir).resolve()
            found = [p for p in sorted(root.rglob("*")) if p.is_file() and p.resolve().is_relative_to(root)]
            return {"files": [{"path": str(p.relative_to(root)), "bytes": p.stat().st_size} for p in found]}

    @api.get(PREFIX + "runs/{run_id}/files/{rel:path}")
    def one_file(run_id: str, rel: str, authorization: str | None = Header(default=None)):
        with acting(authorization):
            return FileResponse(_output_file(_run(run_id), rel))

    return api


class MemberAPI:
    """ASGI middleware: ``/api/v1/`` answered by ``build_api``'s routes (a token, not the page's login), the rest
    passed on to the app behind it (the login guard, then gradio)."""

    def __init__(self, app):
        self.app = app
        self.api = build_api()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and str(scope.get("path", "")).startswith(PREFIX):
            return await self.api(scope, receive, send)
        return await self.app(scope, receive, send)
