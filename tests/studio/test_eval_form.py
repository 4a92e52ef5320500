"""The Evaluate tab's judge settings as the engine takes them: the pairwise switch makes a pairwise judge of the
spec (the base evaluated too, the prompt box's text as the pairwise prompt), and the prompt box follows the switch
without losing a prompt the user wrote."""

from __future__ import annotations

import re

from engine.eval.spec import DEFAULT_JUDGE_PROMPT, DEFAULT_PAIRWISE_PROMPT, parse_eval_spec
from studio.tabs.eval import judge_prompt_for, spec_from_form

FORM = ("r1", [], False, True, None, ["exact", "judge"], 0, 32, 4, "", "http://127.0.0.1:9/v1", "judge-7b", "")


def test_pairwise_switch_makes_a_pairwise_judge_with_the_base():
    spec = spec_from_form(*FORM, DEFAULT_PAIRWISE_PROMPT, True)
    assert spec["models"]["base"] is True  # the other side of every pair
    assert spec["judge"]["mode"] == "pairwise" and spec["judge"]["pairwise_prompt"] == DEFAULT_PAIRWISE_PROMPT
    assert "prompt" not in spec["judge"]
    parsed = parse_eval_spec(spec)  # the engine's own rules accept it
    assert parsed.judge.mode == "pairwise" and parsed.models.base


def test_score_mode_keeps_its_prompt_and_the_base_as_ticked():
    spec = spec_from_form(*FORM, "Q {question} A {answer} Score: N", False)
    assert spec["models"]["base"] is False and "mode" not in spec["judge"]
    assert spec["judge"]["prompt"] == "Q {question} A {answer} Score: N"
    assert parse_eval_spec(spec).judge.mode == "score"


def test_prompt_box_follows_the_switch_but_keeps_a_written_prompt():
    assert judge_prompt_for(True, DEFAULT_JUDGE_PROMPT) == DEFAULT_PAIRWISE_PROMPT
    assert judge_prompt_for(False, DEFAULT_PAIRWISE_PROMPT) == DEFAULT_JUDGE_PROMPT
    mine = "Compare {answer_a} with {answer_b}. Winner: A, B or tie"
    assert judge_prompt_for(False, mine) == mine and judge_prompt_for(True, mine) == mine


def test_charts_only_for_measures_with_figures_titled_in_the_pages_language():
    """Pairwise judging scores nothing: the judge's mean-score column is n/a on every row and gets no chart (it drew
    an empty one); the win rate gets its chart, titled in Chinese on the Chinese page."""
    from studio.tabs.eval import report_view

    results = {
        "columns": ["exact", "judge", "judge_win"],
        "rows": [
            {"label": "base", "kind": "base", "step": 0, "metrics": {"exact": 10.0, "judge": None, "judge_win": None}},
            {
                "label": "final",
                "kind": "final",
                "step": 4,
                "metrics": {"exact": 20.0, "judge": None, "judge_win": 62.5},
            },
        ],
        "train_loss": [[1, 2.0], [4, 1.5]],
    }
    _, charts, _, _ = report_view(results, [], None, "all", "zh")
    assert re.findall(r'data-measure="([^"]+)"', charts) == ["exact", "judge_win"]
    assert "judge_win 随步数的变化（虚线：训练损失）" in charts and "by step" not in charts
    _, charts, _, _ = report_view(results, [], None, "all", "en")
    assert "exact by step (dashed: training loss)" in charts
