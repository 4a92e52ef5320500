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
