"""The Train tab's reward dry run (stage grpo): each reward function of the form runs on N real rows of the dataset
before launch, with the dataset's own answers or the base model's completions, and a table shows every function's
score per row, with each function's mean or the error that names the function, row and value.

Light: pandas and the stdlib. The functions (a user's file among them) run in a subprocess started by
``engine.runs.rewards_try.try_rewards``, never in the page's process; ``studio rewards try`` is the same from the
shell. The page names reward files only in the workspace's reward folder (``engine.core.page_trust``); when the
operator allows it (``STUDIO_PAGE_CODE=on``), the accordion has an upload that puts a file there.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from engine.core import page_trust, workspace
from engine.runs import rewards_try
from studio.form_validation import check, colon
from studio.i18n.localize import localize, localize_problems
from studio.i18n.page import t

MAX_ROWS = 64
COMPLETION_CHARS = 200


def build(texts: Any, lang: str) -> dict:
    """The accordion's widgets: rows, source, the button, the summary and the table."""
    import gradio as gr

    with gr.Accordion(t("rt_title", lang), open=False, elem_id="rewards-try") as acc:
        texts.add(acc, "rt_title")
        with gr.Row():
            rows = texts.add(
                gr.Number(value=8, label=t("rt_rows", lang), minimum=1, maximum=MAX_ROWS, step=1, elem_id="rt-rows"),
                "rt_rows",
            )
            source = texts.add(
                gr.Radio(
                    choices=source_choices(lang),
                    value="answers",
                    label=t("rt_source", lang),
                    elem_id="rt-source",
                ),
                "rt_source",
            )
        button = texts.add(gr.Button(t("rt_run", lang), size="sm", elem_id="rt-run"), "rt_run", "value")
        summary = gr.Markdown(elem_id="rt-summary")
        table = gr.Dataframe(  # its real header while empty (issue 45 item 20), one column per function after a try
            headers=[t("rt_dataset", lang), t("rt_row", lang), t("grpo_completion", lang)],
            interactive=False,
            wrap=True,
            elem_id="rt-table",
        )
        upload = texts.add(
            gr.File(
                label=t("rt_upload", lang),
                file_types=[".py"],
                visible=page_trust.page_code_on(),
                elem_id="rt-upload",
            ),
            "rt_upload",
        )
        uploaded = gr.Markdown(elem_id="rt-uploaded")
    return {
        "rows": rows,
        "source": source,
        "button": button,
        "summary": summary,
        "table": table,
        "upload": upload,
        "uploaded": uploaded,
    }


def upload_reward(file: Any, lang: str = "en") -> str:
    """Put an uploaded .py file into the reward folder (``engine.core.page_trust.save_reward``: only when the
    operator allows it) and say how a reward names it; or why not."""
    if not file:
        return ""
    src = getattr(file, "name", None) or str(file)
    try:
        saved = page_trust.save_reward(src, getattr(file, "orig_name", None) or src)
    except page_trust.PageTrustError as exc:
        return "❌ " + localize(exc.args[0], lang)
    rel = saved.relative_to(workspace.home())
    return "✅ " + t("rt_uploaded", lang, path=str(rel))


def source_choices(lang: str) -> list[tuple[str, str]]:
    return [(t("rt_answers", lang), "answers"), (t("rt_model", lang), "model")]


def try_form(values: dict[str, Any], rows: Any, source: str, lang: str = "en") -> tuple[str, pd.DataFrame | None]:
    """(summary, table) of the dry run of the form's spec; the summary alone when the form is not a grpo spec."""
    spec, errors, _ = check(values)
    if spec is None:
        return "\n".join(f"- {p}{colon(lang)}{m}" for p, m in localize_problems(errors, lang)), None
    if spec.method.stage != "grpo":
        return t("rt_not_grpo", lang, stage=spec.method.stage), None
    n = max(1, min(MAX_ROWS, int(rows or 8)))
    return render(rewards_try.try_rewards(spec, n, source or "answers"), lang)


def render(result: dict, lang: str = "en") -> tuple[str, pd.DataFrame | None]:
    """The subprocess's result as the summary (each function's mean over its scored rows, or its error) and a
    table: dataset, row, completion, one column per function."""
    if "rows" not in result:
        return "❌ " + html.escape(str(result.get("error") or "?"), quote=False), None
    rewards = result["rewards"]
    names = [r["name"] for r in rewards]
    cols = [t("rt_dataset", lang), t("rt_row", lang), t("grpo_completion", lang), *names]
    data = []
    for i, row in enumerate(result["rows"]):
        text = " ".join(str(row.get("completion") or "").split())
        text = text if len(text) <= COMPLETION_CHARS else text[: COMPLETION_CHARS - 1] + "…"
        scores = [None if r["scores"] is None else r["scores"][i] for r in rewards]
        data.append([row["dataset"], row["row"], text, *scores])
    lines = []
    for r in rewards:
        if r["error"]:
            lines.append(f"- ❌ **{r['name']}**{colon(lang)}{html.escape(r['error'], quote=False)}")
            continue
        scored = [v for v in r["scores"] or [] if v is not None]
        mean = f"{sum(scored) / len(scored):.4g}" if scored else "–"
        lines.append(
            f"- ✅ **{r['name']}**{colon(lang)}" + t("rt_mean", lang, mean=mean, n=len(scored), w=f"{r['weight']:g}")
        )
    if result.get("error"):
        lines.append("- ❌ " + html.escape(str(result["error"]), quote=False))
    return "\n".join(lines), pd.DataFrame(data, columns=cols)


def wire(widgets: dict, fields: list, ctx: Any, to_values) -> None:
    """The button runs the dry run of the form as it is now; the source's choices follow the page's language."""
    import gradio as gr

    n = len(fields)
    lang_state = ctx.lang
    ctx.on_lang.append((lambda lang: gr.update(choices=source_choices(lang)), [lang_state], [widgets["source"]]))

    def run(*args):
        summary, frame = try_form(to_values(args[:n]), args[n], args[n + 1], args[n + 2])
        return summary, frame

    widgets["upload"].upload(upload_reward, [widgets["upload"], lang_state], [widgets["uploaded"]])
    widgets["button"].click(
        run,
        [*fields, widgets["rows"], widgets["source"], lang_state],
        [widgets["summary"], widgets["table"]],
    )
