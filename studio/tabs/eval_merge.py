"""The Evaluate tab's *Merge the best*: the best row by the measure picked merged into its base with the Export
tab's merge job (``engine.export.merge_jobs``), a row that does not beat the base (``engine.eval.verdict``) only after
a second click, *Merge anyway*; the merge then followed to its end, as the Export tab follows it
(``studio.tabs.export`` describes each state), so the line under the button says merged, failed or cancelled once it
has.

Light: gradio, engine.jobs.evals, engine.eval.verdict, engine.export.merge_jobs, studio.follow, studio.tabs.export.
"""

from __future__ import annotations

from typing import Any

from engine.core import workspace
from engine.eval import verdict
from engine.eval.messages import message
from engine.export import merge_jobs as merge_jobs
from engine.jobs import evals
from studio import follow
from studio.i18n.localize import localize, localize_error
from studio.i18n.page import t


def start_merge(shown, column, lang="en", confirmed: str | None = None) -> tuple[str, str | None, str | None]:
    """(what the page says, the row it asks about, the merge's run id). A best row that does not beat the base (its
    interval on the good side) is merged only once confirmed: ``confirmed`` is the row the page asked about."""
    if not shown:
        return "❌ " + t("eval_nothing", lang), None, None
    try:
        job = evals.EvalJob(shown)
        results = job.results() or {}
        label = verdict.best(results, column) if column else None
        target = next((x for x in job.plan["targets"] if x["label"] == label), None)
        if target is None or not target.get("adapter"):
            why = verdict.summary(results, {}, column) if column and label is None else []
            return "❌ " + ("  \n".join(localize(m, lang) for m in why) or t("eval_nothing", lang)), None, None
        verdicts = verdict.compare(results, job.predictions())  # once per click: the tab's cache is the view's
        if not verdict.beats_base(verdicts, label, column) and confirmed != label:
            has_base = any(r["kind"] == "base" for r in results.get("rows", []))
            versus = verdict.versus(verdict.verdict_of(verdicts, label, column), column, has_base)
            said = "⚠ " + localize(message("eval.merge_ask", label=label, column=column, versus=versus), lang)
            return said, label, None
        out = workspace.exports_dir() / f"{job.plan['run_id']}-{label}"
        merge = merge_jobs.start_merge([target["adapter"]], str(out))
    except Exception as exc:  # noqa: BLE001 - the exporter's own message
        return f"❌ {localize_error(exc, lang)}", None, None
    return t("export_merging", lang, out=out, id=merge.run_id), None, merge.run_id


def merge_best(shown, column, lang="en", confirmed: str | None = None) -> tuple[str, str | None]:
    """``start_merge`` without the merge's id: (what the page says, the row it asks about)."""
    said, asked, _ = start_merge(shown, column, lang, confirmed)
    return said, asked


def merge_click(shown, column, lang="en", confirmed: str | None = None):
    """The page's answer to *Merge the best* and *Merge anyway*: what it says, the row asked about, the *Merge
    anyway* button shown while it asks, the merge followed (its id) and its timer."""
    import gradio as gr

    said, asked, merge_id = start_merge(shown, column, lang, confirmed)
    return said, asked, gr.update(visible=asked is not None), merge_id, follow.timer(merge_id)


def merge_tick(merge_id, lang="en"):
    """(the merge still followed or None, the line under the button): the Export tab's words for each state, so a
    finished merge says merged, where and how it verified."""
    from studio.tabs import export

    followed, said, _ = export.poll(merge_id, lang)
    return followed, said


def build(ctx: Any, shown: Any, column: Any) -> None:
    """*Merge anyway* and the line under the buttons, in a row of their own; ``ctx.shared["eval_merge_btn"]`` is the
    *Merge the best* button the caller laid out beside the measure picker."""
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    merge_btn = ctx.shared["eval_merge_btn"]
    with gr.Row():
        merged = gr.Markdown(elem_id="eval-merged")
        merge_anyway = texts.add(
            gr.Button(
                t("eval_merge_anyway", lang), variant="stop", visible=False, elem_id="eval-merge-anyway", scale=0
            ),
            "eval_merge_anyway",
            "value",
        )
    asked = gr.State(None)  # the row *Merge anyway* would merge: the one the page asked about
    merging = gr.State(None)  # the merge followed until it ends
    timer = gr.Timer(1.0, active=False)  # on while the merge is followed (studio.follow)
    outs = [merged, asked, merge_anyway, merging, timer]
    # the line itself answers (a progress timer in it read "0.0s" while the verdicts were computed)
    merge_btn.click(merge_click, [shown, column, ctx.lang], outs, show_progress="hidden")
    merge_anyway.click(merge_click, [shown, column, ctx.lang, asked], outs, show_progress="hidden")
    timer.tick(
        lambda *a: follow.from_tick(merge_tick(*a)),
        [merging, ctx.lang],
        [merging, merged, timer],
        show_progress="hidden",
        queue=False,
    )
