"""Chat tab: base and tuned model side by side, each in its own ``engine.trainer.chat_worker`` subprocess.

Light: gradio; each worker is a ``studio.tabs.chat_process.Worker``. The page never loads weights; Unload ends the
worker process, which frees all of its memory. Workers live in the studio process per account (slots "base" and
"tuned"; team mode: each member their own, which no one else sees or talks to), so a reloaded page (or a second tab)
shows what is loaded, read back from them.

Each Send passes the whole conversation of its pane to the worker, which renders it with the chat template the run was
trained with (engine.data.templates, the trainer's own rendering). gradio 6 hands the history over as messages whose
content is a str or a list of parts ({"type": "text", "text": ...}, files); ``conversation`` turns it into text
turns with their images. An image sent with a message (upload or paste) goes to a vision-language model with that
turn, rendered by the processor's chat template as in training; a text-only model's pane says it cannot read it.
What can be picked (models, runs, exports) is studio.tabs.chat_sources; a picked run sets its template and base.
The feedback section under the chat (good / bad, a better answer, train on them) is studio.tabs.chat_feedback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.core import accounts
from engine.data.template_table import TEMPLATE_NAMES
from studio.i18n.localize import localize_error
from studio.i18n.page import t
from studio.tabs import chat_feedback
from studio.tabs.chat_process import Worker
from studio.tabs.chat_remote import ERROR_MARK, Remote, is_served
from studio.tabs.chat_sources import (
    _colon,
    _short,
    base_for,
    default_model,
    load_target,
    model_choices,
    picks_for,
    template_for,
    tuned_choices,
    workspace_path,
)

ROOT = Path(__file__).resolve().parents[2]
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")
_ERROR_LINE = re.compile(r"\n*" + re.escape(ERROR_MARK) + r"[^\n]*$")


# Loaded models per account (team mode: each member their own "base" and "tuned" workers, which no one else sees or
# talks to; single-user mode: the operator's, shared by every page of this studio).
_BY_OWNER: dict[str, dict[str, Worker | Remote]] = {}


def workers() -> dict[str, Worker | Remote]:
    """The slots ("base", "tuned") of the account this call acts for."""
    return _BY_OWNER.setdefault(accounts.owner_of_new(), {})


# ----------------------------------------------------------------------------------------------- handlers
def load(model: str, tuned: str, lang: str = "en", template: str = "auto") -> str:
    unload()
    slots = workers()
    if not model:
        return "❌ " + t("chat_no_model", lang)
    template = template or "auto"
    try:
        target = load_target(model, tuned)
    except ValueError as exc:
        return f"❌ {localize_error(exc, lang)}"
    slots["base"] = Worker(model, template=template)
    if is_served(tuned):  # a model Studio serves: the pane asks its OpenAI-compatible endpoint
        slots["tuned"] = Remote(tuned)
    elif target:
        slots["tuned"] = Worker(target[0], target[1], template=template, source=tuned)
    problems = [
        f"{_slot(slot, lang)}{_colon(lang)}{err}" for slot, w in slots.items() if (err := w.wait_ready(lang=lang))
    ]
    if problems:
        unload()
        return "❌ " + ("；" if lang == "zh" else "; ").join(problems)
    return loaded_text(lang)


def loaded_text(lang: str = "en") -> str:
    """What is loaded, as the status line says it: the slots, then each slot's model (and adapter) and template."""
    slots = workers()
    if not slots:
        return t("chat_nothing_loaded", lang)
    head = "✅ " + t("chat_loaded", lang, slots=("、" if lang == "zh" else ", ").join(_slot(s, lang) for s in slots))
    lines = [head]
    for slot, w in slots.items():
        if isinstance(w, Remote):  # a served model: its name on the server and the server's address
            what = f"`{w.model}` · {w.url}"
        else:
            what = f"`{_short(w.model)}`" + (f" + `{_short(w.adapter)}`" if w.adapter else "")
        lines.append(f"- {t(slot, lang)}{_colon(lang)}{what} · {t('chat_template', lang)} `{w.template}`")
    return "\n".join(lines)


