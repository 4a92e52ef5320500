"""On a machine without a GPU (issue 27, item 8), the plan panel, ``studio plan`` and the trainer's run_started say
the same thing for a spec left on device auto: the run trains on the CPU, its memory is host memory compared with
what the machine has free, and gradient checkpointing auto is decided against that host memory, not "on because no
GPU is known"."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.machine import hardware
from engine.plan import planner
from studio import forms
from studio.tabs import train_plan

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(bool(hardware.detect().gpus), reason="a machine without a GPU is what this checks")


def _spec_data(demo_paths) -> dict:
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text(encoding="utf-8"))
    data["launch"]["device"] = "auto"
    data["train"]["gradient_checkpointing"] = "auto"
    return data


def test_panel_cli_and_trainer_agree_on_a_cpu_machine(demo_paths, tmp_path):
    from engine.spec.schema import parse_spec
    from engine.trainer.train import resolve_checkpointing

    data = _spec_data(demo_paths)
    mp = planner.plan(parse_spec(data), hardware=hardware.detect())
    assert mp.details["device"] == "cpu" and mp.details["host_budget_bytes"] > 0
    assert "the host memory less a 10%" in str(mp.checkpointing_reason)
    assert "no GPU here, none given" not in str(mp.checkpointing_reason)

    # the trainer decides on the same plan for the device it runs on
    spec = parse_spec(data)
    _, reason = resolve_checkpointing(spec, "cpu")
    assert (spec.train.gradient_checkpointing == "on") is mp.checkpointing
    assert "the host memory less a 10%" in reason

    # the panel: one host-memory row, no "GPU 0", the same decision
    shown = train_plan.plan_html(forms.spec_to_values(data), None, "en")
    text = re.sub(r"<[^>]+>", " ", shown)
    assert "CPU (host memory):" in text and "GPU 0" not in text and "no GPU memory to compare" not in text
    assert "trains on the CPU" in text
    assert ("gradient checkpointing on" if mp.checkpointing else "gradient checkpointing off") in text.lower()
    zh = re.sub(r"<[^>]+>", " ", train_plan.plan_html(forms.spec_to_values(data), None, "zh"))
    assert "CPU（主机内存）" in zh and "在 CPU 上训练" in zh

    # studio plan, as a person runs it
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "plan", str(path)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "of free host memory (no GPU here: the run trains on the CPU)" in done.stdout, done.stdout
    assert "fits: unknown" not in done.stdout and "per GPU" not in done.stdout
    assert f"gradient checkpointing: {'on' if mp.checkpointing else 'off'} (auto:" in done.stdout
