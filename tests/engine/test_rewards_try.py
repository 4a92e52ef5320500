"""The reward dry run (``studio rewards try``, engine.jobs.rewards_try): each reward function on real rows of the
dataset in a subprocess, a table per function per row, and a user file's error naming the function and the row."""

from __future__ import annotations

import json
from pathlib import Path

from engine.core import acting
from engine.jobs.rewards_try import table, try_rewards
from tests.helpers import demo_spec

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_scores_the_datasets_own_answers(demo_paths, tmp_path):
    reward_file = tmp_path / "mine.py"
    reward_file.write_text(
        "def odd_rows_fail(prompts, completions, answer=None, row=None, **kwargs):\n"
        "    if 3 in row:\n"
        "        raise KeyError('no score for ' + completions[row.index(3)])\n"
        "    return [1.0] * len(completions)\n",
        encoding="utf-8",
    )
    rewards = [
        {"kind": "math"},
        {"kind": "regex", "name": "number_only", "pattern": r"\s*-?\d+\s*"},
        {"kind": "exact", "weight": 0.5},
        {"kind": "python", "file": str(reward_file), "function": "odd_rows_fail"},
    ]
    spec = demo_spec(
        demo_paths,
        method={"stage": "grpo", "grpo": {"num_generations": 4, "rewards": rewards}},
        data={"datasets": ["grpo_arith"], "max_samples": None},
        train={"per_device_batch_size": 4, "gradient_accumulation": 1},
    )
    with acting.shell():  # `studio rewards try`: a reward file anywhere (the page: only the reward folder)
        result = try_rewards(spec, rows=4, source="answers")
    assert "error" not in result, result
    # the bundled rows, read independently: their own answers are the completions
    bundled = json.loads((ROOT / "assets" / "data" / "grpo_arith.json").read_text(encoding="utf-8"))[:4]
    assert [r["completion"] for r in result["rows"]] == [b["output"] for b in bundled]
    assert [r["row"] for r in result["rows"]] == [1, 2, 3, 4]
    by_name = {r["name"]: r for r in result["rewards"]}
    # a row's own answer is right by every built-in check
    assert by_name["math"]["scores"] == by_name["number_only"]["scores"] == by_name["exact"]["scores"] == [1.0] * 4
    failed = by_name["odd_rows_fail"]
    assert failed["scores"] is None
    assert "'odd_rows_fail' raised KeyError" in failed["error"] and "dataset 'grpo_arith' row 3" in failed["error"]
    text = table(result)
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["dataset:row", "completion"] and "odd_rows_fail" in lines[0]
    assert lines[3].startswith("grpo_arith:3") and lines[3].split()[1] == bundled[2]["output"]
    assert "odd_rows_fail: ERROR reward 'odd_rows_fail' raised KeyError" in text
    assert "math: mean 1 over 4 scored rows (weight 1)" in text


def test_rows_must_be_a_positive_count(capsys):
    import pytest

    from engine.jobs.rewards_try import cli

    for bad, words in (("-3", "-3: give 1 to 256 prompts"), ("0", "0: give 1 to 256 prompts"), ("x", "'x' is not")):
        with pytest.raises(SystemExit) as info:
            cli(["try", "spec.yaml", "--rows", bad])
        assert info.value.code == 2 and words in capsys.readouterr().err


def test_a_shipped_example_runs_from_the_repository_root(studio_home, monkeypatch, capsys):
    """`studio rewards try assets/examples/grpo_math.yaml` from the repository (issue 45 item 3): its model,
    models/demo-tiny-llama, is the workspace's, as for train and validate; the dry run loaded it from the current
    folder and blamed the network."""
    from pathlib import Path

    from engine.jobs.rewards_try import cli

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    assert cli(["try", "assets/examples/grpo_math.yaml", "--rows", "2"]) == 0
    out = capsys.readouterr().out
    assert "math: mean" in out and "number_only: mean" in out and "error" not in out, out
