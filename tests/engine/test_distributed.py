"""Real 2-process runs on CPU (gloo): DDP and DeepSpeed ZeRO-2/3 reach the single-process losses.

Same global batch on both sides (1 process x 4 samples vs 2 processes x 2 samples), same seed and data order, and
transformers averages the loss over the tokens of the whole global batch (average_tokens_across_devices), so the
runs compute the same gradients up to floating-point reduction order: the per-step losses agree to ~1e-5 relative.
We allow 1e-3 relative, which float32 reduction order cannot reach on a model this size but any real divergence
(a rank training on other data, gradients not averaged, one rank's update missing) exceeds within a step or two.
The ZeRO runs must also leave DeepSpeed's optimizer states in one shard per rank: accelerate can quietly train plain
DDP instead (it did while the launch set ACCELERATE_USE_CPU), which reaches the same losses. And they must build no
op: each run gets its own empty TORCH_EXTENSIONS_DIR, where DeepSpeed's CPU shared-memory all-reduce, an op training
never uses, took a minute's compile on a machine's first run before the trainer told DeepSpeed to leave it.
"""

from __future__ import annotations

import pytest

from tests.helpers import deepspeed_shards, demo_spec, log_tail, losses, run_trainer

STEPS = 6
pytestmark = pytest.mark.slow


def spec_for(demo_paths, launch: dict, batch: int):
    return demo_spec(
        demo_paths,
        launch=launch,
        train={
            "max_steps": STEPS,
            "per_device_batch_size": batch,
            "gradient_accumulation": 1,
            "save_steps": 1000,
            "logging_steps": 1,
            "learning_rate": 1e-3,
            "warmup_steps": 0,
        },
        data={"max_samples": 64},
        output={"report_to": ["none"]},
    )


@pytest.fixture(scope="module")
def single(demo_paths, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("single")
    rc, events = run_trainer(spec_for(demo_paths, {"backend": "single"}, 4), run_dir)
    assert rc == 0, log_tail(run_dir)
    return losses(events)


LAUNCHES = {
    "ddp": {"backend": "ddp", "num_processes": 2},
    "zero2": {"backend": "deepspeed", "num_processes": 2, "deepspeed": {"zero_stage": 2}},
    "zero3": {"backend": "deepspeed", "num_processes": 2, "deepspeed": {"zero_stage": 3}},
}


@pytest.mark.parametrize("name", list(LAUNCHES))
def test_two_processes_match_single(name, single, demo_paths, tmp_path, monkeypatch):
    extensions = tmp_path / "torch_extensions"  # what DeepSpeed JIT-builds for this run, and only that
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(extensions))
    run_dir = tmp_path / "run"
    rc, events = run_trainer(spec_for(demo_paths, LAUNCHES[name], 2), run_dir, timeout=600)
    assert rc == 0, log_tail(run_dir, 80)
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["world_size"] == 2
    assert events[-1]["type"] == "finished"
    got = losses(events)
    assert sorted(got) == list(range(1, STEPS + 1))
    for step, want in single.items():
        assert got[step] == pytest.approx(want, rel=1e-3), f"{name} step {step}: {got[step]} vs single {want}"
    memory = next(e for e in events if e["type"] == "log")["payload"]["memory"]
    assert [m["rank"] for m in memory] == [0, 1]  # every rank reports its memory
    if LAUNCHES[name]["backend"] == "deepspeed":  # DeepSpeed itself trained, each rank its own shard
        assert deepspeed_shards(run_dir) == ["zero_pp_rank_0", "zero_pp_rank_1"], log_tail(run_dir, 80)
        # and compiled nothing: its CPU shared-memory all-reduce op serves inference only (engine.trainer.lean)
        built = sorted(p.name for p in extensions.iterdir()) if extensions.exists() else []
        assert built == [], f"DeepSpeed built {built} for a CPU training run"
