"""Train tab: the generated spec form and its layout, its wiring, the command preview and the template hint. Its
other parts have their own modules: Start and Stop and what they say (studio.tabs.train_actions), the form's
validation (studio.form_validation), the plan panel (studio.tabs.train_plan, train_estimate), presets
(train_presets), the model picker (train_model_search) and the LLaMA-Factory section (train_lf).

Light: gradio, engine.spec.schema, engine.runs.launch, engine.data.templates. Handlers are plain functions of widget
values so tests call them without a browser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.data.templates import suggest_template
from engine.machine import hardware
from engine.runs.launch import preview_text
from engine.spec import rules
from studio import backend, forms
from studio.form_validation import check, to_values, validate_form
from studio.form_validation import colon as _colon
from studio.i18n.localize import localize_problems
from studio.i18n.page import t
from studio.tabs import train_estimate, train_lf, train_model_search, train_rewards
from studio.tabs.train_actions import start_run, stop_finish, stop_now, texts_of
from studio.tabs.train_plan import fit_and_plan, plan_html
from studio.tabs.train_presets import list_presets, load_preset, save_preset


# ----------------------------------------------------------------------------------------------- handlers
def preview(values: dict[str, Any], lang: str = "en") -> str:
    """The exact command(s) and generated configs, as the launcher would write them."""
    spec, errors, _ = check(values)
    if spec is None:
        return "\n".join(f"{p}{_colon(lang)}{m}" for p, m in localize_problems(errors, lang))
    return preview_text(spec)


def propose_template(model: str, lang: str = "en") -> tuple[str | None, str]:
    """(template name or None, hint) from the model folder's tokenizer / config."""
    if not model:
        return None, ""
    try:
        name = suggest_template(model)
    except Exception as exc:
        return None, t("no_template", lang, error=exc)
    name = getattr(name, "name", name)
    return (str(name), f"{t('model_hint', lang)}{_colon(lang)}**{name}**") if name else (None, "")


# ----------------------------------------------------------------------------------------------- layout
def initial_values() -> dict[str, Any]:
    return forms.spec_to_values(backend.demo_defaults())


def model_choices() -> list[str]:
    """The workspace's models, then merged exports (full models): the Chat tab's list of base models."""
    from studio.tabs import chat

    return chat.model_choices()


def picker_choices() -> dict[str, list]:
    arch = sorted({m for mods in rules.ARCH_LINEAR_MODULES.values() for m in mods})
    try:
        gpus = [str(g.index) for g in hardware.detect().gpus]
    except Exception:  # detection must never break the page
        gpus = []
    return {
        "model.name_or_path": model_choices(),
        "data.datasets": backend.registered_datasets(),
        "data.eval_datasets": backend.registered_datasets(),
        "data.template": forms.TEMPLATES,
        "launch.gpus": gpus,
        "method.lora.targets": ["all", *arch],
        "method.oft.targets": ["all", *arch],
        "train.low_rank.targets": ["all", *arch],
    }


