"""Chat tab: base and tuned model side by side, each in its own ``engine.trainer.chat_worker`` subprocess.

Light: gradio + subprocess/json. The page never loads weights; Unload ends the worker process, which frees all of
its memory. Workers are per studio process (slots "base" and "tuned"), so a reloaded page (or a second tab) shows
what is loaded, read back from them.

Each Send passes the whole conversation of its pane to the worker, which renders it with the chat template the run was
trained with (engine.data.templates, the trainer's own rendering). gradio 6 hands the history over as messages whose
content is a str or a list of parts ({"type": "text", "text": ...}, files); ``conversation`` turns it into plain text
turns. The Tuned list offers finished training runs (their adapter or full weights) and exported models (finished
merges, folders under exports/); never a merge job itself.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.core import workspace
from engine.data.templates import TEMPLATE_NAMES
from engine.export import checks as xp
from engine.export.jobs import MERGE_TAG
from engine.runs.messages import message as run_message
from studio import backend
from studio.i18n.localize import localize_error
from studio.i18n.page import t

ROOT = Path(__file__).resolve().parents[2]
ERROR_MARK = "⚠️ "  # starts the line a failed reply ends with; that turn is not sent back to the model
_ERROR_LINE = re.compile(r"\n*" + re.escape(ERROR_MARK) + r"[^\n]*$")


class Worker:
    """One chat_worker process and a thread that turns its stdout lines into a queue of messages."""

    def __init__(self, model: str, adapter: str | None = None, template: str = "auto", source: str = ""):
        env = {
            **os.environ,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "PYTHONPATH": str(ROOT),
            "TOKENIZERS_PARALLELISM": "false",
        }
        argv = [sys.executable, "-m", "engine.trainer.chat_worker", model, "--template", template] + (
            ["--adapter", adapter] if adapter else []
        )
        self.model, self.adapter, self.template = model, adapter, template
        self.source = source or model  # what the page picked: a model folder, a run folder or an export
        self.seq = 0
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

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = 180, lang: str = "en") -> str:
        try:
            msg = self.messages.get(timeout=timeout)
        except queue.Empty:
            return t("chat_timeout", lang)
        return "" if msg.get("type") == "ready" else msg.get("error") or t("chat_exited", lang, detail=msg)

    def generate(self, messages: list[dict], options: dict, lang: str = "en") -> Iterator[str]:
        """Yields the reply so far after each token. ``options``: system, max_new_tokens, temperature, top_p, stop.
        Requests are numbered: what is left of an abandoned reply (a closed page) is skipped, not shown here."""
        self.seq += 1
        rid = self.seq
        try:
            self.proc.stdin.write(json.dumps({"type": "generate", "id": rid, "messages": messages, **options}) + "\n")
            self.proc.stdin.flush()
        except OSError:
            yield f"{ERROR_MARK}{t('chat_exited', lang, detail=self.proc.poll())}"
            return
        text = ""
        while True:
            try:
                msg = self.messages.get(timeout=300)
            except queue.Empty:
                yield f"{text}\n\n{ERROR_MARK}{t('chat_reply_timeout', lang)}"
                return
            if msg.get("type") in ("token", "done", "error") and msg.get("id", rid) != rid:
                continue
            if msg.get("type") == "token":
                text += msg["text"]
                yield text
            elif msg.get("type") == "done":
                # A weakly trained model may end its turn at once; say so instead of showing an empty bubble.
                yield msg.get("text", text) or t("chat_empty", lang)
                return
            else:
                error = msg.get("error") or t("chat_exited", lang, detail=msg)
                yield f"{text}\n\n{ERROR_MARK}{error}".lstrip("\n")
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


# ----------------------------------------------------------------------------------------------- what to chat with
def _short(path: str | Path) -> str:
    """A folder as the page names it: relative to the workspace when inside it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(workspace.home().resolve()))
    except (ValueError, OSError):
        return str(p)


def _is_model(p: Path) -> bool:
    return (p / "config.json").is_file() and not (p / "adapter_config.json").is_file()


