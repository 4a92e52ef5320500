"""LLaMA-Factory's ``pref_loss: orpo`` / ``simpo`` (with ``simpo_gamma``, ``pref_beta``, ``pref_ftx``): imported onto
TRL's ORPOTrainer / CPOTrainer (loss_type simpo), trained 2 steps from LF's dpo example YAML through `studio train`,
and their figures read by the dashboard's preference charts."""

from __future__ import annotations

import contextlib
import io
import math
import shutil
from pathlib import Path

import pytest
import yaml

from engine import cli as studio_cli
from engine.core.events import read_all

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lf"
LOSSES = {"orpo": {"pref_beta": 0.2}, "simpo": {"pref_beta": 2.0, "simpo_gamma": 0.8, "pref_ftx": 0.5}}


def _studio(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = studio_cli.main(list(argv))
    return rc, out.getvalue()


def lf_yaml(root: Path, model: str, loss: str) -> Path:
    path = root / "examples" / "train_lora" / "qwen3_lora_dpo.yaml"
    args = yaml.safe_load(path.read_text(encoding="utf-8"))
    args |= {"model_name_or_path": model, "max_steps": 2, "logging_steps": 1, "pref_loss": loss, **LOSSES[loss]}
    args |= {"output_dir": f"saves/{loss}", "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1}
    out = root / f"{loss}.yaml"
    out.write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def lf_root(tmp_path_factory):
    top = tmp_path_factory.mktemp("lf-orpo-simpo")
    root = top / "LLaMA-Factory"
    shutil.copytree(FIXTURE, root)
    return top, root


def test_import_maps_the_losses(lf_root, demo_paths):
    from engine.lf.compat import load_any

    _, root = lf_root
    orpo = load_any(lf_yaml(root, demo_paths["model_dir"], "orpo"), context=False).method.dpo
    simpo = load_any(lf_yaml(root, demo_paths["model_dir"], "simpo"), context=False).method.dpo
    assert (orpo.loss_type, orpo.beta) == ("orpo", 0.2)
    assert (simpo.loss_type, simpo.beta, simpo.simpo_gamma, simpo.ftx) == ("simpo", 2.0, 0.8, 0.5)


@pytest.mark.parametrize("loss", list(LOSSES))
def test_trains_and_draws_preference_figures(lf_root, demo_paths, loss):
    from engine.runs import registry as runs
    from studio import monitor

    top, root = lf_root
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STUDIO_HOME", str(top / f"home-{loss}"))
        mp.setenv("STUDIO_CPU_SLOTS", "1")
        mp.setenv("STUDIO_OUTPUT_ROOTS", str(root))
        mp.chdir(root)
        rc, out = _studio("train", str(lf_yaml(root, demo_paths["model_dir"], loss)))
        recs = [r for r in runs.list_runs() if r.kind == "train"]
        assert rc == 0 and len(recs) == 1, out[-3000:]
        run_dir = Path(recs[0].run_dir)
    events = read_all(run_dir / "events.jsonl")
    assert events[-1]["type"] == "finished", out[-3000:]
    logs = [e["payload"] for e in events if e["type"] == "log"]
    assert len(logs) == 2 and all(math.isfinite(p["loss"]) for p in logs)
    for p in logs:
        m = p["metrics"]
        # TRL's figures, checked against each other: the margin is chosen minus rejected
        assert abs(m["rewards/margins"] - (m["rewards/chosen"] - m["rewards/rejected"])) < 1e-4
        assert 0 <= m["rewards/accuracies"] <= 1
        assert ("log_odds_ratio" in m) == (loss == "orpo") and "nll_loss" in m
    view = monitor.new_view(recs[0].id, run_dir)
    monitor.read_new(view)
    frame = monitor.stage_frame(view, "rewards")
    names = {monitor._stage_name(f, False, "en") for f in ("chosen", "rejected", "margin")}
    assert names <= set(frame["curve"]) and len(frame) >= 6  # three curves, a point per logged step each
    drawn = frame[frame["curve"] == monitor._stage_name("margin", False, "en")]["value"].tolist()
    assert drawn == pytest.approx([p["metrics"]["rewards/margins"] for p in logs])
    assert len(monitor.stage_frame(view, "accuracy")) == 2
