"""Evaluate tab: pick a finished run, its checkpoints, the base, the data and the measures; Start; follow the
evaluation; read the report: the table (best row marked by a measure the user picks, with one click to merge it:
a row that does not beat the base is merged only after a second click, *Merge anyway*), each tuned row against the
base (difference, 95% interval, better / worse / no clear difference: ``engine.eval.verdict``), the models'
degenerate answers, a chart of each measure over training steps beside the training loss, and side-by-side
answers (all rows, rows that differ, rows that got worse).

Light: gradio + engine.jobs.evals / engine.eval.report and studio/*. The evaluation is a
run of the registry (engine.jobs.evals), so the page keeps only its run id: a reload or a restarted studio attaches
to the newest one. The merge of the best checkpoint is the Export tab's merge job, started and followed by
``studio.tabs.eval_merge``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from engine.core import belongings, workspace
from engine.data import dataset_registry as datasets
from engine.eval import report
from engine.eval.spec import DEFAULT_JUDGE_PROMPT, DEFAULT_MEASURES, DEFAULT_PAIRWISE_PROMPT, DEMO_TASK
from engine.jobs import evals
from engine.runs import checkpoints
from engine.runs import registry as runs
from studio import backend, file_offers, follow
from studio.i18n.localize import localize, localize_error
from studio.i18n.page import t
from studio.tabs.eval_view import measure_choices, report_view

SHOW = ("all", "differ", "worse")


def run_choices() -> list[tuple[str, str]]:
    """Completed training runs, newest first, as (label, run id)."""
    return [
        (f"{r.id} · {r.name}" if r.name and r.name != r.id else r.id, r.id)
        for r in backend.training_runs()
        if getattr(r, "status", "") == "completed"
    ]


def picked_run(current: str | None, choices: list[tuple[str, str]]) -> str | None:
    """The run the picker shows: the one picked while it is still offered, else the newest completed run (an empty
    picker on the first visit read as "no run to evaluate")."""
    ids = [value for _, value in choices]
    return current if current in ids else (ids[0] if ids else None)


def report_file(shown: str | None) -> Any:
    """The evaluation's ``report.html`` as a download button (studio.file_offers: offered from gradio's temp folder
    behind the login; the workspace itself is not served), hidden while there is none."""
    import gradio as gr

    try:
        source = evals.EvalJob(shown).run_dir / "report.html" if shown else None
    except Exception:  # noqa: BLE001 - a deleted evaluation: no report
        source = None
    offered = file_offers.offer(source, str(shown)) if source is not None else None
    return gr.update(value=offered, visible=offered is not None)


def checkpoint_choices(run_id: str | None) -> list[str]:
    if not run_id:
        return []
    try:
        rec = runs.get(run_id, refresh_status=False)
        ckpts = checkpoints.newest_first(Path(rec.output_dir) / "checkpoints")
    except Exception:  # noqa: BLE001 - an unknown run has no checkpoints to show
        return []
    return [c.name for c in reversed(ckpts)]


def data_choices(lang: str = "en") -> list[tuple[str, str]]:
    try:
        names = belongings.usable_datasets(workspace.data_dir(), datasets.read_dataset_info(workspace.data_dir()))
    except Exception:  # noqa: BLE001 - no registry: only the held-out rows
        names = []
    return [(t("eval_held_out", lang), ""), *[(n, n) for n in names]]


def held_out_of(run_id: str | None) -> tuple[bool, list[str]]:
    """Whether the run kept held-out rows (data.val_size > 0 or data.eval_datasets), and the datasets it trained on.
    A run that cannot be read counts as having them: the evaluation's own check then names the problem."""
    try:
        data = runs.get(run_id, refresh_status=False).load_spec().data
    except Exception:  # noqa: BLE001 - no run picked, or its spec unreadable
        return True, []
    return bool(data.val_size or data.eval_datasets), list(data.datasets)


def data_for_run(run_id: str | None, lang: str = "en") -> tuple[list[tuple[str, str]], str, str]:
    """The data picker for a run: (choices, value, note). With held-out rows they are the default; a run without
    them (the Train form's default val_size is 0) would fail there, so the default is the first dataset it trained
    on, and the note under the picker says what scores on those rows measure and how to keep held-out rows. (A
    dataset merely named differently may hold the same rows, so none is offered as "unseen".)"""
    choices = data_choices(lang)
    has_held_out, trained = held_out_of(run_id)
    if has_held_out or not run_id:
        return choices, "", ""
    names = [value for _, value in choices if value]
    value = next((n for n in trained if n in names), names[0] if names else "")
    return [(label, v) for label, v in choices if v], value, t("eval_no_held_out", lang).format(run=run_id, data=value)