def restore(lang: str = "en") -> tuple[Any, Any, Any, str]:
    """On page load: the pickers show the models the workers actually run (a reload must not show the default model
    while another one answers). A worker that has died is dropped."""
    import gradio as gr

    slots = workers()
    for slot, w in list(slots.items()):
        if not w.alive():
            slots.pop(slot).close()
    if not slots:  # the lists as they are now (a merge finished since the studio started), the choice the user's
        return gr.update(choices=model_choices()), gr.update(choices=tuned_choices(lang)), gr.update(), ""
    base, tuned = slots.get("base"), slots.get("tuned")
    return (
        gr.update(choices=model_choices(), value=base.model if base else None),
        gr.update(choices=tuned_choices(lang), value=tuned.source if tuned else None),
        gr.update(value=(base or tuned).template),
        loaded_text(lang),
    )


def status_in(shown: str, lang: str) -> Any:
    """The status line after a language switch (it stayed in the language it was written in): what is loaded, or
    that nothing is, in the new language; an error and an empty line stay as they are."""
    import gradio as gr

    if not shown or str(shown).startswith("❌"):
        return gr.skip()
    return loaded_text(lang)


def _slot(slot: str, lang: str) -> str:
    """'base' / 'tuned' as the page names them (in English the slot's own name, as before)."""
    return slot if lang == "en" else t(slot, lang)


def unload(lang: str = "en") -> str:
    slots = workers()
    for w in slots.values():
        w.close()
    n = len(slots)
    slots.clear()
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


def images_of(content: Any) -> list[str]:
    """The image files of a gradio message's content (parts {"type": "file", "file": {"path": ...}} as gradio 6
    hands them over, or {"path": ...} as the tab shows them), in order."""
    parts = content if isinstance(content, (list, tuple)) else [content]
    out = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        f = part.get("file") if part.get("type") == "file" else part if "path" in part else None
        path = f.get("path") if isinstance(f, dict) else None
        if path and (
            str(f.get("mime_type") or "").startswith("image/") or Path(path).suffix.lower() in IMAGE_SUFFIXES
        ):
            out.append(str(path))
    return out


def readable_image(path: str) -> bool:
    """Whether the page may hand this image to a model: a file gradio received (its upload folder) or one in the
    workspace. A history is sent back by the browser, so a path in it is the client's word, never read blindly."""
    from gradio.utils import get_upload_folder

    try:
        p = Path(path).resolve()
    except (OSError, RuntimeError):
        return False
    if p.is_file() and p.is_relative_to(Path(get_upload_folder()).resolve()):
        return True
    try:
        return workspace_path(str(p)).is_file()
    except ValueError:
        return False


def conversation(hist: list | None) -> list[dict]:
    """A pane's history as the worker takes it: [{role, content: str, images: [path]}] alternating user / assistant
    (images only on user turns that carried some). A turn whose reply failed is left out (user and reply), the
    empty-reply note is an empty reply."""
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
        images = [p for p in images_of(content) if readable_image(p)] if role == "user" else []
        turns.append({"role": role, "content": text, **({"images": images} if images else {})})
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
    image: str | None,
    base_hist: list,
    tuned_hist: list,
    system: str = "",
    temperature: float = 0.7,
    top_p: float = 0.9,
    max_new: int = 128,
    stop: str = "",
    lang: str = "en",
) -> Iterator[tuple[list, list, str]]:
    """Stream the reply of each loaded model to the same prompt (and image), base first then tuned; each pane's
    model sees the whole conversation of its own pane. A pane whose model reads text only says so for a message with
    an image instead of answering it. Yields (base history, tuned history, prompt, image)."""
    prompt = prompt or ""
    image = image if image and readable_image(image) else None
    if (not prompt.strip() and not image) or not workers():
        yield base_hist, tuned_hist, prompt, image
        return
    options = {
        "system": system or "",
        "max_new_tokens": int(max_new or 128),
        "temperature": float(temperature or 0.0),
        "top_p": float(top_p or 1.0),
        "stop": parse_stop(stop),
    }
    hists = {"base": _shown(base_hist), "tuned": _shown(tuned_hist)}
    shown = [{"path": image}, prompt] if image and prompt else [{"path": image}] if image else prompt
    for slot, worker in list(workers().items()):
        hist = hists[slot]
        messages = conversation(hist) + [{"role": "user", "content": prompt, **({"images": [image]} if image else {})}]
        hist += [{"role": "user", "content": shown}, {"role": "assistant", "content": ""}]
        if image and not getattr(worker, "vision", False):
            hist[-1] = {"role": "assistant", "content": f"{ERROR_MARK}{t('chat_text_only', lang)}"}
            yield hists["base"], hists["tuned"], "", None
            continue
        for text in worker.generate(messages, options, lang):
            hist[-1] = {"role": "assistant", "content": text}
            yield hists["base"], hists["tuned"], "", None
    yield hists["base"], hists["tuned"], "", None


