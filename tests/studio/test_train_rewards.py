"""The Train tab's reward dry run without a browser: a form that is not stage grpo is told so before anything runs,
and a dry run's result becomes the summary (each function's mean over its scored rows, or its error, in the page's
language) and the score table, one column per function."""

from __future__ import annotations

from pathlib import Path

import yaml

from engine.spec.schema import parse_spec
from studio import forms
from studio.tabs import train_rewards


def _values(demo_paths, **method) -> dict:
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8"))
    data["method"].update(method)
    return forms.spec_to_values(parse_spec(data).model_dump(mode="json"))


def test_a_form_that_is_not_grpo_is_told_and_nothing_runs(demo_paths, monkeypatch):
    def never(*a, **k):
        raise AssertionError("the dry run must not start for stage sft")

    monkeypatch.setattr(train_rewards.rewards_try, "try_rewards", never)
    summary, table = train_rewards.try_form(_values(demo_paths), 8, "answers", "en")
    assert table is None and summary == "Reward functions belong to stage grpo (the form's stage is sft)"
    summary, _ = train_rewards.try_form(_values(demo_paths), 8, "answers", "zh")
    assert summary == "奖励函数只用于 grpo 阶段（表单的阶段是 sft）"


def test_result_becomes_summary_and_table():
    result = {
        "rows": [
            {"dataset": "arith", "row": 1, "completion": "3", "prompt": "p"},
            {"dataset": "arith", "row": 2, "completion": "x " * 200, "prompt": "p"},
        ],
        "rewards": [
            {"name": "math", "kind": "math", "weight": 1.0, "scores": [1.0, None], "error": None},
            {"name": "mine", "kind": "python", "weight": 0.5, "scores": None, "error": "reward 'mine' raised <b>"},
        ],
    }
    summary, table = train_rewards.render(result, "en")
    assert list(table.columns) == ["dataset", "row", "completion", "math", "mine"]
    assert table.iloc[0].tolist()[:4] == ["arith", 1, "3", 1.0]
    assert len(table.iloc[1]["completion"]) == train_rewards.COMPLETION_CHARS  # cut, with its ellipsis
    assert "✅ **math**: mean 1 over 1 scored rows (weight 1)" in summary
    assert "❌ **mine**: reward 'mine' raised &lt;b&gt;" in summary  # the error's text, never its markup
    summary, table = train_rewards.render(result, "zh")
    assert list(table.columns)[:3] == ["数据集", "行", "生成"] and "1 个有分数的行的均值 1（权重 1）" in summary
    assert train_rewards.render({"error": "boom"}, "en") == ("❌ boom", None)


def test_the_picker_lists_the_engines_reward_kinds():
    """One list of kinds, written once in the engine: the spec's field accepts exactly the kinds the picker offers."""
    import typing

    import gradio as gr

    from engine.spec.grpo_group import REWARD_KINDS, RewardSpec
    from studio.i18n.page import Texts

    assert typing.get_args(RewardSpec.model_fields["kind"].annotation) == REWARD_KINDS
    with gr.Blocks():
        picker = train_rewards.build_picker(Texts(), "en", "{kind: math, weight: 1.0}\n{kind: regex, name: fmt}")
    assert [value for _label, value in picker.choices] == list(REWARD_KINDS)
    assert picker.value == ["math", "regex"] and picker.label.startswith("Built-in reward kinds")


