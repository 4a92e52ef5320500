"""The Runs tab's overlay compares GRPO runs on what they log (issue 26 item 4): the figure picker offers the loss,
the weighted total reward, each reward function's mean and the KL of the chosen runs, and the overlay draws the
chosen figure of each run over its steps, named by the run; the values are the ones in the runs' events files."""

from __future__ import annotations

from types import SimpleNamespace

from engine.core import events, workspace
from studio.tabs import runs

FIGURES = {
    "grpo-a": [(1, 0.25, 0.5, 0.0), (2, 0.5, 0.75, 0.01)],
    "grpo-b": [(1, 0.0, 0.25, 0.0), (2, 0.25, 0.25, 0.02), (3, 0.75, 1.0, 0.03)],
}


def _write_runs():
    for rid, rows in FIGURES.items():
        rdir = workspace.runs_dir() / rid
        rdir.mkdir(parents=True, exist_ok=True)
        path = rdir / "events.jsonl"
        path.unlink(missing_ok=True)
        for step, math_, fmt, kl in rows:
            metrics = {
                "loss": 0.0001 * step,
                "rewards/math/mean": math_,
                "rewards/math/std": 0.1,
                "rewards/format/mean": fmt,
                "reward": math_ + 0.5 * fmt,
                "kl": kl,
                "completions/mean_length": 8.0,
            }
            events.append_event(path, "log", step, loss=metrics["loss"], metrics=metrics)


def test_figure_picker_offers_what_grpo_runs_log(studio_home, monkeypatch):
    _write_runs()
    monkeypatch.setattr(runs, "runs", SimpleNamespace(get=lambda rid: SimpleNamespace(name=f"name-{rid[-1]}")))
    assert runs.figure_choices(["grpo-a", "grpo-b"]) == [
        ("Loss", "loss"),
        ("total reward", "reward"),
        ("reward: format", "rewards/format/mean"),
        ("reward: math", "rewards/math/mean"),
        ("KL", "kl"),
    ]
    assert runs.figure_choices(["grpo-a"], "zh")[1:3] == [
        ("总奖励", "reward"),
        ("奖励：format", "rewards/format/mean"),
    ]
    assert runs.figure_choices([]) == [("Loss", "loss")]


def test_overlay_draws_the_chosen_figure_of_each_run(studio_home, monkeypatch):
    _write_runs()
    monkeypatch.setattr(runs, "runs", SimpleNamespace(get=lambda rid: SimpleNamespace(name=f"name-{rid[-1]}")))
    frame = runs.overlay(["grpo-a", "grpo-b"], figure="rewards/math/mean")
    got = sorted(zip(frame["run"], frame["x"], frame["value"]))
    want = sorted((f"name-{rid[-1]}", float(s), m) for rid, rows in FIGURES.items() for s, m, _, _ in rows)
    assert got == want
    total = runs.overlay(["grpo-b"], figure="reward")
    assert list(total["value"]) == [0.0 + 0.5 * 0.25, 0.25 + 0.5 * 0.25, 0.75 + 0.5 * 1.0]
    loss = runs.overlay(["grpo-a"])  # the loss stays the default, as for any run
    assert set(loss["run"]) == {"name-a"} and list(loss["value"]) == [0.0001, 0.0002]
