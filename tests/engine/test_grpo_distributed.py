"""Stage grpo on two processes (gloo, CPU): DDP and DeepSpeed ZeRO-2 through the launch path, as on a GPU machine.

A group's completions are spread over the ranks (2 processes x 2 completions for one prompt of group size 4), so the
group's advantages are only right when TRL gathers every rank's rewards before it normalizes. The test checks that
from the run's own files: each step's sample completions hold all four of the group, each scored here again with
this test's own reward code, and each advantage equals (total - group mean) / (group std + 1e-4) computed here from
those scores. A rank that normalized over its own two completions gives other numbers. The logged total reward is
the mean of the four, so the gathered batch is the one TRL logged.
"""

from __future__ import annotations

import re
import statistics

import pytest

from engine.spec.schema import RunSpec
from tests.engine.test_grpo_train import grpo_spec
from tests.helpers import deepspeed_shards, log_tail, run_trainer

pytestmark = pytest.mark.slow

LAUNCHES = {
    "ddp": {"backend": "ddp", "num_processes": 2},
    "zero2": {"backend": "deepspeed", "num_processes": 2, "deepspeed": {"zero_stage": 2}},
}
STEPS = 3
# The demo's untrained completions all contain a digit and never the answer: a third reward (a Latin letter first)
# makes the totals differ within a group, so the advantages have something to show.
LATIN = {"kind": "regex", "name": "latin_start", "pattern": r"[A-Za-z].*", "weight": 0.25}


def _scores(sample: dict) -> tuple[float, float, float]:
    """(has_digit, latin_start, total) of one completion, by this test's own reading of the rewards."""
    text = sample["completion"].strip()
    has_digit = 1.0 if re.search(r"\d", text) else 0.0
    latin = 1.0 if text[:1].isascii() and text[:1].isalpha() else 0.0
    return has_digit, latin, sample["rewards"]["math"] + 0.5 * has_digit + 0.25 * latin


@pytest.mark.parametrize("name", list(LAUNCHES))
def test_grpo_on_two_processes(name, demo_paths, tmp_path):
    data = grpo_spec(demo_paths, STEPS).model_dump(mode="json")
    data["launch"].update(LAUNCHES[name])
    data["train"].update(per_device_batch_size=2, save_steps=STEPS)
    data["method"]["grpo"]["rewards"].append(LATIN)
    spec = RunSpec.model_validate(data)
    rc, events = run_trainer(spec, tmp_path, timeout=900)
    assert rc == 0, log_tail(tmp_path, 80)
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["world_size"] == 2
    assert events[-1]["type"] == "finished" and (tmp_path / "adapter" / "adapter_config.json").is_file()
    logs = {e["step"]: e["payload"]["metrics"] for e in events if e["type"] == "log"}
    samples = {e["step"]: e["payload"]["samples"] for e in events if e["type"] == "completions"}
    assert sorted(logs) == sorted(samples) == list(range(1, STEPS + 1))
    spread = 0
    for step, group in samples.items():
        assert len(group) == 4, (step, group)  # both ranks' completions, gathered
        assert len({s["prompt"] for s in group}) == 1, (step, [s["prompt"] for s in group])  # one prompt's group
        totals = []
        for s in group:
            has_digit, latin, total = _scores(s)
            assert s["rewards"]["has_digit"] == has_digit and s["rewards"]["latin_start"] == latin, s
            assert s["rewards"]["math"] in (0.0, 1.0), s
            assert s["total"] == pytest.approx(total, abs=1e-5)
            totals.append(total)
        mean, std = statistics.fmean(totals), statistics.stdev(totals)  # TRL's nanstd is Bessel-corrected
        for s, total in zip(group, totals, strict=True):
            assert s["advantage"] == pytest.approx((total - mean) / (std + 1e-4), abs=1e-3), (step, totals, s)
        assert logs[step]["reward"] == pytest.approx(mean, abs=1e-5)  # the logged total: the gathered four's mean
        spread += std > 0
    assert spread, "no group had different rewards: the advantages' check proved nothing"
    memory = next(e for e in events if e["type"] == "log")["payload"]["memory"]
    assert [m["rank"] for m in memory] == [0, 1]
    if LAUNCHES[name]["backend"] == "deepspeed":  # DeepSpeed itself trained, each rank its own shard
        assert deepspeed_shards(tmp_path) == ["zero_pp_rank_0", "zero_pp_rank_1"], log_tail(tmp_path, 80)
