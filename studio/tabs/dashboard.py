"""Live dashboard of the selected run: curves, progress with ETA, status, log tail, failure cause.

Light: gradio + studio.monitor. A ``gr.Timer`` (0.5 s while the run goes on, 3 s otherwise) ticks from the open
page; each tick reads only the new lines of the run's files from the offsets kept in this session's state. Nothing on
the server depends on ticks.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.machine import hardware
from engine.runs import records, watchdog
from engine.runs import registry as runs
from studio import alerts, backend, follow, grpo_panel, monitor, monitor_text
from studio.i18n.localize import localize
from studio.i18n.page import STRINGS, t
from studio.tabs import runs as runs_tab

PLOTS = ("loss", "lr", "grad_norm", "tps", "gpu_mem", "gpu_util", "stage_rewards", "stage_accuracy")
TICK_S, IDLE_TICK_S = 0.5, 3.0  # the timer while the picked run goes on / with no run or an ended one
VIEW_TTL_S = 300  # longer than a hidden tab's slowest timer (browsers throttle it to about once a minute)


def select_run(run_id: str | None) -> dict:
    """A fresh view (offset 0) for the chosen run: a reload or a second tab lands here too."""
    if not run_id:
        return monitor.new_view(None, None)
    return monitor.new_view(run_id, backend.run_dir(run_id))


def status_word(status: str, lang: str = "en") -> str:
    """A registry status in the page's language, as the run picker's labels and the dashboard's header say it."""
    return t(f"st_{status}", lang) if f"st_{status}" in STRINGS else status


def run_choices(lang: str = "en") -> list[tuple[str, str]]:
    """The run picker's (label, id) pairs: "id · name · status" of every training run."""
    out = []
    for r in backend.training_runs():
        word = status_word(str(getattr(r, "status", "")), lang)
        out.append((f"{r.id} · {getattr(r, 'name', '') or ''} · {word}".replace(" ·  ·", " ·"), str(r.id)))
    return out


def run_state(run_id: str | None, lang: str = "en") -> tuple[str, str]:
    """(status, detail) from one read of the run's record: its status, or "stalled (no progress for ...)" in the
    page's language for a running run whose trainer stopped writing (engine.runs.watchdog); a cluster run's Slurm job
    ("Slurm job 12: pending (Resources)") as the detail."""
    if not run_id:
        return "", ""
    try:
        record = runs.get(run_id)
        status = watchdog.status_text(record)
        text = localize(status, lang) if getattr(status, "key", "") else str(status or "")
    except Exception:  # registry missing or the id unknown: the events still tell the story
        return "", ""
    return text, runs_tab.cluster_text(record, lang)


def run_status(run_id: str | None, lang: str = "en") -> str:
    text, job = run_state(run_id, lang)  # as one text: "running · Slurm job 12: pending (Resources)"
    return f"{status_word(text, lang)} · {job}" if job else text


def machine_has_gpu() -> bool:
    """Whether this machine has GPUs (engine.machine.hardware, detected once per process)."""
    try:
        return bool(hardware.detect().has_gpu)
    except Exception:  # no driver tools, a broken library: the page says CPU rather than fail
        return False


def resource_titles(gpu: bool, lang: str = "en") -> dict[str, dict[str, Any]]:
    """The resource plots' labels and y ranges by what they show: GPU memory and utilisation (0-100 %) when the run
    has GPU samples (or, before its first sample, when the machine has GPUs); else the run's RAM and CPU load, whose
    percent is per core (a run on four cores reads up to 400 %), so no upper limit."""
    if gpu:
        return {"mem": {"label": t("gpu_mem", lang)}, "util": {"label": t("gpu_util", lang), "y_lim": [0, 100]}}
    return {"mem": {"label": t("ram_mem", lang)}, "util": {"label": t("cpu_load", lang), "y_lim": [0, None]}}