def _shown(hist: list | None) -> list[dict]:
    """gradio's history back as plain {role, content} messages for the Chatbot to show again: text, and a user
    turn's images before it."""
    out = []
    for m in hist or []:
        if isinstance(m, dict) and m.get("role") in ("user", "assistant"):
            text, images = text_of(m.get("content")), images_of(m.get("content"))
            content = [*({"path": p} for p in images), *([text] if text else [])] if images else text
            out.append({"role": m["role"], "content": content})
    return out


PICK_JS = (
    "(source, picks, template, model) => { const p = (picks || {})[source];"
    " return p ? [p[0], p[1] || model] : [template, model]; }"
)


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    models = model_choices()
    with gr.Row(equal_height=False):
        model = texts.add(
            gr.Dropdown(
                models,
                value=default_model(models),
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
        # answers as plain text: a model's "~" or "*" is not Markdown (two "~" struck the text between them through)
        plain = {"height": 320, "render_markdown": False}
        base_box = texts.add(gr.Chatbot(label=t("base", lang), elem_id="chat-base", **plain), "base")
        tuned_box = texts.add(gr.Chatbot(label=t("tuned", lang), elem_id="chat-tuned", **plain), "tuned")
    with gr.Row(equal_height=False):
        prompt = texts.add(gr.Textbox(label=t("prompt", lang), scale=4, elem_id="chat-prompt"), "prompt")
        image = texts.add(
            gr.Image(
                type="filepath",
                sources=["upload", "clipboard"],
                label=t("chat_image", lang),
                height=140,
                scale=1,
                min_width=200,
                elem_id="chat-image",
            ),
            "chat_image",
        )
        ctx.redraw.append(image)
        send_btn = texts.add(gr.Button(t("send", lang), scale=1, elem_id="chat-send"), "send", "value")
        clear_btn = texts.add(gr.Button(t("chat_clear", lang), scale=0, elem_id="chat-clear"), "chat_clear", "value")

    picks = gr.JSON({}, visible=False, elem_id="chat-picks")  # each Tuned choice's template and base (picks_for)

    def _choices(lang_):
        choices = tuned_choices(lang_)
        return gr.update(choices=choices), gr.update(choices=model_choices()), picks_for(choices)

    ctx.tab.select(_choices, [ctx.lang], [tuned, model, picks], queue=False)
    # A picked run brings its chat template and its own base model: the panes compare the tuned model with its base.
    # Applied in the browser from ``picks``, before any later click is sent (a Load clicked at once once loaded the
    # model picked before: the server's answer came after); a typed source the list does not hold asks the server.
    tuned.input(None, [tuned, picks, template, model], [template, model], js=PICK_JS, queue=False)

    def _typed(source, known):
        if source in (known or {}):
            return gr.update(), gr.update()
        return template_for(source), gr.update(value=b) if (b := base_for(source)) else gr.update()

    tuned.input(_typed, [tuned, picks], [template, model], queue=False)
    # "loading …" while the models load (the last "✅ loaded" stayed through a 26-s load of another model)
    load_btn.click(lambda lang_: "⏳ " + t("chat_loading", lang_), [ctx.lang], [status], queue=False).then(
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
        [prompt, image, base_box, tuned_box, system, temperature, top_p, max_new, stop, ctx.lang],
        [base_box, tuned_box, prompt, image],
    ).then(lambda: (gr.update(interactive=True), gr.update(interactive=True)), None, [send_btn, prompt], queue=False)
    ctx.on_load.append((restore, [ctx.lang], [model, tuned, template, status]))
    ctx.on_lang.append((status_in, [status, ctx.lang], [status]))
    # Under the chat: mark an answer, write a better one, train on what was said (studio.tabs.chat_feedback).
    chat_feedback.build(ctx, base_box, tuned_box, system, workers, conversation)
    ctx.shared["chat"] = dict(model=model, tuned=tuned, template=template, prompt=prompt, status=status,
                              base_box=base_box, tuned_box=tuned_box, system=system)  # fmt: skip
