"""Runs tab: history table (a cluster run's Slurm job and state in its own column), overlay of several runs' loss
curves (or, for GRPO runs, their total reward, one reward function's mean or the KL), spec diff, resume / duplicate /
stop / delete, the chosen run's Slurm job, TensorBoard folder and command.

Light: gradio, pandas, yaml, engine.runs (registry, slurm, store, watchdog), engine.core.events, engine.spec.
Everything shown is rebuilt from the registry and run folders.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from engine.core import accounts
from engine.core import events as events_mod
from engine.runs import heal, slurm, watchdog
from engine.runs import registry as runs
from engine.spec import schema as spec_mod
from studio import alerts, backend, forms, monitor, monitor_text
from studio.i18n.localize import localize, localize_error, localize_problems
from studio.i18n.page import STRINGS, t
from studio.tabs import share

NOTICE_DAYS = 7  # a rebuilt registry is said at the top of the tab for this long
COLUMNS = [
    "id",
    "name",
    "status",
    "cluster",
    "method",
    "model",
    "dataset",
    "started",
    "duration",
    "final loss",
    "trainer peak MiB",  # what one training process reported (runs_peak_note says what the page's other figures count)
    "alerts",
]
COLUMN_WIDTHS = ["11%", "9%", "9%", "7%", "8%", "9%", "9%", "7%", "7%", "6%", "7%", "11%"]


def summarize(rec: Any, lang: str = "en") -> dict:
    """One table row from a RunRecord: spec fields, timing, last loss and the trainer's peak memory from the events:
    the most any one rank reported at a log (on a GPU torch's peak allocated, ``max_allocated_mib``; on the CPU the
    process's RSS). The dashboard's RAM chart sums all the run's processes, its GPU chart each GPU's whole use."""
    try:
        spec = yaml.safe_load(rec.spec or "") or {}
    except yaml.YAMLError:
        spec = {}
    method = spec.get("method", {})
    final_loss = peak = None
    run_alerts = []
    for ev in events_mod.read_all(Path(rec.run_dir) / "events.jsonl"):
        p = ev.get("payload") or {}
        if ev["type"] == "alert":
            run_alerts.append(alerts.from_event(ev))
        if ev["type"] == "log" and isinstance(p.get("loss"), (int, float)):
            final_loss = p["loss"]
        for _, mem in monitor._ranks(p.get("memory")):
            value = monitor._first(mem, "max_allocated_mib", "peak_mib", "allocated_mib", "rss_mib")
            if value is not None:
                peak = max(peak or 0, value)
    started, ended = rec.started, rec.ended or (time.time() if rec.status == "running" else None)
    try:  # "stalled (no progress for 5m)" for a running run whose trainer stopped writing
        status = watchdog.status_text(rec)
        status = localize(status, lang) if getattr(status, "key", "") else str(status)
    except Exception:  # noqa: BLE001 - the plain status still tells
        status = rec.status
    return {
        "id": rec.id,
        "name": shown_name(rec, lang),
        "status": status,
        "cluster": cluster_text(rec, lang),
        "method": f"{method.get('stage', '')}/{method.get('finetuning', '')}".strip("/"),
        "model": Path(str(spec.get("model", {}).get("name_or_path", ""))).name,
        "dataset": ", ".join(spec.get("data", {}).get("datasets", []) or []),
        "started": time.strftime("%m-%d %H:%M", time.localtime(started)) if started else "",
        "duration": monitor_text.format_duration(ended - started) if started and ended else "",
        "final loss": round(final_loss, 4) if final_loss is not None else None,
        "trainer peak MiB": round(peak) if peak is not None else None,
        "alerts": alerts.column_text(run_alerts, lang),
        "training": getattr(rec, "training", True),  # not a column: whether the compare picker offers it
    }


JOB_VERBS = ("merge", "export", "serve", "push", "import", "download", "eval")


def shown_name(rec: Any, lang: str = "en") -> str:
    """A run's name on the page. A job's name Studio made ("export demo → gguf", "eval 20261205-…") starts with
    its verb: that verb in the page's language (the name stored is unchanged; a name a person gave stays as it is)."""
    name = str(rec.name or "")
    verb = name.split(" ", 1)[0]
    if lang == "en" or rec.kind != "command" or verb not in JOB_VERBS or " " not in name:
        return name
    return f"{t(f'job_verb_{verb}', lang)} {name.split(' ', 1)[1]}"


def cluster_text(rec: Any, lang: str = "en") -> str:
    """A cluster run's Slurm job, its state and why it waits ("Slurm job 12: pending (Resources)", as
    engine.runs.slurm.describe says it) in the page's language; empty for a run on this machine."""
    if getattr(rec, "kind", "train") != "slurm":
        return ""
    try:
        job = slurm.describe(rec)
    except Exception:  # noqa: BLE001 - an unreadable slurm.json: the status column still tells
        return ""
    return localize(job, lang) if job is not None else ""


def table(lang: str = "en", rows: list[dict] | None = None) -> pd.DataFrame:
    """The run history; headers and statuses in the page's language (the frame's columns are COLUMNS in English).
    ``rows``: the runs' summaries when the caller has them already."""
    rows = [summarize(r, lang) for r in backend.list_runs()] if rows is None else rows
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if lang == "en":
        return frame
    frame["status"] = [_status(s, lang) for s in frame["status"]]
    return frame.rename(columns={c: t("rc_" + c.replace(" ", "_"), lang) for c in COLUMNS})


def registry_notice(lang: str = "en") -> str:
    """The last rebuild of the run registry (damaged or missing at start), for the top of the tab."""
    try:
        found = heal.registry_notice()
    except Exception:  # noqa: BLE001
        return ""
    if not found or time.time() - found[0] > NOTICE_DAYS * 86400:
        return ""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(found[0]))
    return f"⚠️ {when} · {localize(found[1], lang)}"


