"""Chat worker: a subprocess that loads a model (optionally with a PEFT adapter) and streams generated tokens.

Heavy: imports torch / transformers / peft, and only here, in its own process, so the studio page stays light.
Protocol, JSON lines: the parent writes requests on stdin, the worker answers on stdout.
  start-up:        -> {"type": "ready", "model": ..., "adapter": ...} or {"type": "error", "error": ...} then exit
  {"type": "generate", "messages": [{role, content}], "max_new_tokens": int, "temperature": float}
                   -> {"type": "token", "text": ...}* then {"type": "done", "text": full reply}
  {"type": "quit"} or EOF -> exit (the memory is freed with the process).
Usage: python -m engine.trainer.chat_worker MODEL_DIR [--adapter ADAPTER_DIR] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def load(model_dir: str, adapter: str | None, device: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    model.to(device).eval()
    return tok, model


def prompt_ids(tok, messages: list[dict]):
    if getattr(tok, "chat_template", None):
        return tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)[
            "input_ids"
        ]
    text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
    return tok(text, return_tensors="pt")["input_ids"]


def generate(tok, model, device: str, req: dict) -> None:
    import torch
    from transformers import TextIteratorStreamer

    ids = prompt_ids(tok, req.get("messages") or []).to(device)
    streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)
    temp = float(req.get("temperature", 0.0))
    kwargs = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "streamer": streamer,
        "max_new_tokens": int(req.get("max_new_tokens", 128)),
        "do_sample": temp > 0,
        "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    }
    if temp > 0:
        kwargs["temperature"] = temp
    worker = threading.Thread(target=lambda: model.generate(**kwargs), daemon=True)
    worker.start()
    text = ""
    for piece in streamer:
        if piece:
            text += piece
            emit({"type": "token", "text": piece})
    worker.join()
    emit({"type": "done", "text": text})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.trainer.chat_worker")
    p.add_argument("model")
    p.add_argument("--adapter", default=None)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args(argv)
    try:
        tok, model = load(args.model, args.adapter, args.device)
    except Exception as exc:  # any load problem goes back to the page as a message, not a hang
        emit({"type": "error", "error": f"{type(exc).__name__}: {exc}"})
        return 1
    emit({"type": "ready", "model": args.model, "adapter": args.adapter})
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            emit({"type": "error", "error": "request is not JSON"})
            continue
        if req.get("type") == "quit":
            break
        if req.get("type") == "generate":
            try:
                generate(tok, model, args.device, req)
            except Exception as exc:
                emit({"type": "error", "error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
