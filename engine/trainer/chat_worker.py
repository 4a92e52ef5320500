"""Chat worker: a subprocess that loads a model (optionally with a PEFT adapter) and streams generated tokens.

Heavy: imports torch / transformers / peft, and only here, in its own process, so the studio page stays light.
The conversation is rendered by engine.data.templates with the run's template, the same code the trainer renders its
samples with, so a tuned model sees its history exactly as it was trained (``auto``: the tokenizer's own template).
Protocol, JSON lines: the parent writes requests on stdin, the worker answers on stdout.
  start-up:        -> {"type": "ready", "model": ..., "adapter": ..., "template": ..., "vision": bool}
                      or {"type": "error", "error": ...} then exit
  {"type": "generate", "id": any, "messages": [{role, content: str, images: [path]}], "system": str,
   "max_new_tokens": int, "temperature": float (0: greedy), "top_p": float, "stop": [str]}
                   -> {"type": "token", "id", "text": ...}* then {"type": "done", "id", "text": full reply}
                      (the reply ends before the first stop string, which is never sent)
                      or {"type": "error", "id", "error": ...}
  {"type": "quit"} or EOF -> exit (the memory is freed with the process).
A vision-language model (a config with ``vision_config``) is loaded with its processor and its image-text-to-text
class, as the trainer loads it (engine.trainer.vision); its conversation is rendered with the processor's own chat
template (the one it was trained with), each user turn's images before its text, and the processor turns the images
into the model's tensors. A text model given images answers with an error naming it.
Usage: python -m engine.trainer.chat_worker MODEL_DIR [--adapter ADAPTER_DIR] [--template NAME] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

from engine.data.templates import prompt_text, tokenizer_info
from engine.trainer import lean


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def load(model_dir: str, adapter: str | None, device: str):
    """(tokenizer, model, processor or None for a text model)."""
    import torch
    from transformers import AutoConfig, AutoTokenizer

    from engine.trainer import vision

    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    processor = None
    config = AutoConfig.from_pretrained(model_dir)
    if vision.is_vision_model(config):
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(model_dir)
        tok = processor.tokenizer
    else:
        tok = AutoTokenizer.from_pretrained(model_dir)
    model = vision.model_class(vision=processor is not None).from_pretrained(model_dir, dtype=dtype)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    model.to(device).eval()
    return tok, model, processor


def render(info, template: str, system: str, messages: list[dict]) -> str:
    """The prompt text for the next assistant turn: the whole conversation in the template, as the trainer renders
    it (engine.data.templates), ending with the assistant header."""
    _check(messages)
    return prompt_text(template, info, system or "", messages)


def _check(messages: list[dict]) -> None:
    for m in messages:
        if m.get("role") not in ("user", "assistant") or not isinstance(m.get("content"), str):
            raise ValueError("each message needs a role (user or assistant) and text content")
        if not all(isinstance(i, str) and i for i in m.get("images") or []):
            raise ValueError("images: a list of image file paths")


def vision_inputs(processor, system: str, messages: list[dict]) -> dict:
    """The processor's tensors for the next assistant turn of a vision-language model: the conversation in the
    processor's chat template (each user turn's images, then its text), the images opened as in training."""
    from engine.spec.groups import VisionSpec
    from engine.trainer import vision

    _check(messages)
    sizes = VisionSpec()  # the spec's defaults: the images shrunk or enlarged as a run's are by default
    msgs = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
    images = []
    for m in messages:
        refs = list(m.get("images") or [])
        images += [vision.open_image(r, sizes.image_max_pixels, sizes.image_min_pixels) for r in refs]
        parts = [{"type": "image"} for _ in refs] + ([{"type": "text", "text": m["content"]}] if m["content"] else [])
        msgs.append({"role": m["role"], "content": parts})
    text = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return dict(processor(text=[text], images=images or None, return_tensors="pt", add_special_tokens=False))


def held_back(text: str, stops: list[str]) -> int:
    """How many characters at the end of ``text`` could be the start of a stop string (not shown yet)."""
    keep = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), keep, -1):
            if text.endswith(s[:k]):
                keep = k
                break
    return keep


def generate(tok, model, device: str, template: str, req: dict, processor=None) -> None:
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

    rid = req.get("id")
    messages = req.get("messages") or []
    if processor is not None:
        inputs = {k: v.to(device) for k, v in vision_inputs(processor, req.get("system", ""), messages).items()}
    else:
        if any(m.get("images") for m in messages):
            raise ValueError("this model reads text only: it has no vision tower to read the image")
        text_in = render(tokenizer_info(tok), template, req.get("system", ""), messages)
        ids = tok(text_in, add_special_tokens=False, return_tensors="pt")["input_ids"].to(device)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)
    stops = [s for s in req.get("stop") or [] if isinstance(s, str) and s]
    stopped = threading.Event()

    class _Stop(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return stopped.is_set()

    temp = float(req.get("temperature", 0.0) or 0.0)
    kwargs = {
        **inputs,
        "streamer": streamer,
        "max_new_tokens": int(req.get("max_new_tokens", 128)),
        "do_sample": temp > 0,
        "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        "stopping_criteria": StoppingCriteriaList([_Stop()]),
    }
    if temp > 0:
        kwargs["temperature"] = temp
        kwargs["top_p"] = min(max(float(req.get("top_p", 1.0) or 1.0), 0.01), 1.0)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            with torch.no_grad():
                model.generate(**kwargs)
        except BaseException as exc:  # reported below; the streamer must end or the loop would wait forever
            failure.append(exc)
            streamer.end()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    text, shown = "", 0
    for piece in streamer:
        if not piece or stopped.is_set():
            continue
        text += piece
        cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
        if cut >= 0:
            text = text[:cut]
            stopped.set()
        upto = len(text) if stopped.is_set() else len(text) - held_back(text, stops)
        if upto > shown:
            emit({"type": "token", "id": rid, "text": text[shown:upto]})
            shown = upto
    worker.join()
    if failure:
        raise failure[0]
    if len(text) > shown:
        emit({"type": "token", "id": rid, "text": text[shown:]})
    emit({"type": "done", "id": rid, "text": text})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.trainer.chat_worker")
    p.add_argument("model")
    p.add_argument("--adapter", default=None)
    p.add_argument("--template", default="auto", help="chat template name (engine.data.templates), as in training")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args(argv)
    try:
        lean.without_quantizers(lean.model_is_quantized(args.model))  # only as `python -m` (own_process)
        tok, model, processor = load(args.model, args.adapter, args.device)
        hello = [{"role": "user", "content": "hi"}]
        if processor is None:
            render(tokenizer_info(tok), args.template, "", hello)  # an unknown template
        else:
            vision_inputs(processor, "", hello)  # a processor without a chat template
    except Exception as exc:  # any load problem goes back to the page as a message, not a hang
        emit({"type": "error", "error": f"{type(exc).__name__}: {exc}"})
        return 1
    ready = {"type": "ready", "model": args.model, "adapter": args.adapter, "template": args.template}
    emit({**ready, "vision": processor is not None})
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
                generate(tok, model, args.device, args.template, req, processor)
            except Exception as exc:
                emit({"type": "error", "id": req.get("id"), "error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    lean.own_process()  # what this job does not use stays unimported (engine.trainer.lean)
    sys.exit(main())
