"""The Evaluate tab's judge settings as the engine takes them: the pairwise switch makes a pairwise judge of the
spec (the base evaluated too, the prompt box's text as the pairwise prompt), and the prompt box follows the switch
without losing a prompt the user wrote."""

from __future__ import annotations

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
