"""Every shipped example spec validates (with its files), previews and plans on a fresh workspace, through the
commands a user types; the CPU-sized ones train for real. Hub models plan from Studio's table of published configs:
no network (HF_HUB_OFFLINE=1), no model download."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "assets" / "examples").glob("*.yaml"))
CPU_EXAMPLES = ["lora_sft_demo.yaml", "ddp_2proc_cpu.yaml"]


@pytest.fixture(scope="module")
def fresh_home(tmp_path_factory) -> Path:
    """A new workspace with only what `studio demo` builds (the demo model and datasets)."""
    home = tmp_path_factory.mktemp("fresh-workspace")
    out = studio(home, "demo")
    assert out.returncode == 0, out.stderr
    return home


def studio(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, STUDIO_HOME=str(home), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_validates_previews_and_plans_on_a_fresh_workspace(path, fresh_home):
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    launch = spec.get("launch") or {}
    # GPU examples are checked for the machine they are written for (8 GPUs), as a user previews a cluster run
    target = [] if launch.get("device") == "cpu" else ["--gpus", str(max(8, launch.get("num_processes", 1)))]
    validated = studio(fresh_home, "validate", str(path), *target)
    assert validated.returncode == 0 and validated.stdout.startswith("OK"), validated.stdout + validated.stderr
    preview = studio(fresh_home, "preview", str(path), *target)
    assert preview.returncode == 0 and "accelerate.commands.launch" in preview.stdout, preview.stdout + preview.stderr
    assert "Cannot launch" not in preview.stdout, preview.stdout
    plan = studio(fresh_home, "plan", str(path), "--gpu-mem", "80GiB")
    assert "per GPU" in plan.stdout and plan.returncode in (0, 1), plan.stdout + plan.stderr  # 1: does not fit
    if not str(spec["model"]["name_or_path"]).startswith("models/"):
        assert "Studio's table of published configs" in plan.stdout, "a hub model plans from the table offline"


def test_examples_name_no_home_folder():
    for path in EXAMPLES:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert not str(spec["model"]["name_or_path"]).startswith("~"), f"{path.name}: use a workspace-relative path"


@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_EXAMPLES)
def test_cpu_example_trains(name, fresh_home):
    out = studio(fresh_home, "train", str(ROOT / "assets" / "examples" / name), timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "completed" in out.stdout.lower(), out.stdout[-2000:]
