"""OpenAI-compatible HTTP server: ``python -m engine.trainer.serve SOURCE --port P --events FILE [--host H]``.

Heavy: torch, transformers, peft. Started as a registry command run by engine.export.serve_jobs (which checks the
source and the port first), stopped by SIGTERM like every run. Serves one model: a model folder, or a LoRA run /
adapter folder loaded on its base with peft, unmerged (the adapter's own tokenizer and chat template first).

Endpoints (the subset of OpenAI's API that chat clients use): ``GET /v1/models``, ``POST /v1/chat/completions``
(messages through the model's chat template) and ``POST /v1/completions`` (a prompt string), each with ``stream``
(server-sent events ``data: {chunk}`` ending ``data: [DONE]``), ``max_tokens``, ``temperature`` (0: greedy),
``top_p``, ``stop`` and ``seed``. Requests are served on threads; generation holds one lock (one model), so
concurrent clients are answered in turn. A bad request gets a 4xx JSON error in OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``) and the server goes on.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from engine.core import events as ev
from engine.export import checks as xp
from engine.export import convert_plan as cp
from engine.trainer import lean

MAX_TOKENS_LIMIT = 4096


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param, self.status, self.code = param, status, code


class Model:
    """The served model, its tokenizer and one generation lock."""

    def __init__(self, source: str):
        folder = cp.is_model_folder(source)
        src = None if folder else xp.resolve_source(source)
        weights = str(source) if folder else (src.base if src.kind == "adapter" else src.weights_dir)
        lean.without_quantizers(lean.model_is_quantized(weights))  # only as `python -m` (own_process)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if folder:
            model_dir = adapter_dir = str(Path(source).expanduser().resolve())
            self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
            self.adapter = None
        else:
            if src.kind == "adapter":
                from peft import PeftModel

                base = AutoModelForCausalLM.from_pretrained(src.base, dtype=torch.float32)
                self.model = PeftModel.from_pretrained(base, src.weights_dir)  # unmerged: base + adapter
                self.adapter, model_dir, adapter_dir = src.weights_dir, src.base, src.weights_dir
            else:
                model_dir = adapter_dir = src.weights_dir
                self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
                self.adapter = None
        self.model.eval()
        tok_dir = cp.tokenizer_dir(adapter_dir, model_dir)
        self.tok = AutoTokenizer.from_pretrained(str(tok_dir))
        self.name = Path(str(source).rstrip("/")).name
        self.lock = threading.Lock()
        self.created = int(time.time())

    def generate(self, ids: list[int], opts: dict):
        """Yield new token ids, one at a time (greedy, or sampled with the request's temperature / top_p)."""
        import torch

        gen = torch.Generator().manual_seed(int(opts["seed"])) if opts.get("seed") is not None else None
        eos = self.tok.eos_token_id
        with self.lock, torch.no_grad():
            x = torch.tensor([ids])
            past = None
            for _ in range(opts["max_tokens"]):
                out = self.model(input_ids=x, past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1].float()
                if opts["temperature"] == 0:
                    nxt = int(torch.argmax(logits))
                else:
                    probs = torch.softmax(logits / opts["temperature"], dim=-1)
                    if opts["top_p"] < 1.0:
                        sp, si = torch.sort(probs, descending=True)
                        keep = torch.cumsum(sp, 0) - sp < opts["top_p"]
                        probs = torch.zeros_like(probs).scatter(0, si[keep], sp[keep])
                    nxt = int(torch.multinomial(probs / probs.sum(), 1, generator=gen))
                if nxt == eos:
                    return
                yield nxt
                x = torch.tensor([[nxt]])


# ----------------------------------------------------------------------------------------------- requests
def _number(body: dict, key: str, default, lo: float, hi: float, integer: bool = False):
    value = body.get(key, default)
    if value is None:
        return default
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not lo <= value <= hi:
        kind = "an integer" if integer else "a number"
        raise BadRequest(f"'{key}' must be {kind} from {lo} to {hi}, got {value!r}", key)
    return value


def options(body: dict) -> dict:
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported", "n")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) and s for s in stop)):
        raise BadRequest("'stop' must be a string or a list of strings", "stop")
    return {
        "max_tokens": _number(body, "max_tokens", 64, 1, MAX_TOKENS_LIMIT, integer=True),
        "temperature": float(_number(body, "temperature", 1.0, 0, 2)),
        "top_p": float(_number(body, "top_p", 1.0, 0, 1)),
        "seed": _number(body, "seed", None, 0, 2**63 - 1, integer=True),
        "stop": stop or [],
        "stream": bool(body.get("stream", False)),
    }


def chat_prompt(model: Model, body: dict) -> list[int]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list of {role, content}", "messages")
    clean = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise BadRequest(f"messages[{i}].role must be system, user or assistant", f"messages[{i}].role")
        content = m.get("content")
        if isinstance(content, list):  # content parts: the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if not isinstance(content, str):
            raise BadRequest(f"messages[{i}].content must be a string", f"messages[{i}].content")
        clean.append({"role": m["role"], "content": content})
    if not model.tok.chat_template:
        raise BadRequest("this model has no chat template: use /v1/completions", "messages")
    out = model.tok.apply_chat_template(clean, tokenize=True, add_generation_prompt=True, return_dict=True)
    return list(out["input_ids"])


def completion_prompt(model: Model, body: dict) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest("'prompt' must be a non-empty string", "prompt")
    return model.tok(prompt).input_ids


def run_generation(model: Model, ids: list[int], opts: dict):
    """Yield (text delta, finish_reason or None); the last item carries the finish reason and the token count."""
    new: list[int] = []
    sent = ""
    for tid in model.generate(ids, opts):
        new.append(tid)
        text = model.tok.decode(new, skip_special_tokens=True)
        cut = min((text.find(s) for s in opts["stop"] if s in text), default=-1)
        if cut >= 0:
            yield text[len(sent) : cut], None
            yield "", ("stop", len(new))
            return
        if text.endswith("\ufffd"):
            continue  # half of a multi-byte character: wait for the rest
        yield text[len(sent) :], None
        sent = text
    yield "", ("length" if len(new) >= opts["max_tokens"] else "stop", len(new))


class Handler(BaseHTTPRequestHandler):
    server_version = "StudioServe/1"
    model: Model  # set on the class by serve()

    def log_message(self, fmt, *args):  # one line per request in the run's log
        sys.stdout.write(f"{self.address_string()} {fmt % args}\n")
        sys.stdout.flush()

    def _json(self, status: int, obj: dict) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, exc: BadRequest) -> None:
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        self._json(exc.status, {"error": {"message": str(exc), "type": kind, "param": exc.param, "code": exc.code}})

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models":
            m = self.model
            card = {"id": m.name, "object": "model", "created": m.created, "owned_by": "studio"}
            return self._json(200, {"object": "list", "data": [card]})
        self._error(BadRequest(f"no such endpoint: GET {self.path}", status=404, code="not_found"))

    def do_POST(self):
        try:
            path = self.path.rstrip("/")
            if path not in ("/v1/chat/completions", "/v1/completions"):
                raise BadRequest(f"no such endpoint: POST {self.path}", status=404, code="not_found")
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
            except (ValueError, UnicodeDecodeError):
                raise BadRequest("the request body is not valid JSON") from None
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            if body.get("model") not in (None, self.model.name):
                raise BadRequest(
                    f"model {body.get('model')!r} is not served here (this server has {self.model.name!r})",
                    "model",
                    404,
                    "model_not_found",
                )
            chat = path == "/v1/chat/completions"
            ids = chat_prompt(self.model, body) if chat else completion_prompt(self.model, body)
            opts = options(body)
        except BadRequest as exc:
            return self._error(exc)
        try:
            self._answer(chat, ids, opts)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away: nothing to answer
        except Exception as exc:  # noqa: BLE001 - a failure of one request is answered, the server goes on
            try:
                self._error(BadRequest(f"{type(exc).__name__}: {exc}", status=500, code="server_error"))
            except OSError:
                pass

    def _answer(self, chat: bool, ids: list[int], opts: dict) -> None:
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        base = {"id": rid, "created": int(time.time()), "model": self.model.name}
        obj = "chat.completion" if chat else "text_completion"
        if not opts["stream"]:
            text, (reason, count) = "", ("stop", 0)
            for delta, end in run_generation(self.model, ids, opts):
                text += delta
                if end:
                    reason, count = end
            choice = {"index": 0, "finish_reason": reason}
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            usage = {"prompt_tokens": len(ids), "completion_tokens": count, "total_tokens": len(ids) + count}
            return self._json(200, {**base, "object": obj, "choices": [choice], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk_obj = obj + (".chunk" if chat else "")

        def send(delta: str, reason: str | None, first: bool = False) -> None:
            if chat:
                d = {"role": "assistant", "content": delta} if first else ({"content": delta} if delta else {})
                choice = {"index": 0, "delta": d, "finish_reason": reason}
            else:
                choice = {"index": 0, "text": delta, "finish_reason": reason}
            payload = json.dumps({**base, "object": chunk_obj, "choices": [choice]}, ensure_ascii=False)
            self.wfile.write(f"data: {payload}\n\n".encode())
            self.wfile.flush()

        if chat:
            send("", None, first=True)
        for delta, end in run_generation(self.model, ids, opts):
            if delta:
                send(delta, None)
            if end:
                send("", end[0])
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


# ----------------------------------------------------------------------------------------------- entry
def arg_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine.trainer.serve")
    ap.add_argument("source")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--events", required=True)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = arg_parser().parse_args(argv)
    events = Path(args.events)
    model = Model(args.source)
    Handler.model = model
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True

    def on_sigterm(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_sigterm)
    url = f"http://{args.host}:{server.server_address[1]}/v1"
    ev.append_event(events, "serve_ready", None, url=url, model=model.name, adapter=model.adapter)
    print(f"serving {model.name} at {url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        ev.append_event(events, "serve_stopped", None, url=url)
    return 0


if __name__ == "__main__":
    lean.own_process()  # what this job does not use stays unimported (engine.trainer.lean)
    sys.exit(main())
