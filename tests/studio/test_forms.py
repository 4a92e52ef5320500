"""The form is generated from the spec: every field has a widget path, and values round-trip to a valid spec."""

from __future__ import annotations

from pathlib import Path

import yaml

from engine.spec import schema as spec_mod
from studio import form_validation, forms
from studio.i18n import page as page_mod
from studio.tabs import train, train_actions, train_plan


def _demo_values(demo_paths) -> dict:
    return forms.spec_to_values(yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8")))


def test_every_leaf_field_has_metadata_and_a_path():
    paths = [f.path for f in forms.FIELDS]
    assert len(paths) == len(set(paths))
    assert {"model.name_or_path", "method.lora.rank", "train.learning_rate", "launch.deepspeed.zero_stage"} <= set(
        paths
    )
    lr = forms.BY_PATH["train.learning_rate"]
    assert lr.kind == "float" and lr.step == 1e-6 and lr.maximum == 1.0 and lr.label_zh == "学习率"
    assert forms.BY_PATH["launch.backend"].choices == ["single", "ddp", "fsdp", "deepspeed"]
    assert forms.BY_PATH["model.revision"].advanced and not forms.BY_PATH["method.lora.rank"].advanced


def test_lora_variants_and_oft_are_on_the_form():
    """LoRA+, PiSSA, rsLoRA and DoRA in the LoRA section (not hidden under advanced), OFT as a method with its own
    section, GaLore / APOLLO and BAdam settings under Training; each with Chinese help."""
    from studio.i18n.help import HELP_ZH

    for path in ("loraplus_lr_ratio", "pissa_init", "use_rslora", "use_dora"):
        f = forms.BY_PATH[f"method.lora.{path}"]
        assert f.section == "method.lora" and not f.advanced and HELP_ZH[f.path], path
    assert "oft" in forms.BY_PATH["method.finetuning"].choices
    assert {"method.oft.rank", "method.oft.block_size", "method.oft.targets"} <= set(forms.BY_PATH)
    assert {"method.oft", "train.low_rank", "train.badam"} <= set(page_mod.SECTION_TITLES)
    assert {"galore_adamw", "apollo_adamw", "adam_mini", "muon", "badam"} <= set(
        forms.BY_PATH["train.optimizer"].choices
    )
    assert forms.BY_PATH["method.lora.loraplus_lr_ratio"].help_for("zh").startswith("LoRA+")


def test_oft_from_the_form_validates_and_plans_saying_how(demo_paths):
    values = _demo_values(demo_paths)
    values["method.finetuning"] = "oft"
    spec, errors, _ = train.check(values)
    assert errors == [] and spec is not None and spec.method.oft.block_size == 32
    assert "OFT is planned like LoRA" in train.plan_html(values, None, "en")
    assert "OFT 按 LoRA 的方式估算" in train.plan_html(values, None, "zh")
    values["method.oft.rank"] = 4  # and block size 32: one of the two
    _, errors, _ = train.check(values)
    assert [p for p, _ in errors] == ["method.oft.block_size"]


def test_demo_spec_round_trips_through_widget_values(demo_paths):
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8"))
    values = forms.spec_to_values(data)
    spec, errors, _ = train.check(values)
    assert errors == [] and spec is not None
    assert spec_mod.spec_to_dict(spec) == spec_mod.spec_to_dict(spec_mod.parse_spec(data))


def test_a_partial_spec_leaves_optional_blocks_off(demo_paths):
    """A preset written by hand names only what it changes: a block it does not name (rope_scaling) stays off, as
    the spec's default is, and one it names is on with its values."""
    data = {"model": {"name_or_path": demo_paths["model_dir"]}, "data": {"datasets": ["demo_alpaca"]}}
    spec, errors, _ = train.check(forms.spec_to_values(data))
    assert errors == [] and spec.model.rope_scaling is None
    data["model"]["rope_scaling"] = {"type": "dynamic", "factor": 4.0}
    spec, errors, _ = train.check(forms.spec_to_values(data))
    assert errors == [] and (spec.model.rope_scaling.type, spec.model.rope_scaling.factor) == ("dynamic", 4.0)


def test_errors_land_on_the_field_they_name(demo_paths):
    values = _demo_values(demo_paths)
    values["launch.num_processes"] = 4  # single backend with 4 processes: a cross-field rule
    spec, errors, warnings = train.check(values)
    assert spec is None
    _, flagged = form_validation.field_updates(errors, warnings, {})
    assert "launch.num_processes" in flagged
    values["launch.num_processes"] = 1
    values["method.lora.rank"] = 0  # out of range: a field rule
    spec, errors, warnings = train.check(values)
    updates, flagged = form_validation.field_updates(errors, warnings, {})
    assert spec is None and "method.lora.rank" in flagged
    idx = [f.path for f in forms.FIELDS].index("method.lora.rank")
    assert "field-error" in updates[idx]["elem_classes"] and updates[idx]["info"].startswith("❌")
    out = train.validate_form(*[values[f.path] for f in forms.FIELDS], {}, "en")
    assert out[-2]["interactive"] is False  # Start disabled while invalid


def test_optional_values_and_lists_convert():
    assert forms.from_widget_value(forms.BY_PATH["data.max_samples"], 0) is None
    assert forms.from_widget_value(forms.BY_PATH["data.mix_probs"], "0.3, 0.7") == [0.3, 0.7]
    assert forms.from_widget_value(forms.BY_PATH["launch.gpus"], ["0", "1"]) == [0, 1]
    assert forms.from_widget_value(forms.BY_PATH["data.mix_probs"], "a, b") == ["a", "b"]  # spec reports it
    assert forms.field_for_error("method.lora.targets.0") == "method.lora.targets"
    assert forms.field_for_error("spec") is None


def test_text_lists_show_empty_as_empty_and_sbatch_lines_one_per_line():
    """A list typed in a textbox: an empty one is empty text (a "[]" came back as the sbatch line "[]" and blocked
    Start on every Slurm run), sbatch options one per line (an option may hold a comma)."""
    from studio import gradio_setup  # noqa: F401 - gradio without its stub regeneration

    sbatch, modules = forms.BY_PATH["launch.slurm.extra_sbatch"], forms.BY_PATH["method.freeze.trainable_modules"]
    for info in (sbatch, modules):
        assert forms.to_widget_value(info, []) == ""
        assert forms.from_widget_value(info, forms.make_widget(info, forms.to_widget_value(info, [])).value) == []
    lines = ["--exclusive", "--mail-type=END,FAIL"]
    assert forms.to_widget_value(sbatch, lines) == "--exclusive\n--mail-type=END,FAIL"
    assert forms.from_widget_value(sbatch, forms.to_widget_value(sbatch, lines)) == lines
    names = ["mlp", "self_attn"]
    assert forms.from_widget_value(modules, forms.to_widget_value(modules, names)) == names


def test_presets_save_load_and_refuse_traversal(demo_paths):
    values = _demo_values(demo_paths)
    values["method.lora.rank"] = 16
    assert train.save_preset("my preset", values).startswith("✅")
    loaded, msg = train.load_preset("my preset")
    assert loaded["method.lora.rank"] == 16, msg
    for bad in ("../evil", "a/b", "..", ".hidden"):
        assert train.save_preset(bad, values).startswith("❌")
    assert "my preset" in train.list_presets()


def test_preview_shows_the_launch_command(demo_paths):
    values = _demo_values(demo_paths)
    text = train.preview(values)
    assert "engine.trainer.train" in text


def test_plan_panel_renders_a_verdict(demo_paths):
    values = _demo_values(demo_paths)
    out = train.plan_html(values, 24.0)
    assert "fits" in out or "NOT" in out, out


def test_autofit_applies_the_planner_ladder(demo_paths):
    values = _demo_values(demo_paths)
    values["train.per_device_batch_size"] = 4
    values["data.cutoff_len"] = 2048
    new, note = train_plan.autofit(values, 0.55)
    assert new is not None, note
    changed = [p for p in new if new[p] != values[p]]
    assert changed, note  # the ladder changed at least one field (batch, checkpointing, ...)
    assert note.startswith("✅ Fits 0.55 GiB per GPU after these changes to the form:\n1. "), note
    none, msg = train_plan.autofit(values, None)
    assert none is None and "GPU memory" in msg


def test_autofit_answers_with_the_plan_of_the_fitted_form(demo_paths):
    """The panel shows the fitted form's verdict in the fit's own answer (issue 27, item 9: the old verdict stayed
    for seconds, until each changed field had asked for a plan of its own)."""
    values = _demo_values(demo_paths)
    values["train.per_device_batch_size"] = 4
    values["data.cutoff_len"] = 2048
    assert "does NOT fit" in train_plan.plan_html(values, 0.55, "en")
    fitted, note, shown = train_plan.fit_and_plan(values, 0.55, "en")
    assert fitted is not None, note
    assert shown == train_plan.plan_html(fitted, 0.55, "en")
    assert "fits" in shown and "does NOT fit" not in shown
    as_is, _, nothing = train_plan.fit_and_plan(_demo_values(demo_paths), 80, "en")  # fits already: no change
    assert as_is is None and nothing is None


def test_autofit_without_a_fit_leaves_the_form_and_lists_what_it_tried(demo_paths):
    values = _demo_values(demo_paths) | {"train.per_device_batch_size": 8, "data.cutoff_len": 1024}
    new, note = train_plan.autofit(values, 0.05)
    assert new is None, "the form must not change when nothing fits"
    assert note.startswith("❌ No configuration fits 0.05 GiB per GPU: the form is unchanged."), note
    assert "Tried, in order:\n1. " in note and "per-device batch 8 -> 4" in note
    as_is, note = train_plan.autofit(_demo_values(demo_paths), 80)
    assert as_is is None and "as it is: nothing changed" in note


def test_plan_panel_states_the_precision_it_planned_for(demo_paths, monkeypatch):
    monkeypatch.setattr(train_plan, "_hardware", lambda: None)  # a machine without GPUs
    values = _demo_values(demo_paths) | {"train.precision": "auto", "launch.device": "auto"}
    bare = train.plan_html(values, None)
    typed = train.plan_html(values, 24.0)
    assert "Planned for precision fp32 (auto: no GPU detected or entered, so fp32" in bare, bare
    assert "Planned for precision bf16 (auto: bf16 assumed for a GPU of the size entered above)" in typed, typed
    fixed = train.plan_html(values | {"train.precision": "bf16"}, None)
    assert "precision bf16 (as set in the form)" in fixed and "sequence length" in fixed
    assert "规划假设：精度 fp32" in train.plan_html(values, None, "zh")


def test_chinese_labels_and_help_cover_every_field():
    from studio.i18n.help import HELP_ZH
    from studio.i18n.labels import LABELS_ZH
    from studio.i18n.page import STRINGS

    for f in forms.FIELDS:
        assert f.path in LABELS_ZH and f.label_zh == LABELS_ZH[f.path], f"no Chinese label for {f.path}"
        assert f.path in HELP_ZH, f"no Chinese help for {f.path}"
    assert all(zh and zh != en or en in ("LLM Studio", "TensorBoard") for en, zh in STRINGS.values())


def test_language_switch_redraws_help(demo_paths):
    updates, flagged = form_validation.field_updates([], [], {"": "en"}, "zh")
    idx = [f.path for f in forms.FIELDS].index("train.learning_rate")
    assert updates[idx]["info"] == "峰值学习率（范围 > 0, ≤ 1）" and flagged[""] == "zh"  # help, then its range
    again, _ = form_validation.field_updates([], [], flagged, "zh")
    assert again[idx] == {"__type__": "update"}


def test_train_actions_and_plan_in_chinese(demo_paths, monkeypatch):
    from types import SimpleNamespace

    from engine.spec.messages import message

    values = _demo_values(demo_paths)
    refusal = spec_mod.SpecError([("output.output_dir", message("output_not_writable", probe="/x"))])

    def refuse(spec, name=None):
        raise refusal

    registry = SimpleNamespace(submit=refuse, list_runs=lambda *a, **k: [], ACTIVE=("queued", "running"))
    monkeypatch.setattr(train_actions, "runs", registry)
    msg, run_id, _ = train_actions.start_run(values, "zh")
    assert run_id is None and "运行配置无效" in msg and "无法写入 /x（权限不足）" in msg and "输出目录" in msg
    # what the page keeps so a language switch shows the message again in the new language
    assert msg.texts["zh"] == msg and "cannot write to /x (permission denied)" in msg.texts["en"]
    msg, _, _ = train_actions.start_run(values, "en")
    assert "cannot write to /x (permission denied)" in msg
    assert train.save_preset("../evil", values, "zh").startswith("❌ 预设名称")
    plan = {
        "fits": True,
        "total_gib": 1.0,
        "gpu_mem_gib": 24.0,
        "components": {"weights": 2**20, "activations": 2**21},
    }
    html_ = train_plan.render_plan({**plan, "peak_phase": "optimizer_step"}, "zh")
    assert "权重 1 MiB" in html_ and "激活值 2 MiB" in html_ and "优化器更新" in html_ and "可以放下" in html_
    assert "weights 1 MiB" in train_plan.render_plan({**plan, "peak_phase": "optimizer_step"})


def test_an_emptied_optional_number_above_zero_reads_as_none():
    """gradio sends an untouched or emptied optional number as 0; for a field that must be > 0 (NEFTune's alpha)
    that means "off", not an error that blocks Start."""
    info = forms.BY_PATH["train.neftune_noise_alpha"]
    assert forms.from_widget_value(info, 0) is None and forms.from_widget_value(info, 5) == 5


def test_stage_dropdown_offers_kto_and_rm_and_their_rules_name_the_fields(demo_paths):
    assert forms.BY_PATH["method.stage"].choices == ["sft", "pt", "dpo", "kto", "rm", "grpo"]
    assert forms.BY_PATH["method.kto.beta"].section == "method.kto" and "method.kto" in page_mod.SECTION_TITLES
    values = _demo_values(demo_paths) | {"method.stage": "kto", "train.per_device_batch_size": 1}
    spec, errors, _ = train.check(values)
    assert spec is None and "train.per_device_batch_size" in [p for p, _ in errors]
    spec, errors, _ = train.check(values | {"train.per_device_batch_size": 2})  # the demo's sft data has no kto_tag
    assert spec is None and [p for p, _ in errors] == ["data.datasets"] and "kto_tag" in str(errors[0][1])
    spec, errors, _ = train.check(values | {"method.stage": "rm", "data.datasets": ["demo_dpo"]})
    assert errors == [] and spec.method.stage == "rm"


def test_sft_loss_is_on_the_form_with_its_help_and_its_rule_names_the_field(demo_paths):
    """train.loss (dft / asft / eaft) under Training's advanced settings, its help in both languages; the form's
    check takes it, and refuses it outside sft on the field."""
    f = forms.BY_PATH["train.loss"]
    assert f.section == "train" and f.advanced and f.choices == ["cross_entropy", "dft", "asft", "eaft"]
    assert "probability" in f.help_for("en") and "概率" in f.help_for("zh")
    values = _demo_values(demo_paths) | {"train.loss": "asft", "train.asft_alpha": 0.2}
    spec, errors, _ = train.check(values)
    assert errors == [] and (spec.train.loss, spec.train.asft_alpha) == ("asft", 0.2)
    spec, errors, _ = train.check(values | {"method.stage": "pt", "data.datasets": ["demo_pretrain"]})
    assert spec is None and [p for p, _ in errors] == ["train.loss"] and "stage pt" in str(errors[0][1])


def test_every_form_section_has_a_title_in_both_languages():
    """Issue 27 item 12: the Slurm group's accordion read its raw key "launch.slurm" in both languages."""
    from studio import forms

    missing = [s for s in forms.sections() if s not in page_mod.SECTION_TITLES]
    assert not missing, missing
    for section in forms.sections():
        en, zh = page_mod.SECTION_TITLES[section]
        assert en and zh and section not in (en, zh), (section, en, zh)


def test_an_emptied_preset_picker_loads_nothing_and_says_nothing():
    """Issue 27 item 12: switching the language emptied the preset picker, whose event then showed the English error
    "preset name '': use letters, ..." on the Chinese page."""
    assert train.load_preset("", "zh") == (None, "") and train.load_preset("  ", "en") == (None, "")
    values, msg = train.load_preset("../x", "zh")
    assert values is None and msg.startswith("❌") and "预设" in msg, msg