def _is_reward_model(p: Path) -> bool:
    """A merged reward model (stage rm: ...ForSequenceClassification) or a reward adapter (peft SEQ_CLS)."""
    import json

    for name, key in (("config.json", "architectures"), ("adapter_config.json", "task_type")):
        try:
            value = json.loads((p / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        values = value if isinstance(value, list) else [value]
        if any(str(v).endswith("ForSequenceClassification") or str(v) == "SEQ_CLS" for v in values):
            return True
    return False


def _finished_merges() -> list[tuple[Path, list[str]]]:
    """(target folder, sources) of the merges that finished, newest first, read from their registry rows."""
    out = []
    for r in backend.list_runs():
        argv = getattr(r, "command", None) or []
        if getattr(r, "kind", "") != "command" or MERGE_TAG not in (getattr(r, "tags", None) or []):
            continue
        if getattr(r, "status", "") != "completed" or argv[1:3] != ["-m", "engine.trainer.merge"]:
            continue
        try:
            args = xp.merge_arg_parser().parse_args(argv[3:])
        except SystemExit:
            continue
        out.append((Path(args.out), list(args.sources)))
    return out


def exported_models() -> list[Path]:
    """Exports that can be chatted with: targets of finished merges that are still there, then any other folder
    under exports/ holding a model or an adapter (copied in). Hidden folders (a merge's temp output) never."""
    found: list[Path] = []
    candidates = [out for out, _ in _finished_merges()]
    root = workspace.exports_dir()
    candidates += sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in candidates:
        p = p.resolve()
        if p.name.startswith(".") or p in found:
            continue
        if _is_reward_model(p):  # scores answers, writes none
            continue
        if (p / "config.json").is_file() or (p / "adapter_config.json").is_file():
            found.append(p)
    return found


def tuned_choices(lang: str = "en") -> list[tuple[str, str]]:
    """(label, folder): completed training runs that saved weights, then exported models. Merge jobs are command
    runs of the registry (engine.export.jobs); they are offered through the model they wrote, not as runs."""
    out = []
    for r in backend.list_runs():
        if getattr(r, "kind", "train") != "train" or getattr(r, "status", "") != "completed":
            continue
        try:
            src = xp.resolve_source(r.run_dir)
        except xp.ExportError:  # its adapter or weights are gone
            continue
        if xp.source_head(src) == "seq_cls":  # a reward model scores answers; it does not write them
            continue
        name = f"{r.id} · {r.name}" if r.name and r.name != r.id else r.id
        out.append((f"{t('chat_kind_run', lang)}{_colon(lang)}{name}", str(r.run_dir)))
    out += [(f"{t('chat_kind_export', lang)}{_colon(lang)}{_short(p)}", str(p)) for p in exported_models()]
    return out


def model_choices() -> list[str]:
    """Base models: the workspace's models, then merged exports (full models)."""
    models = backend.local_models()
    return models + [str(p) for p in exported_models() if _is_model(p) and str(p) not in models]


def _spec_template(spec: dict | None) -> str:
    return str(((spec or {}).get("data") or {}).get("template") or "auto")


def template_for(source: str) -> str:
    """The chat template a run (or the run an export was merged from) was trained with; ``auto`` otherwise."""
    if not source:
        return "auto"
    try:
        p = workspace_path(source)
        if (p / "spec.yaml").is_file() or (p / "adapter_config.json").is_file():
            return _spec_template(xp.resolve_source(p).spec)
        for out, sources in _finished_merges():
            if out.resolve() == p and sources:
                return _spec_template(xp.resolve_source(sources[0]).spec)
    except (ValueError, xp.ExportError):
        pass
    return "auto"


def workspace_path(path: str) -> Path:
    from studio.tabs.export import inside_workspace

    return inside_workspace(path)


def tuned_target(source: str) -> tuple[str, str | None] | None:
    """What the Tuned pane loads for a picked source: (model folder, adapter folder or None). A run folder gives its
    adapter on the base it was trained from (or its full weights); an export folder is a merged model (or an
    adapter). None for no source; ValueError for a path outside the workspace or without weights."""
    if not source:
        return None
    p = workspace_path(source)
    if _is_model(p) and not (p / "spec.yaml").is_file():
        return str(p), None
    try:
        src = xp.resolve_source(p)
    except xp.ExportError as exc:  # a run's own words (not finished, adapter not saved, ...), else the plain one
        said = exc.args[0] if (p / "spec.yaml").is_file() else run_message("runs.no_adapter", source=source)
        raise ValueError(said) from None
    return (src.weights_dir, None) if src.kind == "model" else (str(src.base), src.weights_dir)


# ----------------------------------------------------------------------------------------------- handlers
def load(model: str, tuned: str, lang: str = "en", template: str = "auto") -> str:
    unload()
    if not model:
        return "❌ " + t("chat_no_model", lang)
    template = template or "auto"
    try:
        target = tuned_target(tuned)
    except ValueError as exc:
        return f"❌ {localize_error(exc, lang)}"
    WORKERS["base"] = Worker(model, template=template)
    if target:
        WORKERS["tuned"] = Worker(target[0], target[1], template=template, source=tuned)
    problems = [
        f"{_slot(slot, lang)}{_colon(lang)}{err}" for slot, w in WORKERS.items() if (err := w.wait_ready(lang=lang))
    ]
    if problems:
        unload()
        return "❌ " + ("；" if lang == "zh" else "; ").join(problems)
    return loaded_text(lang)


def loaded_text(lang: str = "en") -> str:
    """What is loaded, as the status line says it: the slots, then each slot's model (and adapter) and template."""
    if not WORKERS:
        return t("chat_nothing_loaded", lang)
    head = "✅ " + t("chat_loaded", lang, slots=("、" if lang == "zh" else ", ").join(_slot(s, lang) for s in WORKERS))
    lines = [head]
    for slot, w in WORKERS.items():
        what = f"`{_short(w.model)}`" + (f" + `{_short(w.adapter)}`" if w.adapter else "")
        lines.append(f"- {t(slot, lang)}{_colon(lang)}{what} · {t('chat_template', lang)} `{w.template}`")
    return "\n".join(lines)


def restore(lang: str = "en") -> tuple[Any, Any, Any, str]:
    """On page load: the pickers show the models the workers actually run (a reload must not show the default model
    while another one answers). A worker that has died is dropped."""
    import gradio as gr

    for slot, w in list(WORKERS.items()):
        if not w.alive():
            WORKERS.pop(slot).close()
    if not WORKERS:  # the lists as they are now (a merge finished since the studio started), the choice the user's
        return gr.update(choices=model_choices()), gr.update(choices=tuned_choices(lang)), gr.update(), ""
    base, tuned = WORKERS.get("base"), WORKERS.get("tuned")
    return (
        gr.update(choices=model_choices(), value=base.model if base else None),
        gr.update(choices=tuned_choices(lang), value=tuned.source if tuned else None),
        gr.update(value=(base or tuned).template),
        loaded_text(lang),
    )


def _colon(lang: str) -> str:
    return "：" if lang == "zh" else ": "


def _slot(slot: str, lang: str) -> str:
    """'base' / 'tuned' as the page names them (in English the slot's own name, as before)."""
    return slot if lang == "en" else t(slot, lang)


def unload(lang: str = "en") -> str:
    for w in WORKERS.values():
        w.close()
    n = len(WORKERS)
    WORKERS.clear()
    return t("chat_unloaded", lang, n=n)


def text_of(content: Any) -> str:
    """A gradio message's content as text: a str, a part ({"type": "text", "text": ...}; files and components have
    no text) or a list of them (gradio 6 hands history over as lists of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return str(content.get("text") or "") if content.get("type", "text") == "text" else ""
    if isinstance(content, (list, tuple)):
        return "".join(text_of(part) for part in content)
    return str(content)


_EMPTY_REPLIES = {t("chat_empty", "en"), t("chat_empty", "zh")}


def conversation(hist: list | None) -> list[dict]:
    """A pane's history as the worker takes it: [{role, content: str}] alternating user / assistant. A turn whose
    reply failed is left out (user and reply), the empty-reply note is an empty reply."""
    turns: list[dict] = []
    for m in hist or []:
        role = m.get("role") if isinstance(m, dict) else getattr(m, "role", None)
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", None)
        if role not in ("user", "assistant"):
            continue
        text = text_of(content)
        if role == "assistant":
            if not turns or turns[-1]["role"] != "user":
                continue
            if ERROR_MARK in text and _ERROR_LINE.search(text):
                turns.pop()
                continue
            text = "" if text in _EMPTY_REPLIES else text
        elif turns and turns[-1]["role"] == "user":  # a user turn left without a reply: the newer one counts
            turns.pop()
        turns.append({"role": role, "content": text})
    if turns and turns[-1]["role"] == "user":
        turns.pop()
    return turns


def parse_stop(text: str) -> list[str]:
    """The Stop field: strings separated by commas; ``\\n`` and ``\\t`` stand for a line break and a tab."""
    out = []
    for part in (text or "").split(","):
        part = part.strip().replace("\\n", "\n").replace("\\t", "\t")
        if part and part not in out:
            out.append(part)
    return out


def send(
    prompt: str,
    base_hist: list,
    tuned_hist: list,
    system: str = "",
    temperature: float = 0.7,
    top_p: float = 0.9,
    max_new: int = 128,
    stop: str = "",
    lang: str = "en",
) -> Iterator[tuple[list, list, str]]:
    """Stream the reply of each loaded model to the same prompt, base first then tuned; each pane's model sees the
    whole conversation of its own pane."""
    if not prompt or not prompt.strip() or not WORKERS:
        yield base_hist, tuned_hist, prompt
        return
    options = {
        "system": system or "",
        "max_new_tokens": int(max_new or 128),
        "temperature": float(temperature or 0.0),
        "top_p": float(top_p or 1.0),
        "stop": parse_stop(stop),
    }
    hists = {"base": _shown(base_hist), "tuned": _shown(tuned_hist)}
    for slot, worker in list(WORKERS.items()):
        hist = hists[slot]
        messages = conversation(hist) + [{"role": "user", "content": prompt}]
        hist += [{"role": "user", "content": prompt}, {"role": "assistant", "content": ""}]
        for text in worker.generate(messages, options, lang):
            hist[-1] = {"role": "assistant", "content": text}
            yield hists["base"], hists["tuned"], ""
    yield hists["base"], hists["tuned"], ""


def _shown(hist: list | None) -> list[dict]:
    """gradio's history back as plain {role, content} messages (text only) for the Chatbot to show again."""
    out = []
    for m in hist or []:
        if isinstance(m, dict) and m.get("role") in ("user", "assistant"):
            out.append({"role": m["role"], "content": text_of(m.get("content"))})
    return out


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    models = model_choices()
    with gr.Row(equal_height=False):
        model = texts.add(
            gr.Dropdown(
                models,
                value=models[0] if models else None,
                allow_custom_value=True,
                label=t("chat_model", lang),
                elem_id="chat-model",
                scale=2,
            ),
            "chat_model",
        )
        tuned = texts.add(
            gr.Dropdown([], allow_custom_value=True, label=t("chat_adapter", lang), elem_id="chat-adapter", scale=2),
            "chat_adapter",
        )
        template = texts.add(
            gr.Dropdown(TEMPLATE_NAMES, value="auto", label=t("chat_template", lang), elem_id="chat-template"),
            "chat_template",
        )
    with gr.Row():
        load_btn = texts.add(gr.Button(t("load", lang), variant="primary", elem_id="chat-load"), "load", "value")
        unload_btn = texts.add(gr.Button(t("unload", lang), elem_id="chat-unload"), "unload", "value")
    status = gr.Markdown(elem_id="chat-status")
    with texts.add(gr.Accordion(t("chat_generation", lang), open=False, elem_id="chat-generation"), "chat_generation"):
        system = texts.add(gr.Textbox(label=t("chat_system", lang), lines=2, elem_id="chat-system"), "chat_system")
        with gr.Row():
            temperature = texts.add(
                gr.Slider(0.0, 2.0, value=0.7, step=0.05, label=t("temperature", lang), elem_id="chat-temperature"),
                "temperature",
            )
            top_p = texts.add(
                gr.Slider(0.05, 1.0, value=0.9, step=0.05, label=t("top_p", lang), elem_id="chat-top-p"), "top_p"
            )
            max_new = texts.add(
                gr.Number(
                    128,
                    minimum=1,
                    maximum=4096,
                    step=1,
                    precision=0,
                    label=t("max_new_tokens", lang),
                    elem_id="chat-max-new",
                ),
                "max_new_tokens",
            )
            stop = texts.add(gr.Textbox(label=t("chat_stop", lang), elem_id="chat-stop"), "chat_stop")
    with gr.Row():
        base_box = texts.add(gr.Chatbot(label=t("base", lang), height=320, elem_id="chat-base"), "base")
        tuned_box = texts.add(gr.Chatbot(label=t("tuned", lang), height=320, elem_id="chat-tuned"), "tuned")
    with gr.Row():
        prompt = texts.add(gr.Textbox(label=t("prompt", lang), scale=4, elem_id="chat-prompt"), "prompt")
        send_btn = texts.add(gr.Button(t("send", lang), scale=1, elem_id="chat-send"), "send", "value")
        clear_btn = texts.add(gr.Button(t("chat_clear", lang), scale=0, elem_id="chat-clear"), "chat_clear", "value")

    def _choices(lang_):
        return gr.update(choices=tuned_choices(lang_)), gr.update(choices=model_choices())

    ctx.tab.select(_choices, [ctx.lang], [tuned, model], queue=False)
    tuned.input(template_for, [tuned], [template], queue=False)
    load_btn.click(
        lambda m, tu, tpl, lang_: (load(m, tu, lang_, tpl), [], []),
        [model, tuned, template, ctx.lang],
        [status, base_box, tuned_box],
    )
    unload_btn.click(unload, [ctx.lang], [status])
    clear_btn.click(lambda: ([], []), None, [base_box, tuned_box], queue=False)
    # Send and the prompt are locked while the models answer: a second Send would interleave with the first.
    gr.on(
        [send_btn.click, prompt.submit],
        lambda: (gr.update(interactive=False), gr.update(interactive=False)),
        None,
        [send_btn, prompt],
        queue=False,
    ).then(
        send,
        [prompt, base_box, tuned_box, system, temperature, top_p, max_new, stop, ctx.lang],
        [base_box, tuned_box, prompt],
    ).then(lambda: (gr.update(interactive=True), gr.update(interactive=True)), None, [send_btn, prompt], queue=False)
    ctx.on_load.append((restore, [ctx.lang], [model, tuned, template, status]))
    ctx.shared["chat"] = dict(model=model, tuned=tuned, template=template, prompt=prompt, status=status,
                              base_box=base_box, tuned_box=tuned_box)  # fmt: skip
