"""bench/grpo_throughput.py works end to end (--quick: one Studio run and one plain TRL run of 4 steps) and writes its
markdown and json. Not a timed assertion: the figures live in bench/results/grpo_throughput.md."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.helpers import run_bench_quick

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import grpo_throughput  # noqa: E402 - bench/ is not a package


def test_steps_per_second_skips_warmup():
    points = [(1, 100.0), (2, 101.0), (3, 101.5), (4, 102.0)]
    assert grpo_throughput.steps_per_second(points, warmup=2) == (2.0, 2, 1.0)
    with pytest.raises(RuntimeError, match="too few logged steps"):
        grpo_throughput.steps_per_second(points[:1], warmup=1)


def test_reward_gap_compares_steps_both_sides_logged():
    a = {1: {"reward": 0.5, "rewards/math/mean": None}, 2: {"reward": 0.25}}
    b = {1: {"reward": 0.5, "rewards/math/mean": None}, 2: {"reward": 0.5}, 3: {"reward": 1.0}}
    assert grpo_throughput.reward_gap(a, b) == (0.25, 2)
    assert grpo_throughput.reward_gap(a, {1: {"reward": None}}) == (None, 1)


@pytest.mark.slow
def test_quick_run_writes_both_sides(studio_home, tmp_path):
    stem = tmp_path / "grpo"
    run_bench_quick("grpo_throughput.py", stem)
    text = stem.with_suffix(".md").read_text()
    row = re.search(r"^\| 1 \| (\d+\.\d\d) \| (\d+\.\d\d) \| \d+\.\d\dx \|", text, re.MULTILINE)
    assert row and all(float(x) > 0 for x in row.groups()), text[:2000]
    assert re.search(r"ratio of the medians: \*\*\d+\.\d\dx\*\*", text)
    data = json.loads(stem.with_suffix(".json").read_text())
    assert len(data["studio_steps_per_s"]) == len(data["plain_steps_per_s"]) == 1
    assert data["studio_sample_prompts_in_plain_prompts"] is True
    studio, plain = data["rewards_by_step"]["studio"], data["rewards_by_step"]["plain"]
    assert sorted(studio, key=int) == sorted(plain, key=int) == ["1", "2", "3", "4"]
    for step in studio:  # both sides logged every reward at every step (TRL's names, Studio's labels)
        for key in grpo_throughput.REWARDS:
            assert isinstance(studio[step][key], float) and isinstance(plain[step][key], float), (step, key)