def axis_choices(lang: str) -> list[tuple[str, str]]:
    """The x-axis radio's (label, value) pairs: the label in the page's language, the value what the frames read."""
    return [(t(f"ax_{a}", lang), a) for a in ("step", "epoch", "tokens")]


def lagged_colors(view: dict, plot: str, frame: Any, fixed: dict[str, str] | None = None) -> dict[str, str] | None:
    """The colour map to send with ``frame``: the map of the frame this plot was sent before (None the first time),
    and the frame's own map remembered for the next send.

    gradio's plot draws itself anew when its ``color_map`` changes, but with the value it held before this update
    (it applies the new value after the other properties): a map sent with the frame whose series it names drew the
    previous frame's series, and the new ones without a stroke. Sent one update later, the map names the series of
    the value the plot holds when it redraws. A changed map asks for SETTLE_TICKS more sends (see ``tick``)."""
    shown = view.setdefault("colors_shown", {})
    before, now = shown.get(plot), monitor.color_map(frame, "curve", fixed)
    shown[plot] = now
    if now != before:
        view["settle"] = SETTLE_TICKS
    return before


def limits(view: dict, plot: str, frame: Any, x: str = "x", y: str = "value", y_fixed: list | None = None) -> dict:
    """The plot's ``x_lim`` / ``y_lim`` for ``frame`` (``monitor.axis_limits``: a range around a lone value, which
    Vega would tick "8.900000"; Vega's own otherwise). A changed range draws the plot anew, with the value it held
    before this update (as a changed colour map does, see ``lagged_colors``): it asks for SETTLE_TICKS more sends."""
    shown = view.setdefault("limits_shown", {})
    now = monitor.axis_limits(frame, x, y, y_fixed)
    if shown.get(plot) != now:
        view["settle"] = SETTLE_TICKS
    shown[plot] = now
    return now


def render(view: dict, axis: str, smoothing: float, log_scale: bool, lang: str = "en") -> list[Any]:
    """Everything the dashboard shows, from the view: plots, progress, status, log tail, failure. Remembers in the
    view the colours it sent (``lagged_colors``)."""
    import gradio as gr

    axis = axis or "step"
    x_title = t(f"ax_{axis}", lang)
    loss = monitor.loss_frame(view, axis, float(smoothing or 0), bool(log_scale), lang)
    run_alerts = view.get("alerts") or []
    loss = alerts.marks(run_alerts, loss, lambda step: _step_x(view, step, axis), lang)
    mem, util, note = monitor.gpu_frames(view, lang)
    gpu = monitor.shows_gpu(view)
    res = resource_titles(machine_has_gpu() if gpu is None else gpu, lang)
    text, job = view.get("status_seen") or run_state(view.get("run_id"), lang)
    status = monitor_text.status_line(view, text, lang, job)
    if note:
        status += f"  \n<small>{note}</small>"
    failure = monitor_text.failure_text(view, lang)
    seconds, curve = t("ax_seconds", lang), t("ax_curve", lang)

    def series(key: str, title: str) -> Any:
        frame = monitor.series_frame(view, key, axis)
        return gr.update(value=frame, x_title=x_title, y_title=t(title, lang), **limits(view, key, frame))

    return [
        gr.update(
            value=loss,
            x_title=x_title,
            y_title=t("ax_log_loss" if log_scale else "w_loss", lang),
            color_title=curve,
            color_map=lagged_colors(
                view, "loss", loss, {**monitor.loss_colors(lang), **alerts.mark_colors(run_alerts, lang)}
            ),
            **limits(view, "loss", loss),
        ),
        series("learning_rate", "lr"),
        series("grad_norm", "grad_norm"),
        series("tokens_per_second", "tps"),
        gr.update(
            value=mem,
            x_title=seconds,
            color_title=curve,
            color_map=lagged_colors(view, "mem", mem),
            **{**res["mem"], **limits(view, "mem", mem, "t", "MiB")},
        ),
        gr.update(
            value=util,
            x_title=seconds,
            y_title=t("ax_percent", lang),
            color_title=curve,
            color_map=lagged_colors(view, "util", util),
            **{**res["util"], **limits(view, "util", util, "t", "percent", res["util"].get("y_lim"))},
        ),
        monitor_text.progress_html(view, lang),
        status if view.get("run_id") else t("no_run", lang),
        monitor_text.log_tail(view["run_dir"]) if view.get("run_dir") else "",
        gr.update(value=failure, visible=bool(failure)),
        *(stage_plot(view, plot, axis, lang) for plot in monitor.STAGE_PLOTS),
        gr.update(value=alerts.table_markdown(run_alerts, lang), visible=bool(run_alerts)),
        *grpo_updates(view, lang),
    ]