def build(ctx: Any) -> None:
    """Lay out the Train tab inside the current Blocks; stores widgets on ``ctx``."""
    import gradio as gr

    texts, lang = ctx.texts, ctx.lang_value
    values = initial_values()
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=420, elem_id="train-form"):
            finder: dict[str, Any] = {}  # the model picker, laid out inside the Model section
            kinds: dict[str, Any] = {}  # the reward kinds' picker, inside the GRPO section
            rewards_text = values.get(train_rewards.REWARDS)
            after = {
                "model": lambda: finder.update(train_model_search.build(texts, lang)),
                "method.grpo": lambda: kinds.update(picker=train_rewards.build_picker(texts, lang, rewards_text)),
            }
            widgets = forms.build_form(values, lang, picker_choices(), texts, after)
            template_hint = gr.Markdown(elem_id="template-hint")
        with gr.Column(scale=2, min_width=320, elem_id="train-actions"):
            problems = gr.Markdown(elem_id="spec-problems")
            with gr.Row():
                start = texts.add(
                    gr.Button(t("start", lang), variant="primary", interactive=False, elem_id="start-btn"),
                    "start",
                    "value",
                )
                stop = texts.add(gr.Button(t("stop", lang), variant="stop", elem_id="stop-btn"), "stop", "value")
            action_msg = gr.Markdown(elem_id="action-msg")
            with gr.Accordion(t("plan", lang), open=True) as plan_acc:
                texts.add(plan_acc, "plan")
                gpu_mem = texts.add(
                    gr.Number(
                        value=None,
                        label=t("plan_gpu_mem", lang),
                        minimum=0,
                        maximum=4096,
                        step=1,
                        elem_id="plan-gpu-mem",
                    ),
                    "plan_gpu_mem",
                )
                with gr.Row():
                    est_gpu = texts.add(
                        gr.Dropdown(
                            choices=train_estimate.gpu_choices(),
                            value=train_estimate.AUTO,
                            label=t("est_gpu", lang),
                            elem_id="est-gpu",
                        ),
                        "est_gpu",
                    )
                    # a text box: gradio's Number shows 0 for "none", which read as a price of $0 (issue 45 item 20)
                    est_price = texts.add(
                        gr.Textbox("", label=t("est_price", lang), max_lines=1, elem_id="est-price"), "est_price"
                    )
                plan_out = gr.HTML(elem_id="plan-panel")
                fit_btn = texts.add(
                    gr.Button(t("autofit", lang), size="sm", elem_id="autofit-btn"), "autofit", "value"
                )
                fit_msg = gr.Markdown()
            with gr.Accordion(t("presets", lang), open=False, elem_id="presets") as preset_acc:
                texts.add(preset_acc, "presets")
                preset_name = texts.add(
                    gr.Textbox(label=t("preset_name", lang), max_lines=1, elem_id="preset-name"), "preset_name"
                )
                with gr.Row():
                    save_btn = texts.add(
                        gr.Button(t("preset_save", lang), size="sm", elem_id="preset-save"), "preset_save", "value"
                    )
                    preset_pick = texts.add(
                        gr.Dropdown(
                            choices=list_presets(),
                            label=t("preset_load", lang),
                            allow_custom_value=False,
                            elem_id="preset-pick",
                        ),
                        "preset_load",
                    )
                preset_msg = gr.Markdown(elem_id="preset-msg")
            lf_widgets = train_lf.build_import(texts, lang)
            ctx.redraw += [lf_widgets["upload"], lf_widgets["acc_upload"]]
            rt_widgets = train_rewards.build(texts, lang)
            with gr.Accordion(t("preview", lang), open=False) as prev_acc:
                texts.add(prev_acc, "preview")
                with gr.Row():
                    prev_btn = texts.add(
                        gr.Button(t("preview", lang), size="sm", elem_id="preview-btn"), "preview", "value"
                    )
                    lf_save = train_lf.build_save_button(texts, lang)
                lf_save_out = train_lf.build_save_output(texts, lang)
                prev_out = texts.add(
                    gr.Code(label=t("preview_out", lang), language="shell", elem_id="preview-out"), "preview_out"
                )

    fields = list(widgets.values())
    flagged = gr.State({"": lang})
    ctx.form = widgets
    ctx.start_btn = start

    validate_outputs = [*fields, problems, start, flagged]
    gr.on(
        [w.change for w in fields],
        validate_form,
        inputs=[*fields, flagged, ctx.lang],
        outputs=validate_outputs,
        show_progress="hidden",
        queue=False,
    )

    confirm = gr.State("")  # the fingerprint of a spec whose identical run was reported: the next Start confirms

    said = gr.State({})  # what Start / Stop said, in every language: a switch shows it in the new one

    def _start(*args):
        *field_args, confirm_, lang_ = args
        msg, run_id, pending = start_run(to_values(field_args), lang_, confirm_)
        picker = gr.update(choices=ctx.run_choices(lang_), value=run_id) if run_id else gr.update()
        return msg, picker, pending, texts_of(msg)

    start.click(_start, [*fields, confirm, ctx.lang], [action_msg, ctx.run_picker, confirm, said])
    # Stop answers at once, then waits while the trainer saves its checkpoint and says where it went.
    stopping = gr.State(None)

    def _stop(run_id, lang_):  # its signals go out in the click's own request (not queued)
        msg, target = stop_now(run_id, lang_)
        return msg, target, texts_of(msg)

    def _stopped(target, lang_):
        msg = stop_finish(target, lang_)
        return msg, texts_of(msg)

    stop.click(_stop, [ctx.run_picker, ctx.lang], [action_msg, stopping, said], queue=False).then(
        _stopped, [stopping, ctx.lang], [action_msg, said]
    ).then(lambda lang_: gr.update(choices=ctx.run_choices(lang_)), [ctx.lang], [ctx.run_picker], queue=False)
    ctx.on_lang.append((lambda said_, lang_: (said_ or {}).get(lang_, gr.skip()), [said, ctx.lang], [action_msg]))

    # The run picker's labels carry each run's status: they follow the runs (checked every few seconds, sent only
    # when a label changed, so an open list is not redrawn for nothing).
    labels = gr.State([])
    watch = gr.Timer(3.0)

    # The picker is an output of the stamp's change only, not of every tick (each event's outputs are re-laid out
    # in the page); the stamp is a hidden component, as the dashboard's (a State's change needs a queued event).
    moved = gr.Number(0, precision=0, container=False, elem_classes=["studio-offscreen"])

    gone = gr.State([])  # runs listed before and no longer (deleted): the picker lets go of one it shows

    def _follow(shown, n, lang_):
        now = [list(c) for c in ctx.run_choices(lang_)]
        if now == shown:
            return gr.skip(), gr.skip(), gr.skip()
        return now, (n or 0) + 1, sorted({c[1] for c in shown or []} - {c[1] for c in now})

    watch.tick(_follow, [labels, moved, ctx.lang], [labels, moved, gone], show_progress="hidden", queue=False)
    moved.change(  # a deleted run's dashboard empties with it (the tick then follows no run)
        lambda now, gone_, run: gr.update(
            choices=[tuple(c) for c in now], **({"value": None} if run in gone_ else {})
        ),
        [labels, gone, ctx.run_picker],
        [ctx.run_picker],
        show_progress="hidden",
        queue=False,
    )

    # Lists that change outside this form (an upload, a merge, a preset saved in another tab): fresh on page load
    # and whenever the list is opened. Choices only: the value is the user's.
    model_box, data_box = widgets["model.name_or_path"], widgets["data.datasets"]
    model_box.focus(lambda: gr.update(choices=model_choices()), None, [model_box], queue=False)
    data_box.focus(lambda: gr.update(choices=backend.registered_datasets()), None, [data_box], queue=False)
    train_model_search.wire(finder, model_box, ctx)
    train_rewards.wire_picker(kinds["picker"], widgets[train_rewards.REWARDS])
    preset_pick.focus(lambda: gr.update(choices=list_presets()), None, [preset_pick], queue=False)

    def _lists():
        return (
            gr.update(choices=model_choices()),
            gr.update(choices=backend.registered_datasets()),
            gr.update(choices=list_presets()),
        )

    ctx.on_load.append((_lists, None, [model_box, data_box, preset_pick]))

    widgets["model.name_or_path"].change(
        _on_model,
        [widgets["model.name_or_path"], widgets["data.template"], ctx.lang],
        [widgets["data.template"], template_hint],
        queue=False,
    )
    # a stage picked by hand renames a run Studio named (the demo's "demo-lora"), never one a person typed
    name_box, proposed = widgets["output.run_name"], gr.State(widgets["output.run_name"].value)
    widgets["method.stage"].input(
        run_name_for_stage,
        [widgets["method.stage"], widgets["method.finetuning"], model_box, name_box, proposed],
        [name_box, proposed],
        queue=False,
    )
    plan_inputs = [*fields, gpu_mem, est_gpu, est_price, ctx.lang]

    def _plan(*a):
        return plan_html(to_values(a[:-4]), a[-4], a[-1], a[-3], a[-2])

    gr.on(
        [
            start.click,
            gpu_mem.change,
            est_gpu.change,
            est_price.change,
            plan_acc.expand,
            *(widgets[p].change for p in _PLAN_PATHS + _ESTIMATE_PATHS if p in widgets),
        ],
        _plan,
        plan_inputs,
        [plan_out],
        show_progress="hidden",
        # an edit made while the plan is still being computed runs after it (gr.on's default, "once", dropped it:
        # a price typed right after a GPU was picked never reached the panel on a busy machine)
        trigger_mode="always_last",
    )
    for hooks in (ctx.on_load, ctx.on_lang):  # the form's checks and the plan, in the page's language
        hooks += [(validate_form, [*fields, flagged, ctx.lang], validate_outputs), (_plan, plan_inputs, [plan_out])]

    def _fit(*a):
        fitted, msg, shown = fit_and_plan(to_values(a[:-4]), a[-4], a[-1], a[-3], a[-2])
        return [*_apply((fitted, msg)), gr.update() if shown is None else shown]

    fit_btn.click(_fit, plan_inputs, [*fields, fit_msg, plan_out])
    prev_btn.click(lambda *a: preview(to_values(a[:-1]), a[-1]), [*fields, ctx.lang], [prev_out])
    train_lf.wire(lf_widgets, lf_save, lf_save_out, fields, ctx.lang, _apply)
    train_rewards.wire(rt_widgets, fields, ctx, to_values)
    save_btn.click(
        lambda name, lang_, *a: (save_preset(name, to_values(a), lang_), gr.update(choices=list_presets())),
        [preset_name, ctx.lang, *fields],
        [preset_msg, preset_pick],
    )
    preset_pick.input(
        lambda name, lang_: _apply(load_preset(name, lang_)), [preset_pick, ctx.lang], [*fields, preset_msg]
    )


