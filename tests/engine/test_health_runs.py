"""Health rules in real runs of the demo: a run that diverges is stopped with its last good checkpoint kept, a run
that overfits is said to. The trainer is the real subprocess (engine.runs.launch's command)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from engine.core.messages import from_json
from tests.helpers import demo_spec, log_tail, run_trainer


def _num(value) -> float:
    return float(value)  # events write NaN / inf as text; float() reads both


GRAD_NORM_MAX = 1e4  # the rule's default limit (engine.spec.watch_group.HealthSpec.grad_norm_max)


def _over(payload: dict) -> bool:
    """The gradient-norm or loss rule's condition on one logged step."""
    norm, loss = _num(payload["grad_norm"]), _num(payload["loss"])
    return not math.isfinite(norm) or norm > GRAD_NORM_MAX or not math.isfinite(loss)


def test_learning_rate_one_is_stopped_at_the_first_non_finite_gradient(demo_paths, tmp_path):
    spec = demo_spec(demo_paths, train={"learning_rate": 1.0, "max_steps": 60, "save_steps": 10})
    rc, evs = run_trainer(spec, tmp_path / "run", timeout=600)
    assert rc == 0, log_tail(tmp_path / "run")
    logs = [e for e in evs if e["type"] == "log"]
    # where it diverged, read from the logged figures themselves: the first gradient norm that is not finite or is
    # over the rule's limit (the demo may pass the limit with a finite norm a few steps before it reaches inf)
    bad = next(e["step"] for e in logs if _over(e["payload"]))
    # the alert that stopped it; rules that only note or warn may fire earlier (on a busy machine the throughput rule
    # notes a step that took five times its usual time)
    alerts = [e for e in evs if e["type"] == "alert" and e["payload"]["action"] == "stop"]
    assert alerts, log_tail(tmp_path / "run")
    first = alerts[0]
    assert first["step"] == bad
    assert first["payload"]["rule"] in ("grad_norm", "loss_nan") and first["payload"]["action"] == "stop"
    # the run ended there instead of going on to step 60
    assert logs[-1]["step"] == bad
    assert evs[-1]["type"] == "stopped" and evs[-1]["step"] == bad
    # a checkpoint is kept, with finite weights (read here with numpy): saved at the stop when the weights were still
    # finite (an infinite norm clipped to a zero update), else the last one before it; no broken one was written
    folders = sorted(int(p.name.split("-")[1]) for p in (tmp_path / "run" / "checkpoints").glob("checkpoint-*"))
    assert folders and max(folders) <= bad
    for step in folders:
        weights = load_file(str(tmp_path / "run" / "checkpoints" / f"checkpoint-{step}" / "adapter_model.safetensors"))
        assert weights and all(np.isfinite(w).all() for w in weights.values()), step
    kept = max(folders)
    stopped = evs[-1]["payload"]
    assert stopped["weights_finite"] == (kept == bad)
    assert (tmp_path / "run" / "adapter").exists() == (kept == bad)  # no final weights from broken ones
    what = first["payload"]["reason"]
    how = "saved" if kept == bad else "kept"
    assert stopped["reason"] == f"stopped by health rule: {what} at step {bad}; checkpoint-{kept} {how}"
    assert from_json(stopped["reason_msg"]).key == f"watch.health_stop_{how}"


def test_two_ddp_ranks_stop_together(demo_paths, tmp_path):
    """Rank 0 judges, every rank stops at the same step (an all-reduce in the callback): no rank trains on alone or
    waits forever in a collective."""
    spec = demo_spec(
        demo_paths,
        train={"learning_rate": 1.0, "max_steps": 60, "save_steps": 10},
        launch={"backend": "ddp", "num_processes": 2, "device": "cpu", "main_process_port": 29633},
        output={"report_to": ["none"]},
    )
    rc, evs = run_trainer(spec, tmp_path / "run", timeout=900)
    assert rc == 0, log_tail(tmp_path / "run")
    (alert,) = [e for e in evs if e["type"] == "alert" and e["payload"]["action"] == "stop"]
    assert evs[-1]["type"] == "stopped" and evs[-1]["step"] == alert["step"]
    assert [e for e in evs if e["type"] == "log"][-1]["step"] == alert["step"]
    assert evs[-1]["payload"]["reason"].startswith(f"stopped by health rule: {alert['payload']['reason']} at step ")


def test_health_stop_off_lets_the_run_go_on(demo_paths, tmp_path):
    spec = demo_spec(
        demo_paths,
        train={"learning_rate": 1.0, "max_steps": 30, "save_steps": 100},
        health={"grad_norm": "note", "loss_nan": "note"},
    )
    rc, evs = run_trainer(spec, tmp_path / "run", timeout=600)
    assert rc == 0, log_tail(tmp_path / "run")
    assert evs[-1]["type"] == "finished" and evs[-1]["step"] == 30
    notes = [e for e in evs if e["type"] == "alert"]
    assert notes and all(e["payload"]["action"] == "note" for e in notes)
    # each rule fires once for its episode, not on every step of it: between two alerts of the gradient-norm rule the
    # logged figures came back within its limit at least once (the demo's norm swings above and below 1e4)
    logs = {e["step"]: e["payload"] for e in evs if e["type"] == "log"}
    steps = [e["step"] for e in notes if e["payload"]["rule"] == "grad_norm"]
    assert steps and all(_over(logs[s]) for s in steps)
    for a, b in zip(steps, steps[1:]):
        assert any(not _over(logs[s]) for s in logs if a < s < b), (a, b)


def read_evals(evs: list[dict]) -> list[tuple[int, float]]:
    return [(e["step"], float(e["payload"]["eval_loss"])) for e in evs if e["type"] == "eval"]


def test_overfitting_raises_the_eval_rule(demo_paths, tmp_path: Path):
    # 8 training rows learnt by heart (full fine-tuning, a constant learning rate), 8 held out
    spec = demo_spec(
        demo_paths,
        method={"finetuning": "full"},
        data={"max_samples": 16, "val_size": 0.5},
        train={
            "learning_rate": 5e-3,
            "lr_scheduler": "constant",
            "max_steps": -1,
            "num_epochs": 30,
            "save_strategy": "no",
            "eval_strategy": "steps",
            "eval_steps": 4,
            "logging_steps": 2,
            "warmup_steps": 0,
        },
        health={"eval_patience": 3},
    )
    rc, evs = run_trainer(spec, tmp_path / "run", timeout=900)
    assert rc == 0, log_tail(tmp_path / "run")
    alerts = [e for e in evs if e["type"] == "alert" and e["payload"]["rule"] == "eval_overfit"]
    assert alerts, [(e["type"], e["step"]) for e in evs]
    at = alerts[0]["step"]
    # checked against the run's own evals, as early stopping reads them: the alert came at the first evaluation
    # three or more evaluations after the lowest eval loss so far
    evals = [v for s, v in read_evals(evs) if s <= at]
    best = evals.index(min(evals))
    assert len(evals) - 1 - best == 3, evals
    assert all(len(evals[:i]) - 1 - evals[:i].index(min(evals[:i])) < 3 for i in range(1, len(evals))), evals
    train = [float(e["payload"]["loss"]) for e in evs if e["type"] == "log" and e["step"] <= at]
    assert train[-1] < train[0]
    assert alerts[0]["payload"]["action"] == "warn" and evs[-1]["type"] == "finished"
