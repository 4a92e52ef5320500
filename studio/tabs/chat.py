"""Chat tab: base and tuned model side by side, each in its own ``engine.trainer.chat_worker`` subprocess.

Light: gradio + subprocess/json. The page never loads weights; Unload ends the worker process, which frees all of
its memory. Workers are per studio process (slots "base" and "tuned").
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.runs.messages import message as run_message
from studio import backend
from studio.i18n.localize import localize_error
from studio.i18n.page import t

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One chat_worker process and a thread that turns its stdout lines into a queue of messages."""

    def __init__(self, model: str, adapter: str | None = None):
        env = {
            **os.environ,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "PYTHONPATH": str(ROOT),
            "TOKENIZERS_PARALLELISM": "false",
        }
        argv = [sys.executable, "-m", "engine.trainer.chat_worker", model] + (
            ["--adapter", adapter] if adapter else []
        )
        self.model, self.adapter = model, adapter
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            try:
                self.messages.put(json.loads(line))
            except ValueError:
                continue
        self.messages.put({"type": "exit", "returncode": self.proc.wait()})

    def wait_ready(self, timeout: float = 180, lang: str = "en") -> str:
        try:
            msg = self.messages.get(timeout=timeout)
        except queue.Empty:
            return t("chat_timeout", lang)
        return "" if msg.get("type") == "ready" else msg.get("error") or t("chat_exited", lang, detail=msg)

    def generate(self, messages: list[dict], max_new_tokens: int, lang: str = "en") -> Iterator[str]:
        """Yields the reply so far after each token."""
        self.proc.stdin.write(
            json.dumps({"type": "generate", "messages": messages, "max_new_tokens": int(max_new_tokens)}) + "\n"
        )
        self.proc.stdin.flush()
        text = ""
        while True:
            msg = self.messages.get(timeout=300)
            if msg.get("type") == "token":
                text += msg["text"]
                yield text
            elif msg.get("type") == "done":
                # A weakly trained model may end its turn at once; say so instead of showing an empty bubble.
                yield msg.get("text", text) or t("chat_empty", lang)
                return
            else:
                yield text + f"\n[{msg.get('error') or msg}]"
                return

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"type": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, 9)
                self.proc.wait()


WORKERS: dict[str, Worker] = {}


def adapter_for(source: str) -> str | None:
    """A run folder -> its adapter folder; an adapter folder as is; refuses paths outside the workspace."""
    if not source:
        return None
    from studio.tabs.export import inside_workspace

    p = inside_workspace(source)
    for cand in (p / "adapter", p):
        if (cand / "adapter_config.json").is_file():
            return str(cand)
    raise ValueError(run_message("runs.no_adapter", source=source))


def load(model: str, tuned: str, lang: str = "en") -> str:
    unload()
    if not model:
        return "❌ " + t("chat_no_model", lang)
    try:
        adapter = adapter_for(tuned)
    except ValueError as exc:
        return f"❌ {localize_error(exc, lang)}"
    WORKERS["base"] = Worker(model)
    if adapter:
        WORKERS["tuned"] = Worker(model, adapter)
    colon = "：" if lang == "zh" else ": "
    problems = [f"{_slot(slot, lang)}{colon}{err}" for slot, w in WORKERS.items() if (err := w.wait_ready(lang=lang))]
    if problems:
        unload()
        return "❌ " + ("；" if lang == "zh" else "; ").join(problems)
    return "✅ " + t("chat_loaded", lang, slots=("、" if lang == "zh" else ", ").join(_slot(s, lang) for s in WORKERS))


def _slot(slot: str, lang: str) -> str:
    """'base' / 'tuned' as the page names them (in English the slot's own name, as before)."""
    return slot if lang == "en" else t(slot, lang)


def unload(lang: str = "en") -> str:
    for w in WORKERS.values():
        w.close()
    n = len(WORKERS)
    WORKERS.clear()
    return t("chat_unloaded", lang, n=n)


def send(
    prompt: str, base_hist: list, tuned_hist: list, max_new: int, lang: str = "en"
) -> Iterator[tuple[list, list, str]]:
    """Stream the reply of each loaded model to the same prompt, base first then tuned."""
    if not prompt or not WORKERS:
        yield base_hist, tuned_hist, prompt
        return
    hists = {"base": list(base_hist or []), "tuned": list(tuned_hist or [])}
    for slot, worker in list(WORKERS.items()):
        hist = hists[slot]
        messages = [{"role": m["role"], "content": m["content"]} for m in hist] + [{"role": "user", "content": prompt}]
        hist += [{"role": "user", "content": prompt}, {"role": "assistant", "content": ""}]
        for text in worker.generate(messages, max_new, lang):
            hist[-1] = {"role": "assistant", "content": text}
            yield hists["base"], hists["tuned"], ""
    yield hists["base"], hists["tuned"], ""


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    models = backend.local_models()
    with gr.Row(equal_height=False):
        model = texts.add(
            gr.Dropdown(
                models,
                value=models[0] if models else None,
                allow_custom_value=True,
                label=t("chat_model", lang),
                elem_id="chat-model",
            ),
            "chat_model",
        )
        tuned = texts.add(
            gr.Dropdown([], allow_custom_value=True, label=t("chat_adapter", lang), elem_id="chat-adapter"),
            "chat_adapter",
        )
        max_new = texts.add(
            gr.Number(64, minimum=1, maximum=4096, step=1, precision=0, label=t("max_new_tokens", lang)),
            "max_new_tokens",
        )
    with gr.Row():
        load_btn = texts.add(gr.Button(t("load", lang), variant="primary", elem_id="chat-load"), "load", "value")
        unload_btn = texts.add(gr.Button(t("unload", lang), elem_id="chat-unload"), "unload", "value")
    status = gr.Markdown(elem_id="chat-status")
    with gr.Row():
        base_box = texts.add(gr.Chatbot(label=t("base", lang), height=320, elem_id="chat-base"), "base")
        tuned_box = texts.add(gr.Chatbot(label=t("tuned", lang), height=320, elem_id="chat-tuned"), "tuned")
    with gr.Row():
        prompt = texts.add(gr.Textbox(label=t("prompt", lang), scale=4, elem_id="chat-prompt"), "prompt")
        send_btn = texts.add(gr.Button(t("send", lang), scale=1, elem_id="chat-send"), "send", "value")

    def _choices():
        runs = [(f"{r.id} · {r.name}", r.run_dir) for r in backend.list_runs() if r.status == "completed"]
        return gr.update(choices=runs), gr.update(choices=backend.local_models())

    ctx.tab.select(_choices, None, [tuned, model], queue=False)
    load_btn.click(load, [model, tuned, ctx.lang], [status])
    unload_btn.click(unload, [ctx.lang], [status])
    gr.on(
        [send_btn.click, prompt.submit],
        send,
        [prompt, base_box, tuned_box, max_new, ctx.lang],
        [base_box, tuned_box, prompt],
    )
