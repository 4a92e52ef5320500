"""GRPO's reward functions (engine.trainer.rewards): each built-in's scores on hand-checked rows, and a user's reward
file whose errors name the function, the row and the value."""

from __future__ import annotations

import pytest

from engine.spec.grpo_group import FORMAT_PATTERN, RewardSpec
from engine.trainer.rewards import RewardError, build_rewards


def score(kind: str, completions: list, answers: list | None = None, **fields) -> list:
    (reward,) = build_rewards([RewardSpec(kind=kind, **fields)])
    kwargs = {"answer": answers} if answers is not None else {}
    return reward(prompts=["q"] * len(completions), completions=completions, **kwargs)


def test_exact_match_trims_spaces_only():
    got = score("exact", [" 42\n", "42.", "Paris", "x"], ["42", "42", "paris", None])
    assert got == [1.0, 0.0, 0.0, None]


def test_normalized_match_ignores_case_punctuation_articles():
    got = score(
        "normalized",
        ["The Eiffel  Tower!", "an apple", "Tower", "Rome"],
        ["eiffel tower", "Apple", "a tower x", "rome."],
    )
    assert got == [1.0, 1.0, 0.0, 1.0]


def test_math_checker_compares_values():
    completions = ["The answer is 42.", "It is 1/2", "\\boxed{0.5}", "I think 41", "no number here"]
    got = score("math", completions, ["42", "0.5", "$\\frac{1}{2}$", "42", "7"])
    assert got == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_format_regex_needs_the_whole_completion():
    completions = [
        "<think>3 plus 4</think><answer>7</answer>",
        "<think>\nmulti\nline\n</think>\n<answer>7</answer>\n",
        "7",
        "<answer>7</answer><think>x</think>",
        "<think>x</think><answer>7</answer> trailing",
    ]
    assert score("regex", completions, pattern=FORMAT_PATTERN) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert score("regex", ["12", "a1", "x"], pattern=r".*\d.*") == [1.0, 1.0, 0.0]


def test_length_penalty_counts_completion_tokens():
    (reward,) = build_rewards([RewardSpec(kind="length", target_length=4)])
    ids = [[1, 2], [1, 2, 3, 4], [1] * 6, [1] * 12]
    got = reward(prompts=["q"] * 4, completions=["a", "b", "c", "d"], completion_ids=ids)
    # up to 4 tokens: 0; 6 tokens: -(6-4)/4; 12 tokens: -(8/4) held at -1
    assert got == [0.0, 0.0, -0.5, -1.0]


def test_json_validity_and_schema():
    completions = ['{"name": "x", "age": 3}', '```json\n{"name": "y"}\n```', "{name: x}", '{"age": 3}', "[1, 2]"]
    assert score("json", completions) == [1.0, 1.0, 0.0, 1.0, 1.0]
    schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    assert score("json", completions, json_schema=schema) == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_conversational_completions_are_read_as_text():
    assert score("exact", [[{"role": "assistant", "content": "7"}]], ["7"]) == [1.0]


USER_FILE = """
def shout(prompts, completions, **kwargs):
    return [float(len(c)) for c in completions]

def breaks_on_x(prompts, completions, answer=None, **kwargs):
    out = []
    for c in completions:
        if c == "x":
            raise ValueError("cannot score x")
        out.append(1.0)
    return out

def gives_text(prompts, completions, **kwargs):
    return [1.0 if c != "b" else "high" for c in completions]

def too_few(prompts, completions, **kwargs):
    return [1.0]

def sleeps(prompts, completions, **kwargs):
    import time
    time.sleep(30)
    return [0.0] * len(completions)
"""


def user_reward(tmp_path, function: str, **fields):
    path = tmp_path / "my_rewards.py"
    path.write_text(USER_FILE, encoding="utf-8")
    (reward,) = build_rewards([RewardSpec(kind="python", file=str(path), function=function, **fields)])
    return reward


WHERE = {"dataset": ["demo", "demo", "demo"], "row": [4, 9, 11]}


def test_user_function_runs_with_trl_signature(tmp_path):
    reward = user_reward(tmp_path, "shout")
    assert reward.__name__ == "shout"
    assert reward(prompts=["p", "p"], completions=["ab", "abcd"], **{k: v[:2] for k, v in WHERE.items()}) == [2.0, 4.0]


def test_user_exception_names_function_and_row(tmp_path):
    reward = user_reward(tmp_path, "breaks_on_x")
    with pytest.raises(RewardError) as err:
        reward(prompts=["p"] * 3, completions=["a", "x", "c"], **WHERE)
    text = str(err.value)
    assert "'breaks_on_x'" in text and "ValueError: cannot score x" in text and "dataset 'demo' row 9" in text


def test_user_non_number_names_function_row_and_value(tmp_path):
    reward = user_reward(tmp_path, "gives_text")
    with pytest.raises(RewardError) as err:
        reward(prompts=["p"] * 3, completions=["a", "b", "c"], **WHERE)
    text = str(err.value)
    assert "'gives_text'" in text and "'high'" in text and "dataset 'demo' row 9" in text


def test_user_wrong_count_is_named(tmp_path):
    reward = user_reward(tmp_path, "too_few")
    with pytest.raises(RewardError, match=r"'too_few' returned 1 values for 3 completions"):
        reward(prompts=["p"] * 3, completions=["a", "b", "c"], **WHERE)


def test_user_function_time_limit(tmp_path):
    reward = user_reward(tmp_path, "sleeps", timeout_s=0.5)
    with pytest.raises(RewardError, match=r"'sleeps' took longer than its time limit \(0.5 s\)"):
        reward(prompts=["p"], completions=["a"], **{k: v[:1] for k, v in WHERE.items()})