def grpo_updates(view: dict, lang: str) -> list[Any]:
    """Stage grpo's plots (rewards, KL, completion length) and sample table (studio.grpo_panel), hidden otherwise."""
    import gradio as gr

    on = grpo_panel.shown(view)
    plots = [
        gr.update(
            value=frame,
            visible=on,
            label=t(key, lang),
            x_title=t("ax_step", lang),
            y_title=t("ax_value", lang),
            color_title=t("ax_curve", lang),
            **limits(view, key, frame),
        )
        for key, frame in ((key, make(view, lang)) for key, make in GRPO_PLOTS.items())
    ]
    samples = grpo_panel.samples_frame(view, lang)
    return [*plots, gr.update(value=samples, visible=on and not samples.empty, label=t("grpo_samples", lang))]


GRPO_PLOTS = {
    "grpo_rewards": grpo_panel.rewards_frame,
    "grpo_std": grpo_panel.std_frame,
    "grpo_kl": grpo_panel.kl_frame,
    "grpo_length": grpo_panel.length_frame,
}
GRPO_OUTPUTS = len(GRPO_PLOTS) + 1


def _step_x(view: dict, step: float, axis: str) -> float:
    """Where a step lies on the chosen x axis (the alert marks)."""
    return float(step) if axis == "step" else monitor.x_of_step(view, step, axis)


def stage_plot(view: dict, plot: str, axis: str, lang: str) -> Any:
    """The update of a preference stage's plot (dpo / kto / rm: the trainer's rewards and margin, its accuracy),
    hidden for runs without its figures."""
    import gradio as gr

    frame = monitor.stage_frame(view, plot, axis, lang)
    # The label goes with every update: an update that shows the plot (``visible``) can reach the browser after the
    # language switch relabelled it and bring back the label the plot was built with.
    return gr.update(
        value=frame,
        visible=not frame.empty,
        label=t(f"stage_{plot}", lang),
        x_title=t(f"ax_{axis}", lang),
        y_title=t("ax_value", lang),
        color_title=t("ax_curve", lang),
        color_map=lagged_colors(view, f"stage_{plot}", frame, monitor.stage_colors(lang)),
        **limits(view, f"stage_{plot}", frame, y_fixed=STAGE_Y_LIM.get(plot)),
    )


# Ticks that send the whole dashboard again after a plot's series changed or the run ended: the colours that name
# the new series go out with the next send (``lagged_colors``), and a plot drawn anew in the browser draws
# asynchronously: a value that arrives meanwhile goes to the plot being replaced. At the end of a run no later value
# would come to replace a lost one, and the curves stayed empty or short of their last points until a reload.
SETTLE_TICKS = 2
STAGE_Y_LIM = {"accuracy": [0, 1]}  # a share: its plot spans 0 to 1 whatever the run's values


