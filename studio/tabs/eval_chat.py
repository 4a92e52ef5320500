"""The Evaluate tab's side-by-side row opened in the Chat tab: the base model in the Base pane, the tuned weights the
row compared (the run's final weights, a checkpoint, an adapter or a model folder) in the Tuned pane, the template
the evaluation used, the row's question in the prompt box, its earlier turns in both panes and its system prompt;
the page switches to Chat and loads both (the Chat tab's own Load, ``studio.tabs.chat.load``), so Send asks both
models that prompt in the row's conversation.

Light: gradio, engine.jobs.evals and engine.eval.report (the evaluation's plan and predictions), studio.tabs.chat.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from studio.i18n.localize import localize_error
from studio.i18n.page import t


def chat_target(shown: str, index: int, show: str = "all", column: str | None = None) -> dict:
    """For row ``index`` of the side-by-side table as shown (filter ``show``, measure ``column``): {model (the base
    model), tuned (a folder the Chat tab's Tuned list takes), template, prompt (the row's question)}."""
    from engine.eval import report
    from engine.jobs import evals
    from engine.runs import registry as runs

    job = evals.EvalJob(shown)
    results, preds = job.results() or {}, job.predictions()
    base, tuned = report.pair(results)
    if not base or not tuned:
        raise ValueError(t("eval_nothing_to_chat", "en"))
    cols = results.get("columns") or []
    column = column if column in cols else next((c for c in ("rouge-l", "bleu-4", "loss") if c in cols), None)
    rows = report.side_by_side(preds, base, tuned, show, column or "rouge-l")
    row = rows[int(index)]
    pred = next(p for p in preds if p["model"] == base and p["index"] == row["index"])
    targets = {x["label"]: x for x in job.plan["targets"]}
    b, tu = targets[base], targets[tuned]
    if tu["kind"] == "final" and job.plan.get("run_id"):
        source = runs.get(job.plan["run_id"], refresh_status=False).run_dir  # the run: the Tuned list's own entry
    else:
        source = tu["adapter"] or tu["model"]
    return {
        "model": b["model"],
        "tuned": str(source),
        "template": job.plan["data"]["template"],
        "prompt": pred.get("question") or pred["prompt"],
        # the row's earlier turns, shown in both panes so Send asks the question in its conversation
        "history": [{"role": m["role"], "content": m["content"]} for m in pred.get("history") or []],
        "system": pred.get("system") or "",
    }


def open_in_chat(shown, index, show, column, lang="en"):
    """(chat model, tuned, template, prompt, chat status, base pane, tuned pane, system prompt, tabs, this tab's
    note). Both panes start with the row's earlier turns."""
    if not shown or index is None:
        return (*[gr.skip()] * 9, "❌ " + t("eval_pick_row", lang))
    try:
        c = chat_target(shown, index, show, column)
    except Exception as exc:  # noqa: BLE001 - a deleted evaluation, a filter that changed under the pick
        return (*[gr.skip()] * 9, f"❌ {localize_error(exc, lang)}")
    loading = t("eval_chat_loading", lang)
    turns = c["history"]
    return (
        *(c["model"], c["tuned"], c["template"], c["prompt"], loading),
        *(list(turns), list(turns), c["system"], gr.Tabs(selected="chat"), ""),
    )


def picked_row(evt: gr.SelectData) -> int | None:
    """The row a click on the side-by-side table picked (gradio passes the click's data: ``evt.index`` is
    [row, column])."""
    index = getattr(evt, "index", None)
    return index[0] if isinstance(index, (list, tuple)) else index


def wire_open_in_chat(ctx: Any, sbs, shown, column, show) -> None:
    """The Open in Chat button under the side-by-side table (a row picked by clicking it)."""
    from studio.tabs import chat

    parts = ctx.shared.get("chat")
    if not parts or ctx.tabs is None:
        return
    picked = gr.State(None)
    with gr.Row():
        btn = ctx.texts.add(gr.Button(t("eval_open_chat", ctx.lang_value), elem_id="eval-open-chat", scale=0),
                            "eval_open_chat", "value")  # fmt: skip
        note = gr.Markdown(elem_id="eval-chat-note")
    sbs.select(picked_row, None, [picked], queue=False)
    outs = [parts[k] for k in ("model", "tuned", "template", "prompt", "status", "base_box", "tuned_box", "system")]
    btn.click(open_in_chat, [shown, picked, show, column, ctx.lang], [*outs, ctx.tabs, note]).then(
        lambda m, tu, tpl, lang_, n: chat.load(m, tu, lang_, tpl) if not n else gr.skip(),
        [parts["model"], parts["tuned"], parts["template"], ctx.lang, note],
        [parts["status"]],
    )
