"""The Chat tab's feedback section: a person marks a pane's last answer good or bad, or writes a better one, and
trains on what was said. The rows go to the workspace's feedback sets (engine.data.feedback: LLaMA-Factory's
ranking pairs for DPO, kto-tagged answers for KTO, registered so the Datasets tab lists them); Train on this
feedback submits a LoRA run on the model that answered (engine.runs.registry.submit) and hands its id to the run
picker, so the dashboard follows it.

Which model answered is read from the pane's worker (studio.tabs.chat's ``workers``: the asking account's slots,
handed to ``build`` with the tab's ``conversation``: this module never imports studio.tabs.chat, which builds it).
Light: engine.data.feedback, engine.runs, engine.export's reading of a source.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.data import feedback
from engine.export import checks as xp
from engine.export import sources
from engine.runs import registry as runs
from engine.spec.schema import SpecError
from studio.i18n.localize import localize_error, localize_problems
from studio.i18n.page import STRINGS, t
from studio.tabs import chat_remote
from studio.tabs.chat_sources import _short, _trained_source, template_for, tuned_target

PANES = ("tuned", "base")


def counts_text(lang: str = "en") -> str:
    """What the asking account's feedback sets hold, as the section's status line says it."""
    found = feedback.counts()
    names = {"dpo": feedback.set_name("dpo"), "kto": feedback.set_name("kto")}
    return t("fb_counts", lang, pairs=found.pairs, good=found.good, bad=found.bad, **names)


def _said(head: str, lang: str) -> str:
    return f"{head}\n\n{counts_text(lang)}"


def chatted_of(worker: Any) -> feedback.Chatted:
    """The model a pane's worker runs, as the feedback rows record it: the folder loaded and its adapter (a server:
    what it serves), the run it comes from, the chat template. ValueError for a source outside the workspace."""
    source = str(getattr(worker, "source", "") or worker.model)
    served = chat_remote.served_source(source) if chat_remote.is_served(source) else None
    target = tuned_target(served) if served else None
    if target is not None:
        model, adapter, template = target[0], target[1] or "", template_for(served)
    else:
        model, adapter, template = str(worker.model), str(worker.adapter or ""), str(worker.template or "auto")
    src = _trained_source(source)
    run_dir = Path(src.run_dir) if src is not None and src.run_dir else None
    run_id = run_dir.name if run_dir is not None and sources.run_id_folder(run_dir.name) == run_dir else ""
    return feedback.Chatted(model=model, adapter=adapter, run_id=run_id, template=template, source=source)


def _pane_turns(pane: str, base_hist: list, tuned_hist: list, workers: Callable, conversation: Callable) -> tuple:
    """(the pane's conversation as its worker took it, the worker), or (None, None) when the pane has no model."""
    worker = workers().get(pane)
    if worker is None:
        return None, None
    return conversation(tuned_hist if pane == "tuned" else base_hist), worker


def mark(
    good: bool,
    pane: str,
    base_hist: list,
    tuned_hist: list,
    system: str,
    workers: Callable,
    conversation: Callable,
    lang: str = "en",
) -> str:
    """👍 / 👎: the pane's last answer kept as a kto row; what the section says then."""
    turns, worker = _pane_turns(pane, base_hist, tuned_hist, workers, conversation)
    if worker is None:
        return _said("❌ " + t("fb_no_model", lang), lang)
    try:
        feedback.add_mark(turns, good, chatted_of(worker), system or "")
    except ValueError as exc:
        return _said("❌ " + localize_error(exc, lang), lang)
    return _said("✅ " + t("fb_marked_good" if good else "fb_marked_bad", lang, pane=t(pane, lang)), lang)


def answer_of(pane: str, base_hist: list, tuned_hist: list, conversation: Callable) -> str:
    """The pane's last answer: Edit answer… puts it in the box to be rewritten."""
    turns = conversation(tuned_hist if pane == "tuned" else base_hist)
    return str(turns[-1]["content"]) if turns and turns[-1]["role"] == "assistant" else ""


def save_edit(
    better: str,
    pane: str,
    base_hist: list,
    tuned_hist: list,
    system: str,
    workers: Callable,
    conversation: Callable,
    lang: str = "en",
) -> tuple[str, Any]:
    """Save the better answer: a preference pair (chosen: the person's, rejected: the model's). (what the section
    says, the box: emptied once saved, kept as typed when refused)."""
    turns, worker = _pane_turns(pane, base_hist, tuned_hist, workers, conversation)
    if worker is None:
        return _said("❌ " + t("fb_no_model", lang), lang), better
    try:
        feedback.add_edit(turns, better, chatted_of(worker), system or "")
    except ValueError as exc:
        return _said("❌ " + localize_error(exc, lang), lang), better
    return _said("✅ " + t("fb_saved_pair", lang, pane=t(pane, lang)), lang), ""


def training_model(chatted: feedback.Chatted) -> tuple[dict, bool]:
    """(the spec's model group a run on the feedback trains, whether the chatted adapter is left behind). A full
    model (a base, a merged export, a full fine-tune's weights) is trained itself. An adapter cannot be continued (a
    run spec has no starting adapter): the run trains a new LoRA on the adapter's base, as the run that made the
    adapter named it (its model group: revision, hub, dtype kept)."""
    if not chatted.adapter:
        return {"name_or_path": chatted.model}, False
    if chatted.run_id:
        try:
            spec = sources.resolve_source(chatted.run_id).spec or {}
        except xp.ExportError:
            spec = {}
        if isinstance(spec.get("model"), dict) and spec["model"].get("name_or_path"):
            return dict(spec["model"]), True
    return {"name_or_path": chatted.model}, True


def train(lang: str = "en") -> tuple[str, str | None]:
    """Train on this feedback: a DPO run on the pairs (KTO on marks alone) from the model of the newest row. (what
    the section says, the run id or None)."""
    found = feedback.counts()
    stage = feedback.stage_for(found)
    if stage is None:
        return "❌ " + t("fb_not_enough", lang), None
    chatted = feedback.last_chatted(stage)
    if chatted is None:
        return "❌ " + t("fb_not_enough", lang), None
    model, left = training_model(chatted)
    spec = feedback.train_spec(stage, model, chatted.template)
    try:
        run_id = runs.submit(spec, name=spec["output"]["run_name"])
        status = str(getattr(runs.get(run_id), "status", ""))
    except SpecError as exc:
        lines = [f"- `{path}`: {text}" for path, text in localize_problems(exc.problems, lang)]
        return "\n".join(["❌ " + t("fb_refused", lang), *lines]), None
    except Exception as exc:  # the registry refuses (queue full, disk): its own words
        return f"❌ {t('fb_refused', lang)} {localize_error(exc, lang)}", None
    word = t(f"st_{status}", lang) if f"st_{status}" in STRINGS else status
    rows = found.pairs if stage == "dpo" else found.marks
    dataset = feedback.set_name(stage)
    text = "✅ " + t(
        "fb_started", lang, id=run_id, status=word, stage=stage.upper(), rows=rows, dataset=dataset,
        model=_short(model["name_or_path"]),
    )  # fmt: skip
    return text + ("\n\n" + t("fb_adapter_note", lang, run=chatted.run_id) if left else ""), str(run_id)


def build(ctx: Any, base_box: Any, tuned_box: Any, system: Any, workers: Callable, conversation: Callable) -> None:
    """The section under the chat: which pane, 👍 / 👎, the better answer, the counts, Train on this feedback."""
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value

    def pane_choices(code: str) -> list[tuple[str, str]]:
        return [(t(p, code), p) for p in PANES]

    with gr.Row(equal_height=True):
        pane = texts.add(
            gr.Radio(pane_choices(lang), value="tuned", label=t("fb_pane", lang), elem_id="chat-fb-pane", scale=2),
            "fb_pane",
        )
        good = texts.add(gr.Button(t("fb_good", lang), elem_id="chat-fb-good", scale=1), "fb_good", "value")
        bad = texts.add(gr.Button(t("fb_bad", lang), elem_id="chat-fb-bad", scale=1), "fb_bad", "value")
    with gr.Row(equal_height=False):
        better = texts.add(
            gr.Textbox(label=t("fb_better", lang), lines=3, scale=4, elem_id="chat-fb-better"), "fb_better"
        )
        with gr.Column(scale=1, min_width=180):
            edit = texts.add(gr.Button(t("fb_edit", lang), elem_id="chat-fb-edit"), "fb_edit", "value")
            save = texts.add(gr.Button(t("fb_save", lang), elem_id="chat-fb-save"), "fb_save", "value")
    status = gr.Markdown(elem_id="chat-fb-status")
    with gr.Row():
        train_btn = gr.Button(t("fb_train", lang), elem_id="chat-fb-train", scale=0, min_width=320)
        texts.add(train_btn, "fb_train", "value")
    train_msg = gr.Markdown(elem_id="chat-fb-train-msg")

    panes = [pane, base_box, tuned_box]
    good.click(lambda *a: mark(True, *a[:-1], workers, conversation, a[-1]), [*panes, system, ctx.lang], [status])
    bad.click(lambda *a: mark(False, *a[:-1], workers, conversation, a[-1]), [*panes, system, ctx.lang], [status])
    edit.click(lambda p, b, tu: answer_of(p, b, tu, conversation), panes, [better], queue=False)
    save.click(
        lambda text, *a: save_edit(text, *a[:-1], workers, conversation, a[-1]),
        [better, *panes, system, ctx.lang],
        [status, better],
    )

    def _train(lang_):
        msg, run_id = train(lang_)
        picker = gr.update(choices=ctx.run_choices(lang_), value=run_id) if run_id else gr.update()
        return msg, picker, counts_text(lang_)

    train_btn.click(_train, [ctx.lang], [train_msg, ctx.run_picker, status])
    ctx.tab.select(counts_text, [ctx.lang], [status], queue=False)
    ctx.on_load.append((counts_text, [ctx.lang], [status]))
    ctx.on_lang.append(
        (lambda code: (gr.update(choices=pane_choices(code)), counts_text(code)), [ctx.lang], [pane, status])
    )