def on_run(run_id: str | None, lang: str = "en"):
    import gradio as gr

    names = checkpoint_choices(run_id)
    choices, value, note = data_for_run(run_id, lang)
    return gr.update(choices=names, value=names), gr.update(choices=choices, value=value, info=note or None)


def spec_from_form(
    run_id,
    ckpts,
    base,
    final,
    data,
    measures,
    limit,
    max_new,
    batch,
    tasks="",
    url="",
    model="",
    key_env="",
    prompt="",
    pairwise=False,
) -> dict:
    """The evaluation spec from the form (lm-eval tasks: comma-separated; the judge: only when it is measured)."""
    steps = [int(c.rsplit("-", 1)[1]) for c in ckpts or []]
    spec: dict = {
        "models": {"run": run_id, "base": bool(base), "final": bool(final), "checkpoints": steps or "none"},
        "data": {"source": "dataset", "datasets": [data]} if data else {"source": "held_out"},
        "measures": list(measures or []),
        "generation": {"max_new_tokens": int(max_new or 64), "batch_size": int(batch or 8)},
    }
    if limit:
        spec["data"]["limit"] = int(limit)
    if "lm_eval" in spec["measures"]:
        spec["lm_eval"] = {"tasks": [x.strip() for x in (tasks or "").split(",") if x.strip()]}
    if "judge" in spec["measures"]:
        judge = {"base_url": url or None, "model": model or None, "api_key_env": key_env or None}
        if pairwise:  # each model's answers against the base's, which is then evaluated too
            spec["models"]["base"] = True
            judge |= {"mode": "pairwise"} | ({"pairwise_prompt": prompt} if prompt else {})
        elif prompt:
            judge["prompt"] = prompt
        spec["judge"] = judge
    return spec


def judge_prompt_for(pairwise: bool, prompt: str) -> str:
    """The prompt box when the judge's mode changes: the other mode's default in place of this one's (a prompt the
    user wrote stays)."""
    if pairwise and prompt.strip() in ("", DEFAULT_JUDGE_PROMPT.strip()):
        return DEFAULT_PAIRWISE_PROMPT
    if not pairwise and prompt.strip() in ("", DEFAULT_PAIRWISE_PROMPT.strip()):
        return DEFAULT_JUDGE_PROMPT
    return prompt


def start(run_id, ckpts, base, final, data, measures, limit, max_new, batch, *rest) -> tuple[str | None, str]:
    """(evaluation run id or None, message). Every problem named by its field, before anything runs. ``rest``: the
    lm-eval tasks and the judge's URL, model, key variable, prompt and pairwise switch (as ``spec_from_form`` takes
    them), then the language."""
    *extra, lang = rest or ("en",)
    if not run_id:
        return None, "❌ " + t("eval_pick_run", lang)
    try:
        spec = spec_from_form(run_id, ckpts, base, final, data, measures, limit, max_new, batch, *extra)
        rid = evals.submit_eval(spec)
    except Exception as exc:  # EvalError: (field, message) pairs
        problems = getattr(exc, "problems", None)
        if problems:
            return None, "❌ " + "  \n".join(f"`{f}`: {localize(m, lang)}" for f, m in problems)
        return None, f"❌ {localize_error(exc, lang)}"
    return rid, t("eval_started", lang, id=rid)


def status_text(status: dict, lang: str = "en") -> str:
    state = status["state"]
    line = (
        t(f"eval_state_{state}", lang) if state in ("queued", "running", "finished", "failed", "cancelled") else state
    )
    prog = status.get("progress") or {}
    if state == "running" and prog:
        eta = prog.get("eta_seconds")
        line += f" · {localize(status['detail'], lang)} · {prog.get('progress', 0):.0%}"
        line += t("eval_eta", lang, s=int(eta)) if eta else ""
    if status.get("error"):
        line += f"  \n{localize(status['error'], lang)}"
    return f"**{status['run_id']}** · {line}"


_FOLLOWED: dict[str, evals.EvalJob] = {}  # evaluation id -> its job, read on from where the last tick stopped
_FOLLOWING = threading.Lock()  # two sessions' timers on one job: one reads its events at a time


def followed(job_id: str) -> evals.EvalJob:
    """The shown evaluation's job, kept between the timer's ticks so its events are read incrementally (each
    ``poll`` still asks the registry, with the owner check, for the run's state)."""
    job = _FOLLOWED.get(job_id)
    if job is None:
        job = evals.EvalJob(job_id)
        _FOLLOWED.clear()  # one evaluation is followed at a time per studio: the newest asked for
        _FOLLOWED[job_id] = job
    return job


