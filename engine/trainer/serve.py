"""OpenAI-compatible HTTP server: ``python -m engine.trainer.serve SOURCE --port P --events FILE [--host H]
[--api-key-env NAME]``.

Heavy: torch, transformers, peft (through ``engine.trainer.serve_model``, which holds the model and a request's
checks). Started as a registry command run by engine.export.serve_jobs (which checks the source, host, port and key
first), stopped by SIGTERM like every run. Serves one model: a model folder, or a LoRA run / adapter folder loaded on
its base with peft, unmerged (the adapter's own tokenizer and chat template first).

Endpoints (the subset of OpenAI's API that chat clients use): ``GET /v1/models``, ``POST /v1/chat/completions``
(messages through the model's chat template) and ``POST /v1/completions`` (a prompt string), each with ``stream``
(server-sent events ``data: {chunk}`` ending ``data: [DONE]``), ``max_tokens``, ``temperature`` (0: greedy),
``top_p``, ``stop`` and ``seed``. A bad request gets a 4xx JSON error in OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``) and the server goes on.

On FastAPI and uvicorn, the stack the page ships. The event loop only reads and answers: a request's body is bounded
(``STUDIO_SERVE_MAX_BODY_MB``, from ``Content-Length`` and while reading), its JSON parsed and checked (depth, message
count, the prompt's tokens against the model's context) and its tokens generated in worker threads. One generation
runs at a time (one model); others wait their turn on a semaphore, up to ``serve_rules.MAX_WAITING``, so many small
clients are all answered. A client that goes away ends its generation before the next token (a watcher of the
connection's disconnect, and the stream's close, set the request's ``Cancel``; the log says so in one line), as does
SIGTERM for every generation. The listening socket is bound before the model answers, with a real backlog. With
``--api-key-env NAME`` every request needs ``Authorization: Bearer`` and the value of NAME (``serve_rules``).

A stopped server ends by its SIGTERM, like a server stopped while its model loads: the registry records it 'stopped'
every time (uvicorn raises the signal again once it has shut down; an exit 0 read as 'completed' before).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import json
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from engine.core import events as ev
from engine.export import serve_rules as rules
from engine.export.messages import ExportError
from engine.trainer import lean
from engine.trainer.serve_model import (
    BadRequest,
    Cancel,
    Model,
    chat_prompt,
    completion_prompt,
    options,
    run_generation,
)

GONE = "the client went away"
STOPPING = "the server is stopping"


@dataclass(frozen=True)
class Limits:
    max_body: int
    max_messages: int
    max_waiting: int = rules.MAX_WAITING

    @classmethod
    def from_env(cls) -> Limits:
        return cls(rules.max_body_bytes(), rules.max_messages())


def error_body(exc: BadRequest) -> dict:
    kind = "invalid_request_error" if exc.status < 500 else "server_error"
    return {"error": {"message": str(exc), "type": kind, "param": exc.param, "code": exc.code}}


def too_deep(obj, limit: int) -> bool:
    """Whether JSON arrays / objects nest deeper than ``limit`` (without recursion)."""
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def parse_body(raw: bytes) -> dict:
    deep = BadRequest(f"the request body nests JSON deeper than {rules.MAX_JSON_DEPTH} levels")
    try:
        body = json.loads(raw or b"null")
    except RecursionError:
        raise deep from None
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the request body is not valid JSON") from None
    if too_deep(body, rules.MAX_JSON_DEPTH):
        raise deep
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


class Service:
    """The served model behind the HTTP routes: keys, bodies, turns and the generation threads."""

    def __init__(self, model: Model, key: str | None, limits: Limits):
        self.model, self.key, self.limits = model, key, limits
        self.turn = asyncio.Semaphore(1)  # one generation at a time: one model
        self.waiting = 0

    def check_key(self, headers) -> None:
        if self.key is None:
            return
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise BadRequest("You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'.", status=401)
        if not hmac.compare_digest(given.strip().encode(), self.key.encode()):
            raise BadRequest("Incorrect API key provided.", status=401, code="invalid_api_key")

    async def read_body(self, request) -> bytes:
        limit = self.limits.max_body
        too_big = BadRequest(
            f"the request body is larger than {limit} bytes ({rules.ENV_MAX_BODY_MB} sets the limit)",
            status=413,
            code="request_too_large",
        )
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                raise BadRequest("Content-Length must be a number of bytes")
            if int(declared) > limit:
                raise too_big
        buf = bytearray()
        async for chunk in request.stream():
            buf += chunk
            if len(buf) > limit:
                raise too_big
        return bytes(buf)

    def prepare(self, raw: bytes, chat: bool) -> tuple[list[int], dict]:
        """(prompt ids, options) of a request body; BadRequest naming what is wrong. Blocking: a worker thread's."""
        body = parse_body(raw)
        if body.get("model") not in (None, self.model.name):
            raise BadRequest(
                f"model {body.get('model')!r} is not served here (this server has {self.model.name!r})",
                "model",
                404,
                "model_not_found",
            )
        opts = options(body)
        if chat:
            return chat_prompt(self.model, body, opts, self.limits.max_messages), opts
        return completion_prompt(self.model, body, opts), opts

    async def take_turn(self) -> None:
        if self.waiting >= self.limits.max_waiting:
            raise BadRequest(
                f"the server is busy: {self.waiting} requests are waiting; try again later",
                status=503,
                code="server_busy",
            )
        self.waiting += 1
        try:
            await self.turn.acquire()
        finally:
            self.waiting -= 1
        if Cancel.stopping:
            self.turn.release()
            raise BadRequest(STOPPING, status=503, code="server_stopping")

    def start(self, rid: str, ids: list[int], opts: dict, cancel: Cancel):
        """Generate in a thread of its own (the turn already taken; the thread gives it back when it ends); an async
        iterator of run_generation's items. The thread runs to its end even if nobody reads: the cancel ends it."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        def put(item) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the server is gone
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            end = None
            how = "greedy" if opts["temperature"] == 0 else f"temperature {opts['temperature']:g}"
            print(
                f"{rid}: generating up to {opts['max_tokens']} tokens ({how}) after {len(ids)} prompt tokens",
                flush=True,
            )
            try:
                for item in run_generation(self.model, ids, opts, cancel):
                    end = item[1] or end
                    put(item)
            except Exception as exc:  # noqa: BLE001 - a failure of one request is answered, the server goes on
                put(exc)
            finally:
                if end and end[0] is None:
                    done, most = end[1], opts["max_tokens"]
                    print(f"{rid}: generation stopped after {done} of {most} tokens: {cancel.reason()}", flush=True)
                put(None)
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self.turn.release)

        try:
            threading.Thread(target=work, name=rid, daemon=True).start()
        except BaseException:
            self.turn.release()
            raise

        async def items():
            try:
                while (item := await queue.get()) is not None:
                    if isinstance(item, Exception):
                        raise item
                    yield item
            finally:  # the stream closed before its end (the client went away): the thread stops at the next token
                cancel.set(GONE)

        return items()


async def watch_disconnect(request, cancel: Cancel) -> None:
    """Set ``cancel`` when the client goes away. uvicorn answers ``receive`` with ``http.disconnect`` once the
    connection is lost (or the response is complete: then the generation has ended already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            cancel.set(GONE)
            return


def build_app(service: Service, on_stop=None) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        if on_stop:
            on_stop()

    app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(BadRequest)
    async def bad_request(request, exc: BadRequest):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(error_body(exc), status_code=exc.status, headers=headers)

    @app.exception_handler(HTTPException)
    async def http_error(request, exc: HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        what = {
            404: f"no such endpoint: {request.method} {request.url.path}",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, exc.detail)
        return JSONResponse(error_body(BadRequest(what, status=exc.status_code, code=code)), exc.status_code)

    @app.get("/v1/models")
    async def models(request: Request):
        service.check_key(request.headers)
        m = service.model
        card = {"id": m.name, "object": "model", "created": m.created, "owned_by": "studio"}
        return {"object": "list", "data": [card]}

    async def complete(request: Request, chat: bool):
        service.check_key(request.headers)
        raw = await service.read_body(request)
        cancel = Cancel()
        watcher = asyncio.create_task(watch_disconnect(request, cancel))
        try:
            ids, opts = await run_in_threadpool(service.prepare, raw, chat)
            await service.take_turn()
        except BaseException:
            watcher.cancel()
            raise
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        items = service.start(rid, ids, opts, cancel)
        base = {"id": rid, "created": int(time.time()), "model": service.model.name}
        obj = "chat.completion" if chat else "text_completion"
        if opts["stream"]:
            usage = len(ids) if opts["include_usage"] else None  # the prompt's tokens, for the usage chunk
            chunks = stream(items, base, obj + (".chunk" if chat else ""), chat, watcher, cancel, usage)
            return StreamingResponse(chunks, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            text, (reason, count) = "", ("stop", 0)
            async for delta, end in items:
                text += delta
                if end:
                    reason, count = end
        finally:
            watcher.cancel()
        if reason is None:  # ended early: the client is gone (nothing is sent), or the server is stopping
            raise BadRequest(Cancel.stopping or cancel.reason() or STOPPING, status=503, code="server_stopping")
        choice = {"index": 0, "finish_reason": reason}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        usage = {"prompt_tokens": len(ids), "completion_tokens": count, "total_tokens": len(ids) + count}
        return {**base, "object": obj, "choices": [choice], "usage": usage}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await complete(request, True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await complete(request, False)

    return app


async def stream(items, base: dict, chunk_obj: str, chat: bool, watcher, cancel: Cancel, prompt: int | None = None):
    """The server-sent events of a streamed answer: a chunk per text delta, the finish reason, with ``prompt`` (the
    prompt's tokens: ``stream_options.include_usage``) a chunk with the usage and no choices, then ``[DONE]``."""

    def event(delta: str, reason: str | None, first: bool = False) -> bytes:
        if chat:
            d = {"role": "assistant", "content": delta} if first else ({"content": delta} if delta else {})
            choice = {"index": 0, "delta": d, "finish_reason": reason}
        else:
            choice = {"index": 0, "text": delta, "finish_reason": reason}
        return (
            f"data: {json.dumps({**base, 'object': chunk_obj, 'choices': [choice]}, ensure_ascii=False)}\n\n".encode()
        )

    try:
        if chat:
            yield event("", None, first=True)
        async for delta, end in items:
            if delta:
                yield event(delta, None)
            if end and end[0] is None:
                return  # ended early: nobody to tell, or the server is stopping
            if end:
                yield event("", end[0])
                if prompt is not None:
                    total = {"prompt_tokens": prompt, "completion_tokens": end[1], "total_tokens": prompt + end[1]}
                    chunk = {**base, "object": chunk_obj, "choices": [], "usage": total}
                    yield f"data: {json.dumps(chunk)}\n\n".encode()
        yield b"data: [DONE]\n\n"
    except Exception as exc:  # noqa: BLE001 - the stream has begun: the error goes as its last event
        failure = BadRequest(f"{type(exc).__name__}: {exc}", status=500, code="server_error")
        yield f"data: {json.dumps(error_body(failure), ensure_ascii=False)}\n\n".encode()
    finally:  # nothing awaited here: a stream cancelled because its client left is cancelled again at each await
        cancel.set(GONE)  # after its end, a no-op; before it, the thread stops at its next token
        watcher.cancel()


# ----------------------------------------------------------------------------------------------- entry
def arg_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine.trainer.serve")
    ap.add_argument("source")
    ap.add_argument("--host", default=rules.HOST)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--api-key-env", default=None, metavar="NAME")
    ap.add_argument("--events", required=True)
    return ap


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            Cancel.stopping = STOPPING  # every generation ends before its next token
            super().handle_exit(sig, frame)

    args = arg_parser().parse_args(argv)
    try:
        rules.check_port(args.port)
        key = rules.check_key(args.host, args.api_key_env)
        limits = Limits.from_env()
    except ExportError as exc:
        print(f"serve: {exc}", file=sys.stderr, flush=True)
        return 2
    events = Path(args.events)
    model = Model(args.source)
    sock = rules.listen(args.host, args.port)
    url = rules.url(args.host, sock.getsockname()[1])
    app = build_app(Service(model, key, limits), lambda: ev.append_event(events, "serve_stopped", None, url=url))
    server = Server(uvicorn.Config(app, log_level="info", timeout_graceful_shutdown=5))
    ev.append_event(events, "serve_ready", None, url=url, model=model.name, adapter=model.adapter, host=args.host)
    print(f"serving {model.name} at {url} (listening on {args.host})", flush=True)
    server.run(sockets=[sock])  # a SIGTERM is raised again once it has shut down: the process ends by it
    return 0


if __name__ == "__main__":
    lean.own_process()  # what this job does not use stays unimported (engine.trainer.lean)
    sys.exit(main())
