"""Real runs on a CUDA GPU (marked gpu: skipped without CUDA, run by bench/gpu_check.sh on a GPU machine).

The CPU suite proves the logic; these prove what only a GPU shows: bf16 autocast, 4-bit kernels, FSDP through
accelerate, and the measured peak memory that the planner is compared against.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.helpers import demo_spec, log_tail, run_trainer

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu_hardware(monkeypatch):
    monkeypatch.delenv("STUDIO_FORCE_CPU", raising=False)
    from engine.machine import hardware

    hardware.detect.cache_clear()
    hw = hardware.detect()
    yield hw
    hardware.detect.cache_clear()


def run_on_gpu(spec, run_dir, hw):
    rc, events = run_trainer(spec, run_dir, timeout=600, hardware=hw)
    assert rc == 0, log_tail(run_dir, 80)
    return events


def gpu_spec(demo_paths, **overrides):
    overrides.setdefault("train", {})
    overrides["train"] = {"max_steps": 6, "save_steps": 1000, **overrides["train"]}
    return demo_spec(
        demo_paths,
        launch={"device": "cuda", **overrides.pop("launch", {})},
        output={"report_to": ["none"]},
        **overrides,
    )


def test_lora_bf16_records_measured_peak_beside_the_plan(demo_paths, gpu_hardware, tmp_path):
    events = run_on_gpu(gpu_spec(demo_paths), tmp_path, gpu_hardware)
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["device"] == "cuda" and started["precision"] in ("bf16", "fp16")
    finished = events[-1]
    assert finished["type"] == "finished"
    memory = finished["payload"]["memory"]
    assert (
        memory
        and memory[0]["max_allocated_mib"] > 0
        and memory[0]["max_reserved_mib"] >= memory[0]["max_allocated_mib"]
    )
    logs = [e["payload"] for e in events if e["type"] == "log"]
    assert all(math.isfinite(p["loss"]) for p in logs) and logs[-1]["memory"][0]["allocated_mib"] > 0
    assert json.loads((tmp_path / "plan.json").read_text())["total_bytes"] > 0
    from engine.plan.planner import compare

    rows = compare(tmp_path)["rows"]
    assert rows and rows[0]["measured_allocated_bytes"] > 0


def test_qlora_4bit_trains_on_cuda(demo_paths, gpu_hardware, tmp_path):
    events = run_on_gpu(gpu_spec(demo_paths, method={"quantization": {"bits": 4}}), tmp_path, gpu_hardware)
    assert events[-1]["type"] == "finished"


def test_full_finetune_bf16(demo_paths, gpu_hardware, tmp_path):
    events = run_on_gpu(
        gpu_spec(demo_paths, method={"finetuning": "full"}, train={"learning_rate": 1e-5}), tmp_path, gpu_hardware
    )
    assert events[-1]["type"] == "finished" and (tmp_path / "model").is_dir()


def test_fsdp_through_accelerate(demo_paths, gpu_hardware, tmp_path):
    n = min(2, len(gpu_hardware.gpus))
    spec = gpu_spec(
        demo_paths,
        method={"finetuning": "full"},
        launch={"backend": "fsdp", "num_processes": n},
        train={"learning_rate": 1e-5},
    )
    events = run_on_gpu(spec, tmp_path, gpu_hardware)
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["world_size"] == n and events[-1]["type"] == "finished"


def test_grpo_generates_with_vllm(demo_paths, gpu_hardware, tmp_path):
    """Issue 26: `method.grpo.generation_backend: vllm` on a GPU: TRL's GRPOTrainer generates with vLLM (colocated)
    and the run logs each reward's series as with transformers' generate. vLLM pins its own torch: where the
    installed vLLM does not import with the tested torch, this says so instead of running."""
    pytest.importorskip("vllm", reason="vllm is not installed on this GPU machine (pip install vllm)")
    from tests.engine.test_grpo_train import grpo_spec

    spec = grpo_spec(demo_paths, 2)
    data = spec.model_dump(mode="json")
    data["method"]["grpo"]["generation_backend"] = "vllm"
    data["launch"] = {**data.get("launch", {}), "device": "cuda"}
    from engine.spec.schema import RunSpec

    events = run_on_gpu(RunSpec.model_validate(data), tmp_path, gpu_hardware)
    assert events[-1]["type"] == "finished", events[-3:]
    logs = [
        e["payload"]["metrics"] for e in events if e["type"] == "log" and "reward" in e["payload"].get("metrics", {})
    ]
    assert len(logs) == 2 and all("rewards/math/mean" in m for m in logs), logs


def test_fp8_full_finetune_through_accelerate(demo_paths, gpu_hardware, tmp_path):
    """Issue 50 item 4: train.fp8 with torchao on a GPU of compute capability 8.9 or newer: accelerate trains in fp8
    (run_started says which backend it took) with finite losses; below 8.9 the launch refuses (test_fp8.py)."""
    pytest.importorskip("torchao", reason="torchao is not installed on this GPU machine (pip install torchao)")
    from engine.machine.kernels import fp8_device_refusal

    if fp8_device_refusal("cuda", gpu_hardware.gpus[:1]) is not None:
        pytest.skip(f"{gpu_hardware.gpus[0].name} has compute capability {gpu_hardware.gpus[0].compute_capability}")
    spec = gpu_spec(
        demo_paths,
        method={"finetuning": "full"},
        train={"learning_rate": 1e-5, "precision": "bf16", "fp8": True, "fp8_backend": "torchao"},
    )
    events = run_on_gpu(spec, tmp_path, gpu_hardware)
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert (started["precision"], started["fp8"]) == ("bf16", "torchao")
    logs = [e["payload"] for e in events if e["type"] == "log"]
    assert logs and all(math.isfinite(p["loss"]) for p in logs) and events[-1]["type"] == "finished"
