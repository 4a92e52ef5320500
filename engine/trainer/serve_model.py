"""The model ``engine.trainer.serve`` answers with, and a request's parts checked against it: the options, the prompt's
tokens (within the model's context), and the generation that a client's departure or the server's stop ends early.

Heavy: torch, transformers, peft (imported when a model loads). The HTTP side (bodies, keys, streaming, who waits)
is ``engine.trainer.serve``'s; everything here is plain blocking code that the server runs in worker threads.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from engine.export import convert_plan as cp
from engine.export import sources
from engine.trainer import lean

MAX_TOKENS_LIMIT = 4096
DEFAULT_MAX_TOKENS = 64


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param, self.status, self.code = param, status, code


class Cancel:
    """Why a generation should end now (None: it goes on): the client went away, or the server is stopping. A plain
    attribute, set from the event loop or a signal handler and read by the generation thread between tokens."""

    stopping: str | None = None  # the whole server's, set on the class when it stops

    def __init__(self) -> None:
        self.why: str | None = None

    def set(self, why: str) -> None:
        self.why = self.why or why

    def reason(self) -> str | None:
        return self.why or Cancel.stopping


class Model:
    """The served model, its tokenizer, its context length and one generation lock."""

    def __init__(self, source: str):
        folder = cp.is_model_folder(source)
        src = None if folder else sources.resolve_source(source)
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
        self.tok_lock = threading.Lock()  # a fast tokenizer is not to be used by two threads at once
        self.context = context_length(self.model.config, self.tok)
        # The longest token's text: a text of n characters is at least n / this many tokens, so a prompt far beyond
        # the context is refused without tokenizing it (a 200,000-word prompt took seconds of a worker before).
        self.longest_token = max((len(t) for t in self.tok.get_vocab()), default=1) or 1
        self.name = Path(str(source).rstrip("/")).name
        self.lock = threading.Lock()
        self.created = int(time.time())

    def generate(self, ids: list[int], opts: dict, cancel: Cancel):
        """Yield new token ids, one at a time (greedy, or sampled with the request's temperature / top_p), until
        eos, ``max_tokens`` or ``cancel`` (checked before each token: the stopping criterion of this loop)."""
        import torch

        gen = torch.Generator().manual_seed(int(opts["seed"])) if opts.get("seed") is not None else None
        eos = self.tok.eos_token_id
        with self.lock, torch.no_grad():
            x = torch.tensor([ids])
            past = None
            for _ in range(opts["max_tokens"]):
                if cancel.reason():
                    return
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

    def decode(self, ids: list[int]) -> str:
        with self.tok_lock:
            return self.tok.decode(ids, skip_special_tokens=True)


def context_length(config, tok) -> int:
    """The most tokens (prompt and answer) the model takes: its config's position limit, else the tokenizer's."""
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tok, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < 10**7 else 2048


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
    """The generation options; ``max_tokens`` None when the request gave none (``fit_context`` fills it in)."""
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported", "n")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) and s for s in stop)):
        raise BadRequest("'stop' must be a string or a list of strings", "stop")
    return {
        "max_tokens": _number(body, "max_tokens", None, 1, MAX_TOKENS_LIMIT, integer=True),
        "temperature": float(_number(body, "temperature", 1.0, 0, 2)),
        "top_p": float(_number(body, "top_p", 1.0, 0, 1)),
        "seed": _number(body, "seed", None, 0, 2**63 - 1, integer=True),
        "stop": stop or [],
        "stream": bool(body.get("stream", False)),
        "include_usage": _include_usage(body),
    }


def _include_usage(body: dict) -> bool:
    """OpenAI's ``stream_options: {"include_usage": true}``: a last chunk with the usage and no choices."""
    so = body.get("stream_options")
    if so is None:
        return False
    if not isinstance(so, dict) or not isinstance(so.get("include_usage", False), bool):
        raise BadRequest("'stream_options' must be an object with a boolean include_usage", "stream_options")
    if not body.get("stream", False):
        raise BadRequest("'stream_options' is only allowed when 'stream' is true", "stream_options")
    return so.get("include_usage", False)


def too_long(model: Model, prompt: int, wanted: int | None, param: str, at_least: bool = False) -> BadRequest:
    """OpenAI's answer to a prompt and answer beyond the model's context (400, ``context_length_exceeded``)."""
    answer = wanted or 0
    where = "messages" if param == "messages" else "prompt"
    some = "at least " if at_least else ""
    return BadRequest(
        f"This model's maximum context length is {model.context} tokens. However, you requested {some}"
        f"{prompt + answer} tokens ({some}{prompt} in the {where}, {answer} in the completion). Please reduce the "
        f"length of the {where} or completion.",
        param,
        400,
        "context_length_exceeded",
    )


def check_chars(model: Model, chars: int, opts: dict, param: str) -> None:
    """Refuse, before tokenizing, a text too long for the context whatever its tokens."""
    fewest = math.ceil(chars / model.longest_token)
    if fewest + (opts["max_tokens"] or 1) > model.context:
        raise too_long(model, fewest, opts["max_tokens"], param, at_least=True)


def fit_context(model: Model, ids: list[int], opts: dict, param: str) -> None:
    """The prompt's tokens plus ``max_tokens`` within the context; a request without ``max_tokens`` gets what is
    left, up to ``DEFAULT_MAX_TOKENS``."""
    room = model.context - len(ids)
    if opts["max_tokens"] is None:
        if room < 1:
            raise too_long(model, len(ids), 1, param)
        opts["max_tokens"] = min(DEFAULT_MAX_TOKENS, room)
    elif opts["max_tokens"] > room:
        raise too_long(model, len(ids), opts["max_tokens"], param)


def chat_prompt(model: Model, body: dict, opts: dict, max_messages: int) -> list[int]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list of {role, content}", "messages")
    if len(msgs) > max_messages:
        raise BadRequest(f"'messages' has {len(msgs)} messages: at most {max_messages} are taken", "messages")
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
    check_chars(model, sum(len(m["content"]) for m in clean), opts, "messages")
    with model.tok_lock:
        out = model.tok.apply_chat_template(clean, tokenize=True, add_generation_prompt=True, return_dict=True)
    ids = list(out["input_ids"])
    fit_context(model, ids, opts, "messages")
    return ids


def completion_prompt(model: Model, body: dict, opts: dict) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest("'prompt' must be a non-empty string", "prompt")
    check_chars(model, len(prompt), opts, "prompt")
    with model.tok_lock:
        ids = list(model.tok(prompt).input_ids)
    fit_context(model, ids, opts, "prompt")
    return ids


def run_generation(model: Model, ids: list[int], opts: dict, cancel: Cancel):
    """Yield (text delta, None), then ("", (finish_reason, completion tokens)); when ``cancel`` ended it early, the
    last finish reason is None (nobody to tell, or the server is stopping)."""
    new: list[int] = []
    sent = ""
    for tid in model.generate(ids, opts, cancel):
        new.append(tid)
        text = model.decode(new)
        cut = min((text.find(s) for s in opts["stop"] if s in text), default=-1)
        if cut >= 0:
            yield text[len(sent) : cut], None
            yield "", ("stop", len(new))
            return
        if text.endswith("\ufffd"):
            continue  # half of a multi-byte character: wait for the rest
        yield text[len(sent) :], None
        sent = text
    if cancel.reason() and len(new) < opts["max_tokens"]:
        yield "", (None, len(new))
        return
    yield "", ("length" if len(new) >= opts["max_tokens"] else "stop", len(new))