def poll(job_id, column, show, lang="en"):
    """(job id, status, table, charts, best, verdicts, side by side, column choices) while an evaluation runs or
    shows."""
    import gradio as gr

    if not job_id:
        return (None, *[gr.skip()] * 7)
    try:
        with _FOLLOWING:
            job = followed(job_id)
            status = job.poll()
    except Exception as exc:  # noqa: BLE001 - a deleted run: say so once
        return None, f"❌ {localize_error(exc, lang)}", *[gr.skip()] * 6
    view = report_view(status["results"], job.predictions(), column, show, lang, job_id)
    cols = (status["results"] or {}).get("columns") or []
    choice = gr.update(choices=cols, value=column if column in cols else report.default_column(cols)) if cols else None
    keep = job_id if status["state"] in ("queued", "running") else None
    return keep, status_text(status, lang), *view, choice if choice is not None else gr.skip()


def show_last(column, show, lang="en"):
    """On load: the newest evaluation (attached when it still runs)."""
    import gradio as gr

    found = evals.list_evals(limit=1)
    if not found:
        return None, "", gr.skip(), "", "", "", gr.skip(), gr.skip(), None
    out = poll(found[0].run_id, column, show, lang)
    return (found[0].run_id if out[0] else None, *out[1:], found[0].run_id)


def refresh_view(shown, column, show, lang="en"):
    out = poll(shown, column, show, lang)
    return out[1:7]


def cancel(job_id, lang="en") -> tuple[None, str]:
    if not job_id:
        return None, ""
    return None, status_text(evals.EvalJob(job_id).cancel(), lang)