def _status(status: str, lang: str) -> str:
    return t(f"st_{status}", lang) if f"st_{status}" in STRINGS else status


def compare_choices(rows: list[dict], lang: str = "en") -> list[tuple[str, str]]:
    """The compare picker's (label, run id) pairs: what tells runs apart at a glance, name, status, start and final
    loss, then the id (a name alone may repeat). Training runs only: a merge, evaluation or serve job has no curves
    and no spec to compare."""
    out = []
    for row in rows:
        if not row.get("training", True):
            continue
        loss = f"{t('w_loss', lang)} {row['final loss']}" if row.get("final loss") is not None else ""
        parts = [row.get("name") or "", _status(row["status"], lang), row.get("started") or "", loss, row["id"]]
        out.append((" · ".join(p for p in parts if p), row["id"]))
    return out


def one_choices(runs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The run picker's (label, run id) pairs: the name, then the id (a name alone may repeat)."""
    return [(f"{name} · {rid}" if name else rid, rid) for rid, name in runs]


def run_names(run_ids: list[str]) -> dict[str, str]:
    """The overlay's legend: each run by its name; its id where it has none or shares the name with another."""
    names = {}
    for rid in run_ids:
        try:
            names[rid] = str(runs.get(rid).name or "")
        except Exception:  # an unknown or deleted run: its id
            names[rid] = ""
    taken = [n for n in names.values() if n]
    return {rid: (n if n and taken.count(n) == 1 else f"{n} ({rid})" if n else rid) for rid, n in names.items()}


def _view(rid: str) -> dict:
    view = monitor.new_view(rid, backend.run_dir(rid))
    monitor.read_new(view)
    return view


def _grpo_key(key: str) -> bool:
    return key in ("reward", "kl") or (key.startswith("rewards/") and key.endswith("/mean"))


def figure_label(key: str, lang: str = "en") -> str:
    """The overlay's figure in words: the loss, a GRPO run's total reward, one reward function's mean, the KL."""
    if key == "reward":
        return t("cmp_total_reward", lang)
    if key.startswith("rewards/"):
        return t("cmp_reward_of", lang, name=key[len("rewards/") : -len("/mean")])
    return "KL" if key == "kl" else t("loss", lang)


def figure_choices(run_ids: list[str], lang: str = "en", views: dict | None = None) -> list[tuple[str, str]]:
    """What the overlay can draw for these runs: the loss, and what GRPO runs log (TRL's weighted total reward,
    each reward function's mean, the KL), so runs with the same reward function are compared on it."""
    keys: list[str] = []
    for rid in run_ids or []:
        view = (views or {}).get(rid) or _view(rid)
        for _, figures in view.get("grpo") or []:
            keys += [k for k in figures if _grpo_key(k) and k not in keys]
    ordered = sorted(keys, key=lambda k: (k != "reward", k == "kl", k))
    return [(t("loss", lang), "loss")] + [(figure_label(k, lang), k) for k in ordered]


def overlay(
    run_ids: list[str],
    axis: str = "step",
    lang: str = "en",
    names: dict[str, str] | None = None,
    figure: str = "loss",
    views: dict | None = None,
) -> pd.DataFrame:
    """Loss curves of several runs in one frame, one curve per run named as the legend shows it (``run_names``),
    and its eval loss beside it where it has one; or, with ``figure`` one of ``figure_choices``' GRPO keys, that
    figure of each run over its steps."""
    names = names if names is not None else run_names(run_ids or [])
    columns = ["x", "value", "run"]
    if figure != "loss":
        rows = [
            {"x": float(step), "value": figures[figure], "run": names.get(rid, rid)}
            for rid in run_ids or []
            for step, figures in ((views or {}).get(rid) or _view(rid)).get("grpo") or []
            if figure in figures and step is not None
        ]
        return monitor.plot_frame(rows, columns)
    train, evals = t("se_train", lang), t("se_eval", lang)
    frames = []
    for rid in run_ids or []:
        view = (views or {}).get(rid) or _view(rid)
        f = monitor.loss_frame(view, axis, smoothing=0, lang=lang)
        name = names.get(rid, rid)
        frames.append(f[f["curve"] == train].drop(columns="curve").assign(run=name))
        ev = f[f["curve"] == evals]
        if not ev.empty:
            frames.append(ev.drop(columns="curve").assign(run=t("se_run_eval", lang, run=name)))
    return monitor.plot_frame(pd.concat(frames)[columns] if frames else [], columns)


def spec_diff(run_ids: list[str], lang: str = "en") -> pd.DataFrame:
    """Fields whose values differ between the chosen runs (one column per run)."""
    flat: dict[str, dict[str, Any]] = {}
    for rid in run_ids or []:
        try:
            data = yaml.safe_load(runs.get(rid).spec or "") or {}
        except Exception:  # an unknown or deleted run: nothing to compare
            continue
        flat[rid] = {f.path: forms._get(data, f.path, None) for f in forms.FIELDS}
    field = t("rc_field", lang)
    if len(flat) < 2:
        return pd.DataFrame(columns=[field])
    rows = []
    for f in forms.FIELDS:
        values = [flat[r].get(f.path) for r in flat]
        if any(v != values[0] for v in values[1:]):
            rows.append({field: f.path, **{r: str(v) for r, v in zip(flat, values)}})
    return pd.DataFrame(rows, columns=[field, *flat])


def act(action: str, run_id: str | None, lang: str = "en") -> str:
    """resume / stop / delete one run; the registry's message on refusal."""
    if not run_id:
        return t("select_run_first", lang)
    try:
        if action == "resume":
            new_id = runs.resume(run_id)
            return "✅ " + localize(runs.resume_report(new_id), lang)
        if action == "stop":  # the Train tab's words; returns at once (a frozen run is ended in the background)
            from studio.tabs import train_actions

            return train_actions.stop_now(run_id, lang)[0]
        if action == "first":  # the operator or an admin (a member is refused, naming who may)
            runs.move_first(run_id)
            return "✅ " + t("moved_first", lang, id=run_id)
        if action == "delete":
            report = runs.delete(run_id)
            return "  \n".join(localize(line, lang) for line in report.lines())
    except Exception as exc:  # RunsError: running run, unknown id, ...; SpecError of a resumed run
        problems = getattr(exc, "problems", None)
        if problems and lang == "zh":  # a resumed run that no longer validates: each problem in Chinese
            return (
                "❌ " + t("spec_invalid", lang) + "；".join(f"{p}：{m}" for p, m in localize_problems(problems, lang))
            )
        return f"❌ {localize_error(exc, lang)}"
    return f"unknown action {action}"


def tensorboard_info(run_id: str | None, lang: str = "en") -> str:
    if not run_id:
        return ""
    try:
        out = Path(runs.get(run_id).output_dir)
    except Exception:
        out = backend.run_dir(run_id)
    if out is None:  # a run the page's user cannot see
        return ""
    folder = out / "tensorboard"
    command = f"tensorboard --logdir {shlex.quote(str(folder))} --host 127.0.0.1"
    return f"{t('tb_folder', lang)} `{folder}`\n\n```\n{command}\n```"


def details(run_id: str | None, lang: str = "en") -> str:
    """The chosen run's panel: its Slurm job and state for a cluster run, then its TensorBoard folder and command."""
    if not run_id:
        return ""
    try:
        record = runs.get(run_id)
    except Exception:  # noqa: BLE001 - an unknown or deleted run: no folder or command of it to show
        return ""
    job = cluster_text(record, lang)
    tb = tensorboard_info(run_id, lang)
    from studio.tabs.eval import evaluations_text

    tb += evaluations_text(run_id, lang)
    return f"**{job}**\n\n{tb}" if job else tb


def duplicate_values(run_id: str | None) -> dict | None:
    if not run_id:
        return None
    spec = runs.duplicate(run_id)
    data = spec_mod.spec_to_dict(spec)
    data["output"]["run_name"] = ""
    data["train"]["resume_from"] = None
    return forms.spec_to_values(data)


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    notice = gr.Markdown(registry_notice(lang), elem_id="runs-notice")
    with gr.Row():
        refresh = texts.add(
            gr.Button(t("refresh", lang), size="sm", scale=0, min_width=100, elem_id="runs-refresh"),
            "refresh",
            "value",
        )
    history = texts.add(
        gr.Dataframe(
            table(lang),
            label=t("runs_table", lang),
            interactive=False,
            max_height=300,
            elem_id="runs-table",
            # every column in view at 1280 px (the memory peak and the alerts sat past the right edge): set widths,
            # long ids and names wrap inside their cells
            wrap=True,
            column_widths=COLUMN_WIDTHS,
        ),
        "runs_table",
    )
    # Which processes the table's memory peak counts, beside the dashboard's charts that count others.
    texts.add(gr.Markdown(t("runs_peak_note", lang), elem_id="runs-peak-note"), "runs_peak_note", "value")
    ids = [(r.id, getattr(r, "name", "") or "") for r in backend.list_runs()]
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=360):
            chosen = texts.add(
                gr.Dropdown(
                    compare_choices([summarize(r) for r in backend.list_runs()], lang),
                    multiselect=True,
                    label=t("select_runs", lang),
                    elem_id="runs-compare",
                ),
                "select_runs",
            )
            figure = texts.add(
                gr.Dropdown(
                    figure_choices([], lang), value="loss", label=t("cmp_figure", lang), elem_id="runs-figure"
                ),
                "cmp_figure",
            )
            # titled by _compare (the figure drawn, in the page's language), so not in ``texts``
            curves = gr.LinePlot(
                x="x",
                y="value",
                color="run",
                label=t("loss", lang),
                height=260,
                elem_id="runs-overlay",
                elem_classes="studio-plot",
            )
            diff = texts.add(
                gr.Dataframe(
                    spec_diff([], lang),  # its real header while nothing is compared (issue 45 item 20)
                    label=t("spec_diff", lang),
                    interactive=False,
                    max_height=240,
                    elem_id="runs-diff",
                ),
                "spec_diff",
            )
        with gr.Column(scale=1, min_width=280):
            # the run picker by name as well as id (ids alone told runs apart for no one)
            one = texts.add(gr.Dropdown(one_choices(ids), label=t("run", lang), elem_id="runs-one"), "run")
            with gr.Row():
                resume_btn = texts.add(
                    gr.Button(t("resume", lang), size="sm", elem_id="runs-resume"), "resume", "value"
                )
                dup_btn = texts.add(
                    gr.Button(t("duplicate", lang), size="sm", elem_id="runs-dup"), "duplicate", "value"
                )
            with gr.Row():
                stop_btn = texts.add(gr.Button(t("stop", lang), size="sm", variant="stop"), "stop", "value")
                del_btn = texts.add(
                    gr.Button(t("delete", lang), size="sm", variant="stop", elem_id="runs-del"), "delete", "value"
                )
            first_btn = texts.add(
                gr.Button(t("move_first", lang), size="sm", elem_id="runs-first"), "move_first", "value"
            )
            sharing = share.build(ctx, "runs") if accounts.team_mode() else None
            confirm = texts.add(
                gr.Button(
                    t("confirm_delete", lang), size="sm", variant="stop", visible=False, elem_id="runs-del-confirm"
                ),
                "confirm_delete",
                "value",
            )
            msg = gr.Markdown(elem_id="runs-msg")
            tb = gr.Markdown(elem_id="runs-tb")

    def _refresh(lang_, one_, chosen_):
        """The runs again; a picked run that is gone (deleted here or elsewhere) is unpicked, so its panel empties."""
        rows = [summarize(r, lang_) for r in backend.list_runs()]
        ids_ = [row["id"] for row in rows]
        kept = [r for r in chosen_ or [] if r in ids_]
        return (
            table(lang_, rows),
            gr.update(choices=compare_choices(rows, lang_), **({} if kept == (chosen_ or []) else {"value": kept})),
            gr.update(
                choices=one_choices([(row["id"], row.get("name") or "") for row in rows]),
                **({} if not one_ or one_ in ids_ else {"value": None}),
            ),
            registry_notice(lang_),
        )

    lang_in, after = [ctx.lang, one, chosen], [history, chosen, one, notice]
    gr.on([refresh.click, ctx.tab.select], _refresh, lang_in, after)
    ctx.on_lang.append((_refresh, lang_in, after))
    ctx.on_load.append((_refresh, lang_in, after))

    drawn = gr.State({})

    def _compare(run_ids, figure_, lang_):
        views = {rid: _view(rid) for rid in run_ids or []}
        choices = figure_choices(run_ids, lang_, views)
        figure_ = figure_ if figure_ in [k for _, k in choices] else "loss"
        y_title = t("w_loss", lang_) if figure_ == "loss" else figure_label(figure_, lang_)
        titles = {"x_title": t("ax_step", lang_), "y_title": y_title, "color_title": t("run", lang_)}
        frame = overlay(run_ids, lang=lang_, figure=figure_, views=views)
        after = {"color_map": monitor.color_map(frame, "run"), **monitor.axis_limits(frame, "x", "value")}
        picked = gr.update(choices=choices, value=figure_)
        return (
            gr.update(value=frame, label=figure_label(figure_, lang_), **titles),
            spec_diff(run_ids, lang_),
            after,
            picked,
        )

    # The colours of exactly these runs, and the axes' ranges (one around a lone point, which Vega ticks "8.900000"),
    # go out once the plot holds their curves: a changed map or range draws the plot anew with the value it holds
    # (see monitor.color_map and dashboard.lagged_colors).
    gr.on(
        [chosen.change, figure.input],
        _compare,
        [chosen, figure, ctx.lang],
        [curves, diff, drawn, figure],
    ).then(lambda after: gr.update(**after), [drawn], [curves])
    ctx.on_lang.append((_compare, [chosen, figure, ctx.lang], [curves, diff, drawn, figure]))
    ctx.after_lang.append((lambda after: gr.update(**after), [drawn], [curves]))
    gr.on([one.change, refresh.click], details, [one, ctx.lang], [tb])
    ctx.on_lang.append((details, [one, ctx.lang], [tb]))
    resume_btn.click(lambda r, l_: act("resume", r, l_), [one, ctx.lang], [msg]).then(_refresh, lang_in, after)
    stop_btn.click(lambda r, l_: act("stop", r, l_), [one, ctx.lang], [msg]).then(_refresh, lang_in, after).then(
        details, [one, ctx.lang], [tb]
    )
    first_btn.click(lambda r, l_: act("first", r, l_), [one, ctx.lang], [msg]).then(_refresh, lang_in, after)
    if sharing is not None:
        share.wire(ctx, sharing, one, msg, share.share_run)
    del_btn.click(lambda: gr.update(visible=True), None, [confirm])
    confirm.click(
        lambda r, l_: (act("delete", r, l_), gr.update(visible=False)), [one, ctx.lang], [msg, confirm]
    ).then(_refresh, lang_in, after)

    def _dup(run_id, lang_):
        try:
            values = duplicate_values(run_id)
        except Exception as exc:
            return [gr.update() for _ in forms.FIELDS] + [f"❌ {localize_error(exc, lang_)}"]
        if values is None:
            return [gr.update() for _ in forms.FIELDS] + [t("select_run_first", lang_)]
        done = "✅ " + t("copied_to_form", lang_, id=run_id)
        return [gr.update(value=values[f.path]) for f in forms.FIELDS] + [done]

    dup_btn.click(_dup, [one, ctx.lang], [*ctx.form.values(), msg])
    from studio.tabs import runs_audit, runs_secrets, runs_tokens

    runs_audit.build(ctx)
    if accounts.team_mode():  # the operator's secrets and command line are the server's; accounts keep their own
        runs_secrets.build(ctx)
        runs_tokens.build(ctx)
