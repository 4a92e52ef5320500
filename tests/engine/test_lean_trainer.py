"""A trainer process imports only what its run uses: bitsandbytes stays out of a run that cannot use it
(engine.trainer.lean) and comes in for one that can."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.machine.kernels import with_gptq_path
from tests.helpers import demo_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "overrides, needed",
    [
        ({}, False),  # the demo LoRA run
        ({"method": {"quantization": {"bits": 4}}}, True),  # QLoRA
        ({"method": {"quantization": {"bits": 8}}}, True),
        ({"train": {"optimizer": "adamw_8bit"}}, True),
        ({"train": {"optimizer": "paged_adamw_8bit"}}, True),
        ({"train": {"optimizer": "adafactor"}}, False),
        ({"model": {"name_or_path": "nobody-here/not-a-model"}}, True),  # a config nobody can read: kept
    ],
)
def test_which_runs_need_bitsandbytes(demo_paths, overrides, needed):
    from engine.trainer.lean import needs_bitsandbytes

    assert needs_bitsandbytes(demo_spec(demo_paths, **overrides)) is needed


def test_a_pre_quantized_model_folder_needs_bitsandbytes(demo_paths, tmp_path):
    """A "bnb-4bit" upload trains with quantization off in the spec: its config.json says it is quantized."""
    from engine.trainer.lean import needs_bitsandbytes

    folder = tmp_path / "tiny-bnb-4bit"
    shutil.copytree(demo_paths["model_dir"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    (folder / "config.json").write_text(json.dumps(config))
    assert needs_bitsandbytes(demo_spec(demo_paths, model={"name_or_path": str(folder)})) is True
    assert needs_bitsandbytes(demo_spec(demo_paths, model={"name_or_path": str(demo_paths["model_dir"])})) is False


PROBE = """
import sys
from engine.spec.schema import load_spec
from engine.trainer import lean
spec = load_spec(sys.argv[1])
assert lean.without_quantizers(False) is False  # not said to be the job's own process: left as it is
lean.own_process()  # as the trainer's `python -m` entry says
marked = lean.without_quantizers(lean.needs_bitsandbytes(spec))
from transformers import AutoModelForCausalLM, is_bitsandbytes_available
from peft import LoraConfig, get_peft_model
model = AutoModelForCausalLM.from_pretrained(spec.model.name_or_path)
lora = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear"))
assert lora.get_nb_trainable_parameters()[0] > 0
bnb, gptq = (sys.modules.get(name) is not None for name in ("bitsandbytes", "gptqmodel"))
print(marked, bnb, is_bitsandbytes_available(), gptq)
"""


@pytest.mark.parametrize(
    "bits, lean, said",
    [(0, "on", "True False False False"), (4, "on", "False True True True"), (0, "off", "False True True True")],
)
def test_a_plain_lora_process_never_imports_the_quantizers(demo_paths, tmp_path, bits, lean, said):
    """In a fresh interpreter, as the trainer's ``main`` does: the demo LoRA run's process loads the model and wraps
    it with LoRA without importing bitsandbytes or gptqmodel (which peft's LoRA wrap imports whenever it is installed
    with optimum, as the test set-up installs them), and transformers says bitsandbytes is unavailable; a QLoRA spec's
    process imports both as before (the case that shows the probe is real), and so does any with
    STUDIO_LEAN_IMPORTS=off."""
    from engine.spec.schema import save_spec

    spec = demo_spec(demo_paths, method={"quantization": {"bits": bits}})
    path = tmp_path / "spec.yaml"
    save_spec(spec, path)
    path_ = with_gptq_path(str(ROOT))  # the trainer's: gptqmodel in the set-up's own folder (launch.subprocess_env)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": path_, "STUDIO_LEAN_IMPORTS": lean}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == said, out.stdout + out.stderr[-2000:]
