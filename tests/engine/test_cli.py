"""The `studio` command: help, validate, preview, and `studio train` end to end on the demo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from engine.cli import COMMANDS
from tests.helpers import demo_spec

ROOT = Path(__file__).resolve().parents[2]


def studio(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
        env=dict(os.environ),
    )


def test_help_lists_every_subcommand():
    out = studio("--help")
    assert out.returncode == 0
    for name in ("webui", "train", "merge", "demo", "validate", "preview", "plan", "doctor", "runs", "queue"):
        assert name in COMMANDS and f"  {name}" in out.stdout


def test_unknown_command_fails_with_usage():
    out = studio("frobnicate")
    assert out.returncode == 2 and "unknown command" in out.stderr


def test_importing_the_cli_loads_no_torch():
    code = (
        "import sys, engine.cli, engine.spec.schema, engine.runs.launch, engine.runs.registry, engine.lf.compat, "
        "engine.lf.keys, engine.lf.launch_settings; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT))
    assert out.stdout.strip() == "False", out.stderr


class TestValidate:
    def test_ok(self, demo_paths):
        out = studio("validate", demo_paths["example_spec"])
        assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr

    def test_every_problem_listed_with_its_field(self, demo_paths, tmp_path):
        data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
        data["train"]["learning_rate"] = -1
        data["data"]["datasets"] = ["no_such_dataset"]
        data["bogus"] = 1
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump(data))
        out = studio("validate", str(bad))
        assert out.returncode == 1
        assert "train.learning_rate" in out.stderr and "bogus" in out.stderr

    def test_context_rules_reach_the_user(self, demo_paths, tmp_path):
        spec = demo_spec(demo_paths, data={"datasets": ["no_such_dataset"]})
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
        out = studio("validate", str(path))
        assert out.returncode == 1 and "data.datasets" in out.stderr and "no_such_dataset" in out.stderr

    def test_an_unknown_template_is_refused_with_the_names(self, demo_paths, tmp_path):
        data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
        data["data"]["template"] = "qwen4"
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(data))
        out = studio("validate", str(path))
        assert out.returncode == 1 and "data.template" in out.stderr and "'qwen4'" in out.stderr
        assert "qwen3_nothink" in out.stderr and "llama3" in out.stderr

    def test_hardware_rules_are_checked_before_launch(self, demo_paths, tmp_path):
        spec = demo_spec(demo_paths, train={"precision": "fp16"})
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
        out = studio("validate", str(path))
        assert out.returncode == 1 and "train.precision" in out.stderr


def test_preview_prints_commands_and_configs(demo_paths, tmp_path):
    spec = demo_spec(demo_paths, launch={"backend": "deepspeed", "num_processes": 2})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    out = studio("preview", str(path))
    assert out.returncode == 0, out.stderr
    assert "accelerate.commands.launch" in out.stdout and '"zero_optimization"' in out.stdout


def test_train_runs_the_demo_to_completion(demo_paths, tmp_path, monkeypatch):
    """Two runs in a fresh workspace: each completes; the machine's lack of GPU metrics is said once, as a note
    (issue 45 item 9: a warning on every run of a machine without GPUs)."""
    spec = demo_spec(demo_paths, train={"max_steps": 3, "save_steps": 1000}, output={"report_to": ["none"]})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    monkeypatch.setenv("STUDIO_HOME", str(tmp_path / "home"))
    outs = [studio("train", str(path), "--name", f"cli-test-{i}") for i in range(2)]
    for out in outs:
        assert out.returncode == 0, out.stdout + out.stderr
        assert "step 3/3" in out.stdout and "completed" in out.stdout
        assert "warning: field=metrics" not in out.stdout + out.stderr
    first, second = (o.stdout + o.stderr for o in outs)
    assert first.count("note: GPU metrics") == 1 and "(said once per workspace)" in first, first
    assert "GPU metrics" not in second, second


def test_train_exits_nonzero_when_the_run_fails(demo_paths, tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "dataset_info.json").write_text('{"broken": {"file_name": "broken.jsonl"}}')
    (data_dir / "broken.jsonl").write_text('{"instruction": "hi", "output": "ok"}\n{"instruction": \n')
    spec = demo_spec(demo_paths, data={"datasets": ["broken"], "dataset_dir": str(data_dir)})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    out = studio("train", str(path))
    assert out.returncode != 0
    assert "broken.jsonl" in out.stdout + out.stderr and "2" in out.stdout + out.stderr


def test_a_failure_inside_the_trainer_is_said_without_its_traceback(demo_paths, tmp_path):
    """The trainer's traceback stays in train.log: `studio train` says the failure in its line and where the log is
    (issue 47 item 8: it echoed the traceback, twice)."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(demo_paths["model_dir"], model)
    (model / "model.safetensors").write_bytes(b"not safetensors at all" * 100)
    spec = demo_spec(demo_paths, model={"name_or_path": str(model)})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    out = studio("train", str(path))
    said = out.stdout + out.stderr
    assert out.returncode == 1 and "Traceback" not in said and 'File "' not in said, said
    ended = [line for line in out.stdout.splitlines() if line.startswith("run ") and ": failed (" in line]
    assert len(ended) == 1, said
    assert "its log: " in out.stderr and "train.log (studio runs logs " in out.stderr
    log = Path(out.stderr.split("its log: ", 1)[1].split(" (", 1)[0])
    assert "Traceback" in log.read_text()  # kept where it belongs


def test_commands_suggested_as_this_shell_runs_them(tmp_path, monkeypatch):
    """After scripts/demo.sh the `studio` script is .venv/bin/studio, not on PATH: a suggested command names it so
    (issue 45 item 1: `studio demo` printed `studio train ...`, which failed as printed)."""
    from engine.cli import invocation

    mine = Path(sys.executable).parent / "studio"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert invocation() == (str(mine) if mine.is_file() else "studio")
    monkeypatch.setenv("PATH", f"{mine.parent}:/usr/bin:/bin")
    assert invocation() == "studio"
