"""Issue 45 item 19: the Chinese page names the form's plain-word choices (health actions, notification events,
schedulers, strategies, "auto" / "off") and the evaluation's measures and model rows in Chinese, on the page as
built and after a switch from English; the English page keeps the spec's own values, and names of things (methods,
optimizers, modules) stay as they are written."""

from __future__ import annotations

import re

import pytest

CJK = re.compile(r"[\u4e00-\u9fff]")


def _choices(app, elem_id: str) -> dict:
    comp = next(c for c in app.blocks.values() if getattr(c, "elem_id", None) == elem_id)
    return {value: label for label, value in comp.choices}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from studio.app import build_app

    with pytest.MonkeyPatch.context() as mp:  # this module's workspace only: later tests keep theirs
        mp.setenv("STUDIO_HOME", str(tmp_path_factory.mktemp("home")))
        yield build_app("en"), build_app("zh")


def test_plain_word_choices_are_chinese_and_names_stay(pages):
    en, zh = pages
    assert _choices(zh, "f-health-loss-nan") == {"off": "关闭", "note": "记录", "warn": "警告", "stop": "停止运行"}
    assert _choices(zh, "f-notify-on") == {
        "alert": "健康告警",
        "completed": "完成",
        "failed": "失败",
        "stopped": "已停止",
    }
    assert _choices(zh, "f-train-lr-scheduler")["cosine"] == "余弦"
    assert _choices(zh, "f-train-gradient-checkpointing") == {"auto": "自动", "on": "开启", "off": "关闭"}
    assert _choices(zh, "f-train-eval-strategy")["steps"] == "每隔若干步"
    assert _choices(zh, "f-method-finetuning")["lora"] == "lora"  # a method's name
    assert _choices(zh, "f-train-optimizer")["adamw_torch"] == "adamw_torch"
    for elem in ("f-health-loss-nan", "f-notify-on", "f-train-lr-scheduler", "f-train-save-strategy", "f-data-mix"):
        assert all(CJK.search(label) for label in _choices(zh, elem).values()), (elem, _choices(zh, elem))
        assert all(label == value for value, label in _choices(en, elem).items()), elem  # English: the values
    measures = _choices(zh, "eval-measures")
    assert measures["exact"] == "完全匹配" and measures["loss"] == "损失" and set(measures) >= {"bleu", "lm_eval"}
    assert _choices(en, "eval-measures")["lm_eval"] == "lm_eval"


def test_the_switch_to_chinese_renames_the_choices(pages):
    """The language picker's handler (Texts.updates) carries the choices' names with the labels."""
    import gradio as gr

    from studio.forms import make_widget, walk
    from studio.i18n.page import Texts
    from studio.tabs.eval_view import measure_choices, model_label

    info = next(f for f in walk() if f.path == "health.loss_spike")
    with gr.Blocks():
        texts = Texts()
        texts.add_field(make_widget(info, "warn", "en"), info)
    update = texts.updates("zh")[0]
    assert dict((v, k) for k, v in update["choices"])["warn"] == "警告" and CJK.search(update["label"])
    assert dict((v, k) for k, v in texts.updates("en")[0]["choices"])["warn"] == "warn"
    assert dict((v, k) for k, v in measure_choices("zh"))["judge"] == "评审模型打分"
    assert (model_label("base", "zh"), model_label("final", "zh"), model_label("checkpoint-4", "zh")) == (
        "基座模型",
        "最终模型",
        "checkpoint-4",
    )


def test_job_names_studio_made_read_in_chinese():
    """The Runs table names a job by what Studio called it ("export demo → gguf"): its verb in the page's language;
    a training run's name, which a person gave, is never touched."""
    from types import SimpleNamespace

    from studio.tabs.runs import shown_name

    job = SimpleNamespace(name="export demo-run → demo-run-gguf", kind="command")
    assert shown_name(job, "zh") == "导出 demo-run → demo-run-gguf" and shown_name(job, "en") == job.name
    assert shown_name(SimpleNamespace(name="eval 20261205-1", kind="command"), "zh") == "评估 20261205-1"
    assert shown_name(SimpleNamespace(name="serve m :8000", kind="command"), "zh") == "部署服务 m :8000"
    mine = SimpleNamespace(name="export my data", kind="train")
    assert shown_name(mine, "zh") == "export my data"
    assert shown_name(SimpleNamespace(name="exporter", kind="command"), "zh") == "exporter"


def test_every_relabelled_attribute_exists_on_its_component(pages):
    """A language switch updates each registered component's attribute (``Texts.add(component, key, attr)``): a
    Button has a value, not a label, and one wrong attribute fails the whole switch on the server."""
    import inspect

    for app in pages:
        for component, key, attr in app.studio_texts.items:
            params = inspect.signature(type(component).__init__).parameters
            assert attr in params, f"{key}: {type(component).__name__} has no {attr!r}"