_PLAN_PATHS = [
    "model.name_or_path",
    "method.finetuning",
    "method.lora.rank",
    "method.oft.rank",
    "method.oft.block_size",
    "method.quantization.bits",
    "data.cutoff_len",
    "train.per_device_batch_size",
    "train.precision",
    "train.gradient_checkpointing",
    "launch.backend",
    "launch.num_processes",
    "launch.deepspeed.zero_stage",
]

# what the token and step counts and the time estimate also depend on (studio.tabs.train_estimate)
_ESTIMATE_PATHS = [
    "method.stage",
    "data.datasets",
    "data.template",
    "data.max_samples",
    "data.val_size",
    "data.packing",
    "train.num_epochs",
    "train.max_steps",
    "train.gradient_accumulation",
]


def _on_model(model: str, current_template: str, lang: str = "en") -> tuple[Any, str]:
    import gradio as gr

    name, hint = propose_template(model, lang)
    if name and name in forms.TEMPLATES and current_template in ("auto", "", None):
        return gr.update(value=name), hint
    return gr.update(), hint


def run_name_for_stage(stage: str, finetuning: str, model: str, current: str, proposed: str) -> tuple[Any, str]:
    """(the run name's update, the name Studio proposes now) after a stage picked by hand (issue 45 item 16: a GRPO
    run went out named "demo-lora"). A name Studio proposed (the demo's, or the one it gave at the last switch)
    follows the stage and the method: "<model>-<stage>-<method>"; a name a person typed stays."""
    import gradio as gr

    if (current or "") not in ((proposed or ""), ""):
        return gr.update(), proposed
    name = f"{Path(str(model or '')).name or 'run'}-{stage}-{finetuning}".lower()
    return gr.update(value=name), name


def _apply(result: tuple[dict[str, Any] | None, str]) -> list[Any]:
    import gradio as gr

    values, msg = result
    if values is None:
        return [gr.update() for _ in forms.FIELDS] + [msg]
    return [gr.update(value=values[f.path]) for f in forms.FIELDS] + [msg]