def test_a_kind_picked_is_a_line_the_spec_reads_and_unpicking_drops_only_its_lines(demo_paths):
    text = train_rewards.with_kinds("", ["math", "length"])
    assert text == "{kind: math, weight: 1.0}\n{kind: length, weight: 1.0}"
    values = _values(demo_paths)
    values.update({"method.stage": "grpo", "data.datasets": ["grpo_arith"], train_rewards.REWARDS: text})
    values.update({"train.per_device_batch_size": 4, "train.gradient_accumulation": 1})
    spec, errors, _ = train_rewards.check(values)
    assert spec is not None, errors
    assert [(r.kind, r.weight, r.target_length) for r in spec.method.grpo.rewards] == [
        ("math", 1.0, 256),
        ("length", 1.0, 256),
    ]
    edited = "{kind: length, weight: 0.5, target_length: 64}\n{kind: regex, name: d, pattern: '[0-9]'}\nnot yaml: ["
    assert train_rewards.kinds_in(edited) == ["length", "regex"]
    # regex unpicked, math picked: the edited length line and the line the spec must name stay as written
    assert train_rewards.with_kinds(edited, ["length", "math"]) == (
        "{kind: length, weight: 0.5, target_length: 64}\nnot yaml: [\n{kind: math, weight: 1.0}"
    )
    assert train_rewards.with_kinds(edited, []) == "not yaml: ["


def _value(answer):
    """What a handler's answer sets as a component's value: a plain value, or an update's value (else nothing)."""
    if isinstance(answer, dict) and answer.get("__type__") == "update":
        return answer.get("value", _NOTHING)
    return answer


_NOTHING = object()


def test_stage_switches_keep_the_picked_rewards_and_the_run_name(demo_paths, monkeypatch):
    """sft -> grpo -> sft -> grpo in the Train form: every handler the stage's change starts answers, and the rewards
    a person picked, the picker and the run name they typed are what they were (issue 45 item 16)."""
    from studio.app import build_app

    app = build_app()
    by_id = {getattr(b, "elem_id", None): b for b in app.blocks.values()}
    stage, rewards = by_id["f-method-stage"], by_id["f-method-grpo-rewards"]
    picker, name = by_id["grpo-reward-pick"], by_id["f-output-run-name"]
    values = {b._id: getattr(b, "value", None) for b in app.blocks.values()}

    def fire(component, event: str) -> int:
        fns = [
            f for f in app.fns.values() if f.fn is not None and (component._id, event) in [t[:2] for t in f.targets]
        ]
        for f in fns:
            answers = f.fn(*[values[c._id] for c in f.inputs])
            answers = answers if len(f.outputs) != 1 else [answers]
            for out, answer in zip(f.outputs, answers):
                if _value(answer) is not _NOTHING:
                    values[out._id] = _value(answer)
        return len(fns)

    values[picker._id] = ["math", "length"]  # a person picks two kinds
    assert fire(picker, "input") == 1
    assert fire(rewards, "change") >= 2  # the picker follows, and the form's checks
    assert values[rewards._id] == "{kind: math, weight: 1.0}\n{kind: length, weight: 1.0}"
    assert values[picker._id] == ["math", "length"]
    values[name._id] = "my-grpo-try"
    kept = (values[rewards._id], values[picker._id], values[name._id])
    for s in ("sft", "grpo", "sft", "grpo"):
        values[stage._id] = s
        assert fire(stage, "change") >= 2  # the form's checks and the plan
        assert (values[rewards._id], values[picker._id], values[name._id]) == kept, s


def test_a_stage_picked_by_hand_renames_the_run_studio_named():
    """Issue 45 item 16: a GRPO run went out named "demo-lora" after the stage was switched. The demo's name (and
    a name Studio proposed at an earlier switch) follows the stage; a name a person typed stays."""
    from studio.tabs.train import run_name_for_stage

    model = "/w/models/demo-tiny-llama"
    update, proposed = run_name_for_stage("grpo", "lora", model, "demo-lora", "demo-lora")
    assert update["value"] == proposed == "demo-tiny-llama-grpo-lora"
    update, proposed = run_name_for_stage("sft", "lora", model, proposed, proposed)
    assert update["value"] == proposed == "demo-tiny-llama-sft-lora"
    update, kept = run_name_for_stage("dpo", "lora", model, "my-grpo-try", proposed)
    assert "value" not in update and kept == proposed  # typed by a person: untouched
    assert run_name_for_stage("kto", "full", "Qwen/Qwen2.5-0.5B", "", "x")[1] == "qwen2.5-0.5b-kto-full"