def tick(view: dict, run_id: str | None, axis: str, smoothing: float, log_scale: bool, lang: str) -> list[Any]:
    """Timer handler: re-select on a new run id, read new lines, redraw only when something changed (and on the
    SETTLE_TICKS ticks after a plot's series changed or the run ended)."""
    import gradio as gr

    fresh = not view or view.get("run_id") != run_id
    settling = False
    if fresh:
        held = view or {}  # what the page's plots hold (colours, ranges): the new run's frames replace it
        view = select_run(run_id)
        view["colors_shown"], view["limits_shown"] = held.get("colors_shown", {}), held.get("limits_shown", {})
    changed = monitor.read_new(view) or fresh
    status = list(run_state(run_id, lang))
    if status != view.get("status_seen"):  # the header's status moved: the run picker's labels move with it, read
        view["status_seen"] = status  # now and shown by the same ``show`` (they followed 3 s apart and disagreed)
        view["choices"] = [list(c) for c in run_choices(lang)]
        changed = True
    ended = bool(view.get("terminal"))
    if ended != view.get("ended_seen", False):
        view["ended_seen"], view["settle"] = ended, SETTLE_TICKS
        settling = True
    elif view.get("settle"):
        view["settle"] -= 1
        changed = settling = True
    log = monitor_text.log_tail(view["run_dir"]) if view.get("run_dir") else ""
    log_changed = log != view.get("log_seen")
    if not changed and not log_changed:
        return [view, *[gr.skip()] * len(OUTPUT_NAMES)]
    view["log_seen"] = log
    if not changed:  # only the log moved
        view.setdefault("sent", {})[LOG_OUTPUT] = fingerprint(log)
        return [view, *[gr.skip()] * LOG_OUTPUT, log, *[gr.skip()] * (len(OUTPUT_NAMES) - LOG_OUTPUT - 1)]
    outs = render(view, axis, smoothing, log_scale, lang)
    full = fresh or settling or bool(view.get("settle"))  # the settle ticks send everything (see SETTLE_TICKS)
    return [view, *(remember_sent(view, outs) if full else only_changed(view, outs))]


# render's outputs, in order: the grpo ones are GRPO_PLOTS' and the sample table (grpo_updates)
OUTPUT_NAMES = ("loss", "lr", "grad_norm", "tps", "mem", "util", "progress", "status", "log", "failure", "rewards")
OUTPUT_NAMES += ("accuracy", "alerts", *GRPO_PLOTS, "grpo_samples")
LOG_OUTPUT = OUTPUT_NAMES.index("log")


