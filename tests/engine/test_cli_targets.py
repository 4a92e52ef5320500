"""What the command line promises about targets (issue 27 items 17 and 22): `studio plan` takes an LF YAML's
accelerate config; one flag names the GPU memory on plan, validate and preview (the old `--gpu-mem-gib` kept);
`runs --help` says what rename does; `studio validate` refuses a Slurm spec as `studio train` would (no shared run
folder); the per-node commands' environment is the one the Slurm script exports (STUDIO_HOME, STUDIO_DEVICE,
STUDIO_PRECISION); the one-host test cluster is a documented command. No cluster is started."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.runs.launch import add_target_arguments, build_command, preview_text, target_from_arguments
from tests.helpers import demo_spec

ROOT = Path(__file__).resolve().parents[2]
LF = ROOT / "assets" / "examples" / "lf"


def studio(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(ROOT),
        env=env or dict(os.environ),
    )


def test_plan_takes_the_lf_accelerate_config():
    out = studio(
        "plan", str(LF / "train_args.yaml"), "--accelerate-config", str(LF / "accelerate" / "zero3_8gpu.yaml"),
        "--gpu-mem", "80GiB", "--json",
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stdout + out.stderr
    plan = json.loads(out.stdout)["plan"]
    # the accelerate config's 8 processes and ZeRO-3 reach the plan (without it: one process, no sharding)
    assert plan["details"]["world_size"] == 8, plan["details"]
    assert any("sharded over 8 ranks" in note for note in plan["notes"]), plan["notes"]


def test_one_gpu_memory_flag_on_plan_validate_and_preview(tmp_path):
    parser = argparse.ArgumentParser()
    parser.add_argument("spec")
    add_target_arguments(parser)
    new = target_from_arguments(parser.parse_args(["s", "--gpus", "2", "--gpu-mem", "24GiB"]))
    old = target_from_arguments(parser.parse_args(["s", "--gpus", "2", "--gpu-mem-gib", "24"]))
    assert [g.memory_total_mib for g in new.gpus] == [g.memory_total_mib for g in old.gpus] == [24 * 1024] * 2
    with pytest.raises(SystemExit):
        parser.parse_args(["s", "--gpus", "2", "--gpu-mem", "lots"])
    spec = LF / "train_args.yaml"
    acc = ["--accelerate-config", str(LF / "accelerate" / "zero3_8gpu.yaml")]
    for flag, value in (("--gpu-mem", "24GiB"), ("--gpu-mem-gib", "24")):
        out = studio("plan", str(spec), *acc, flag, value)
        assert "in 24.00 GiB per GPU" in out.stdout, out.stdout + out.stderr
    for command in ("validate", "preview"):
        helped = studio(command, "--help").stdout
        assert "--gpu-mem SIZE" in helped, helped
    assert "--gpu-mem" in studio("plan", "--help").stdout


def test_runs_help_describes_every_action():
    helped = studio("runs", "--help").stdout
    actions = helped.split("{", 1)[1].split("}", 1)[0].split(",")
    assert "rename" in actions
    for action in actions:
        described = [line for line in helped.splitlines() if line.strip().startswith(action + " ")]
        assert described and len(described[0].split()) > 1, f"runs {action} has no description:\n{helped}"


def _fake_slurm(folder: Path) -> Path:
    """Slurm's client commands as scripts that answer nothing: present, as `studio train` first checks."""
    folder.mkdir()
    for name in ("sbatch", "squeue", "scancel", "scontrol", "sacct", "sinfo"):
        path = folder / name
        path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        path.chmod(0o755)
    return folder


def test_validate_refuses_a_slurm_spec_without_a_shared_run_folder(demo_paths, tmp_path):
    spec = demo_spec(demo_paths, launch={"target": "slurm", "device": "cpu"})
    path = tmp_path / "slurm.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "STUDIO_SLURM_SHARED"}
    env["STUDIO_SLURM_BIN"] = str(_fake_slurm(tmp_path / "bin"))
    refused = studio("validate", str(path), env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "launch.target: no shared run folder is set" in refused.stderr and "STUDIO_SLURM_SHARED" in refused.stderr
    shared = tmp_path / "shared"
    shared.mkdir()
    ok = studio("validate", str(path), env=dict(env, STUDIO_SLURM_SHARED=str(shared)))
    assert ok.returncode == 0 and ok.stdout.strip() == "OK", ok.stdout + ok.stderr


def _blocks(text: str) -> dict[str, str]:
    out = {}
    for block in text.split("\n\n"):
        head, _, body = block.strip("\n").partition("\n")
        out[head.strip()] = body
    return out


def test_per_node_commands_set_what_the_slurm_script_exports(demo_paths, monkeypatch):
    from engine.machine.hardware import target_machine

    spec = demo_spec(demo_paths, launch={"backend": "ddp", "num_machines": 2, "main_process_ip": "10.0.0.1"})
    monkeypatch.delenv("STUDIO_HOME", raising=False)  # the default workspace: the nodes must still be told it
    home = str(Path("~/.studio").expanduser())
    for hardware in (target_machine(0, 0), target_machine(2, 80)):
        text = preview_text(spec, Path("/shared/runs/r1"), hardware)
        blocks = _blocks(text)
        assert "# machine 1" in blocks, text
        env = dict(line.split("=", 1) for line in blocks["# environment"].splitlines() if "=" in line)
        plan = build_command(spec, Path("/shared/runs/r1"), hardware)
        assert env["STUDIO_HOME"] == home
        assert (env["STUDIO_DEVICE"], env["STUDIO_PRECISION"]) == (plan.device, plan.precision)
        exports = dict(
            line.removeprefix("export ").split("=", 1)
            for line in plan.slurm_script.splitlines()
            if line.startswith("export ") and "=" in line
        )
        exports.pop("MAIN_ADDR", None)
        # every variable the Slurm script sets is in the per-node environment, with the same value
        assert {k: v.strip("'") for k, v in exports.items()} == {k: env[k] for k in exports}


def test_the_one_host_cluster_is_a_command_that_says_why_it_cannot_start(monkeypatch, capsys):
    from tests import slurm_cluster

    monkeypatch.setattr(slurm_cluster, "unavailable", lambda: "Slurm / munge not installed (slurmd missing)")
    assert slurm_cluster.main(["/nonexistent/folder"]) == 1
    assert "cannot start a Slurm cluster here: Slurm / munge not installed" in capsys.readouterr().err
    helped = subprocess.run(
        [sys.executable, "-m", "tests.slurm_cluster", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert helped.returncode == 0 and "FOLDER" in helped.stdout.upper()
