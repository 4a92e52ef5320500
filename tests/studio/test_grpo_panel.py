"""The dashboard's GRPO panel (studio.grpo_panel) read from a run's events: each reward's series and the total, KL,
completion length and clipped share (in percent), the newest sample completions; hidden for other stages."""

from __future__ import annotations

from engine.core import events
from studio import grpo_panel, monitor
from studio.tabs import dashboard


def _run(tmp_path):
    path = tmp_path / "events.jsonl"
    figures = {
        1: {"rewards/math/mean": 0.0, "rewards/fmt/mean": 0.25, "reward": 0.125, "kl": 0.0, "entropy": 7.1},
        2: {"rewards/math/mean": 0.5, "rewards/fmt/mean": 0.75, "reward": 0.875, "kl": 0.01, "entropy": 6.9},
    }
    spread = {
        1: {"rewards/math/std": 0.0, "rewards/fmt/std": 0.5, "reward_std": 0.25},
        2: {"rewards/math/std": 0.5, "rewards/fmt/std": 0.4, "reward_std": 0.45},
    }
    for step, m in figures.items():
        m |= spread[step]
        m |= {"completions/mean_length": 10.0 + step, "completions/clipped_ratio": 0.5 / step}
        events.append_event(path, "log", step, loss=0.1, metrics=m)
    samples = [
        {"prompt": "<user>What is 2 + 1?", "completion": "3", "rewards": {"math": 1.0, "fmt": 0.0}, "total": 1.0},
        {"prompt": "<user>What is 9 - 6?", "completion": "x", "rewards": {"math": 0.0, "fmt": None}, "total": 0.0},
    ]
    events.append_event(path, "completions", 2, samples=samples)
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    return view


def _series(frame, curve):
    rows = frame[frame["curve"] == curve]
    return list(zip(rows["x"], rows["value"]))


def test_frames_hold_every_reward_and_figure(tmp_path):
    view = _run(tmp_path)
    assert grpo_panel.shown(view) and grpo_panel.reward_names(view) == ["math", "fmt"]
    rewards = grpo_panel.rewards_frame(view)
    assert _series(rewards, "math") == [(1.0, 0.0), (2.0, 0.5)]
    assert _series(rewards, "fmt") == [(1.0, 0.25), (2.0, 0.75)]
    assert _series(rewards, "total") == [(1.0, 0.125), (2.0, 0.875)]
    std = grpo_panel.std_frame(view)
    assert _series(std, "math") == [(1.0, 0.0), (2.0, 0.5)] and _series(std, "fmt") == [(1.0, 0.5), (2.0, 0.4)]
    assert _series(std, "total") == [(1.0, 0.25), (2.0, 0.45)]
    assert _series(grpo_panel.kl_frame(view), "KL") == [(1.0, 0.0), (2.0, 0.01)]
    length = grpo_panel.length_frame(view)
    assert _series(length, "mean length") == [(1.0, 11.0), (2.0, 12.0)]
    assert _series(length, "clipped %") == [(1.0, 50.0), (2.0, 25.0)]  # 0.5 / step as a percentage
    assert set(grpo_panel.rewards_frame(view, "zh")["curve"]) == {"math", "fmt", "总分"}


def test_samples_table_and_dashboard_updates(tmp_path):
    view = _run(tmp_path)
    table = grpo_panel.samples_frame(view)
    assert list(table.columns) == ["step", "prompt", "completion", "math", "fmt", "total"]
    assert table.iloc[0].tolist()[2:] == ["3", 1.0, 0.0, 1.0] and table.iloc[1]["completion"] == "x"
    out = dashboard.render(view, "step", 0.0, False, "en")
    rewards, std, kl, length, samples = out[-5:]
    assert rewards["visible"] and std["visible"] and kl["visible"] and length["visible"] and samples["visible"]
    assert std["label"] == "Reward spread within the groups (std)"
    assert rewards["label"].startswith("GRPO rewards") and len(samples["value"]) == 2


def test_hidden_for_other_stages(tmp_path):
    events.append_event(tmp_path / "events.jsonl", "log", 1, loss=1.0, metrics={"rewards/margins": 0.1})
    view = monitor.new_view("r1", tmp_path)
    monitor.read_new(view)
    out = dashboard.render(view, "step", 0.0, False, "en")
    assert not any(u["visible"] for u in out[-5:])