def evaluations_text(run_id: str | None, lang: str = "en") -> str:
    """The run's evaluations (its ``evaluations.jsonl``) for the Runs tab: id, models, report file."""
    import json

    if not run_id:
        return ""
    try:
        folder = Path(runs.get(run_id, refresh_status=False).run_dir)
        lines = (folder / "evaluations.jsonl").read_text(encoding="utf-8").splitlines()
        found = [json.loads(x) for x in lines if x.strip()]
    except Exception:  # noqa: BLE001 - no evaluation yet
        return ""
    items = "; ".join(
        f"`{e['eval_id']}` ({', '.join(e.get('targets', []))}) {Path(e['run_dir']) / 'report.html'}" for e in found
    )
    return "\n\n" + t("eval_of_run", lang, items=items) if items else ""


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with gr.Row(equal_height=False):
        # no value here: the tab's select picks the newest completed run as the page opens it
        run = texts.add(gr.Dropdown(run_choices(), label=t("eval_run", lang), scale=3, elem_id="eval-run"), "eval_run")
        refresh = texts.add(gr.Button(t("refresh", lang), size="sm", scale=0, min_width=90), "refresh", "value")
    ckpts = texts.add(
        gr.CheckboxGroup([], label=t("eval_checkpoints", lang), elem_id="eval-ckpts"), "eval_checkpoints"
    )
    with gr.Row():
        base = texts.add(gr.Checkbox(True, label=t("eval_base", lang), elem_id="eval-base"), "eval_base")
        final = texts.add(gr.Checkbox(True, label=t("eval_final", lang), elem_id="eval-final"), "eval_final")
    with gr.Row():
        data = texts.add(
            gr.Dropdown(data_choices(lang), value="", label=t("eval_data", lang), elem_id="eval-data"), "eval_data"
        )
        limit = texts.add(
            gr.Number(0, precision=0, minimum=0, label=t("eval_limit", lang), elem_id="eval-limit"), "eval_limit"
        )
    measures = texts.add(
        gr.CheckboxGroup(
            measure_choices(lang), value=DEFAULT_MEASURES, label=t("eval_measures", lang), elem_id="eval-measures"
        ),
        "eval_measures",
    )
    with texts.add(gr.Accordion(t("eval_more", lang), open=False, elem_id="eval-more"), "eval_more"):
        tasks = texts.add(gr.Textbox(DEMO_TASK, label=t("eval_tasks", lang), elem_id="eval-tasks"), "eval_tasks")
        with gr.Row():
            j_url = texts.add(gr.Textbox(label=t("eval_judge_url", lang), elem_id="eval-judge-url"), "eval_judge_url")
            j_model = texts.add(
                gr.Textbox(label=t("eval_judge_model", lang), elem_id="eval-judge-model"), "eval_judge_model"
            )
            j_key = texts.add(gr.Textbox(label=t("eval_judge_key", lang), elem_id="eval-judge-key"), "eval_judge_key")
        j_pair = texts.add(
            gr.Checkbox(False, label=t("eval_judge_pairwise", lang), elem_id="eval-judge-pairwise"),
            "eval_judge_pairwise",
        )
        j_prompt = texts.add(
            gr.Textbox(DEFAULT_JUDGE_PROMPT, lines=6, label=t("eval_judge_prompt", lang), elem_id="eval-judge-prompt"),
            "eval_judge_prompt",
        )
        j_pair.change(judge_prompt_for, [j_pair, j_prompt], [j_prompt], queue=False)
    with gr.Row():
        max_new = texts.add(
            gr.Number(64, precision=0, minimum=1, label=t("eval_max_new", lang), elem_id="eval-max-new"),
            "eval_max_new",
        )
        batch = texts.add(
            gr.Number(8, precision=0, minimum=1, label=t("eval_batch", lang), elem_id="eval-batch"), "eval_batch"
        )
    with gr.Row():
        start_btn = texts.add(
            gr.Button(t("eval_start", lang), variant="primary", elem_id="eval-start"), "eval_start", "value"
        )
        cancel_btn = texts.add(gr.Button(t("cancel", lang), variant="stop", elem_id="eval-cancel"), "cancel", "value")
    with gr.Row():
        status = gr.Markdown(elem_id="eval-status")
        report_btn = texts.add(
            gr.DownloadButton(t("eval_report", lang), visible=False, size="sm", scale=0, elem_id="eval-report"),
            "eval_report",
        )
    job, shown = gr.State(None), gr.State(None)
    with gr.Row():
        column = texts.add(
            gr.Dropdown([], label=t("eval_best_by", lang), elem_id="eval-best-by", scale=1), "eval_best_by"
        )
        best = gr.Markdown(elem_id="eval-best")
        ctx.shared["eval_merge_btn"] = texts.add(
            gr.Button(t("eval_merge_best", lang), elem_id="eval-merge", scale=0), "eval_merge_best", "value"
        )
    from studio.tabs import eval_merge

    eval_merge.build(ctx, shown, column)
    # an empty table shows its real header, not gradio's placeholder "1 2 3" (issue 45 item 20)
    table = gr.Dataframe(
        headers=[t("eval_col_model", lang), t("eval_col_step", lang)],
        interactive=False,
        wrap=True,
        elem_id="eval-table",
    )
    verdicts = gr.Markdown(elem_id="eval-verdict")
    charts = gr.HTML(elem_id="eval-charts")
    show = texts.add(
        gr.Radio(
            [(t(f"eval_show_{s}", lang), s) for s in SHOW],
            value="all",
            label=t("eval_show", lang),
            elem_id="eval-show",
        ),
        "eval_show",
    )
    sbs = gr.Dataframe(
        headers=[t(f"eval_col_{k}", lang) for k in ("prompt", "reference", "base", "tuned")],
        interactive=False,
        wrap=True,
        column_widths=["25%", "25%", "25%", "25%"],  # a long question must not push the answers off to the right
        elem_id="eval-sbs",
    )
    timer = gr.Timer(1.0, active=False)  # on while an evaluation is followed (studio.follow)

    def _runs(current):
        choices = run_choices()
        return gr.update(choices=choices, value=picked_run(current, choices))

    refresh.click(_runs, [run], [run])
    ctx.tab.select(
        lambda current, lang_: (_runs(current), gr.update(choices=data_choices(lang_))),
        [run, ctx.lang],
        [run, data],
        queue=False,
    )
    shown.change(report_file, [shown], [report_btn], queue=False)
    status.change(report_file, [shown], [report_btn], queue=False)
    run.change(on_run, [run, ctx.lang], [ckpts, data], queue=False)
    start_btn.click(
        lambda *a: follow.with_timer(start(*a)),
        [
            run,
            ckpts,
            base,
            final,
            data,
            measures,
            limit,
            max_new,
            batch,
            tasks,
            j_url,
            j_model,
            j_key,
            j_prompt,
            j_pair,
            ctx.lang,
        ],
        [job, status, timer],
    ).then(lambda j: j, [job], [shown])
    cancel_btn.click(lambda *a: follow.with_timer(cancel(*a)), [job, ctx.lang], [job, status, timer])
    timer.tick(
        lambda *a: follow.from_tick(poll(*a)),
        [job, column, show, ctx.lang],
        [job, status, table, charts, best, verdicts, sbs, column, timer],
        show_progress="hidden",
        queue=False,
    )
    view_in, view_out = [shown, column, show, ctx.lang], [status, table, charts, best, verdicts, sbs]

    def show_choices(lang_):
        return gr.update(choices=[(t(f"eval_show_{s}", lang_), s) for s in SHOW]), gr.update(
            choices=measure_choices(lang_)
        )

    for comp in (column, show):
        comp.change(refresh_view, view_in, view_out, queue=False)
    # the table's and the charts' words follow the page's language too
    ctx.on_lang.append((refresh_view, view_in, view_out))
    ctx.on_lang.append((show_choices, [ctx.lang], [show, measures]))
    from studio.tabs.eval_chat import wire_open_in_chat

    wire_open_in_chat(ctx, sbs, shown, column, show)
    ctx.on_load.append(
        (
            lambda *a: follow.with_timer(show_last(*a)),
            [column, show, ctx.lang],
            [job, status, table, charts, best, verdicts, sbs, column, shown, timer],
        )
    )