def fingerprint(value: Any) -> Any:
    """What an output sends, comparable between ticks: a frame by its rows' hashes, an update by its fields."""
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        rows = pd.util.hash_pandas_object(value, index=True).to_numpy().tobytes()
        return ("frame", tuple(value.columns), hashlib.sha1(rows).hexdigest())
    if isinstance(value, dict):
        return tuple(sorted((k, fingerprint(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(fingerprint(v) for v in value)
    return repr(value)


def remember_sent(view: dict, outs: list[Any]) -> list[Any]:
    """Send every output, and remember what each sent."""
    view["sent"] = {i: fingerprint(o) for i, o in enumerate(outs)}
    return outs


def only_changed(view: dict, outs: list[Any]) -> list[Any]:
    """``gr.skip()`` for each output that would send what it sent last: every update redraws its component in the
    browser, and a page following a run sent all eighteen (the hidden plots of other stages too) twice a second."""
    import gradio as gr

    sent = view.setdefault("sent", {})
    kept = []
    for i, out in enumerate(outs):
        now = fingerprint(out)
        kept.append(gr.skip() if sent.get(i) == now else out)
        sent[i] = now
    return kept


def poll(view: dict, stamp: int, run_id: str | None, axis: str, smoothing: float, log_scale: bool, lang: str):
    """The timer's event: ``tick``, with the outputs kept in the view and ``stamp`` moved on only when there is
    something to show. The charts are outputs of ``show`` (on the stamp's change) alone, so a tick that finds nothing
    new touches no chart: a page with every chart an output of every tick redrew them all twice a second and kept a
    CPU core busy in the browser, even with no run (a language switch then took ~20 s)."""
    import gradio as gr

    view, *outs = tick(view, run_id, axis, smoothing, log_scale, lang)
    # Every TICK_S while the picked run goes on (its events or its registry status, which ends after them); every
    # IDLE_TICK_S with no run or an ended one (its last frames are drawn over the settle ticks either way).
    active = (view.get("status_seen") or [""])[0] in records.ACTIVE
    want = TICK_S if view.get("run_id") and (not view.get("terminal") or active) else IDLE_TICK_S
    interval = follow.retime(view, want)
    if all(o == gr.skip() for o in outs):
        return view, gr.skip(), interval
    # A tick before the last one's ``show`` ran (a busy page): keep what that one found and this one does not resend.
    pending = view.get("to_show") or []
    view["to_show"] = [p if o == gr.skip() else o for o, p in zip(outs, pending)] if pending else outs
    return view, (stamp or 0) + 1, interval


def show(view: dict) -> list[Any]:
    """What the last ``poll`` found, on the page; last, the run picker's labels when the run's status moved (one
    answer: the picker and the header change together)."""
    import gradio as gr

    outs = (view or {}).pop("to_show", None)
    choices = (view or {}).pop("choices", None)
    picker = gr.update(choices=[tuple(c) for c in choices]) if choices is not None else gr.skip()
    return [view, *(outs or [gr.skip()] * len(OUTPUT_NAMES)), picker]


def redraw(view: dict, axis: str, smoothing: float, log_scale: bool, lang: str) -> list[Any]:
    view = view or monitor.new_view(None, None)
    return [view, *remember_sent(view, render(view, axis, smoothing, log_scale, lang))]


SCROLL_JS = """(text) => { const el = document.querySelector('#run-log textarea');
  if (el) { el.scrollTop = el.scrollHeight; } return []; }"""


def build(ctx: Any) -> None:
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    with gr.Group(elem_id="dashboard"):
        with gr.Row(equal_height=False):
            ctx.run_picker.render()
            axis = texts.add(
                gr.Radio(axis_choices(lang), value="step", label=t("x_axis", lang), scale=2, elem_id="x-axis"),
                "x_axis",
            )
            smoothing = texts.add(gr.Slider(0, 0.99, value=0.6, step=0.01, label=t("smooth", lang), scale=2), "smooth")
            log_scale = texts.add(gr.Checkbox(label=t("log_scale", lang), scale=1, elem_id="log-scale"), "log_scale")
        status = gr.Markdown(t("no_run", lang), elem_id="run-status")
        progress = gr.HTML(monitor_text.progress_html(monitor.new_view(None, None)), elem_id="run-progress")
        failure = texts.add(
            gr.Textbox(label=t("failure", lang), visible=False, lines=6, elem_id="run-failure"), "failure"
        )
        alert_list = gr.Markdown("", visible=False, elem_id="run-alerts")
        with gr.Row():
            loss = texts.add(
                gr.LinePlot(
                    x="x",
                    y="value",
                    color="curve",
                    label=t("loss", lang),
                    height=260,
                    elem_id="plot-loss",
                    elem_classes="studio-plot",
                ),
                "loss",
            )
            lr = texts.add(gr.LinePlot(x="x", y="value", label=t("lr", lang), height=260, elem_id="plot-lr"), "lr")
        with gr.Row():
            gn = texts.add(
                gr.LinePlot(x="x", y="value", label=t("grad_norm", lang), height=220, elem_id="plot-grad-norm"),
                "grad_norm",
            )
            tps = texts.add(gr.LinePlot(x="x", y="value", label=t("tps", lang), height=220, elem_id="plot-tps"), "tps")
        with gr.Row():  # shown by render() when the run logs a preference stage's figures (dpo, kto, rm)
            rewards, accuracy = (
                texts.add(
                    gr.LinePlot(
                        x="x",
                        y="value",
                        color="curve",
                        label=t(f"stage_{plot}", lang),
                        height=240,
                        visible=False,
                        elem_id=f"plot-stage-{plot}",
                        elem_classes="studio-plot",
                        **({"y_lim": STAGE_Y_LIM[plot]} if plot in STAGE_Y_LIM else {}),
                    ),
                    f"stage_{plot}",
                )
                for plot in monitor.STAGE_PLOTS
            )
        with gr.Row():  # shown by render() for stage grpo (studio.grpo_panel)
            grpo_plots = [
                gr.LinePlot(
                    x="x",
                    y="value",
                    color="curve",
                    label=t(key, lang),
                    height=240,
                    visible=False,
                    elem_id=f"plot-{key.replace('_', '-')}",
                    elem_classes="studio-plot",
                )
                for key in GRPO_PLOTS
            ]
        grpo_samples = gr.Dataframe(
            grpo_panel.samples_frame({}, lang),  # its real header while empty (issue 45 item 20)
            label=t("grpo_samples", lang),
            visible=False,
            wrap=True,
            max_height=420,
            elem_id="grpo-samples",
        )
        # GPU plots on a machine with GPUs, RAM and CPU load without: render() relabels them by the run's samples
        # (and in the page's language: they are not in ``texts``, whose switch would put the GPU titles back).
        res = resource_titles(machine_has_gpu(), lang)
        with gr.Row():
            mem = gr.LinePlot(
                x="t",
                y="MiB",
                color="curve",
                height=220,
                x_title=t("ax_seconds", lang),
                elem_id="plot-gpu-mem",
                elem_classes="studio-plot",
                **res["mem"],
            )
            util = gr.LinePlot(
                x="t",
                y="percent",
                color="curve",
                height=220,
                x_title=t("ax_seconds", lang),
                elem_id="plot-gpu-util",
                elem_classes="studio-plot",
                **res["util"],
            )
        log = texts.add(
            gr.Textbox(label=t("log_tail", lang), lines=12, max_lines=12, elem_id="run-log", buttons=["copy"]),
            "log_tail",
        )
    # Each tick stores the view again, so it lives while the page polls; a client that stopped polling without
    # closing the page (a script, a dropped connection) gives its view back after VIEW_TTL_S. A page that comes back
    # starts a fresh view, read again from the run's folder. (A closed page's state gradio keeps for an hour.)
    view = gr.State(monitor.new_view(None, None), time_to_live=VIEW_TTL_S)
    # 0.5 s: an event lands on the page within ~1 s at p95 (ticks that find nothing new cost one small read).
    timer = gr.Timer(TICK_S)
    outs = [loss, lr, gn, tps, mem, util, progress, status, log, failure, rewards, accuracy, alert_list]
    outs += [*grpo_plots, grpo_samples]
    # Moved on by a tick that found something to show; its change shows it. A component, not a gr.State: gradio's
    # page fires a State's change only for queued events, and the tick is not queued. Mounted but never seen.
    stamp = gr.Number(0, precision=0, container=False, elem_id="dash-stamp", elem_classes=["studio-offscreen"])
    timer.tick(
        poll,
        [view, stamp, ctx.run_picker, axis, smoothing, log_scale, ctx.lang],
        [view, stamp, timer],
        show_progress="hidden",
        queue=False,
        api_name="tick",  # a script follows a run as the page does: /tick, then /show for what it found
    )
    stamp.change(show, [view], [view, *outs, ctx.run_picker], show_progress="hidden", queue=False, api_name="show")
    gr.on(
        [axis.change, smoothing.release, log_scale.change],
        redraw,
        [view, axis, smoothing, log_scale, ctx.lang],
        [view, *outs],
        show_progress="hidden",
        queue=False,
    )
    ctx.on_lang.append((redraw, [view, axis, smoothing, log_scale, ctx.lang], [view, *outs]))
    log.change(None, [log], None, js=SCROLL_JS)
    ctx.on_lang.append((lambda lang_: gr.update(choices=axis_choices(lang_)), [ctx.lang], [axis]))
    ctx.timer = timer
