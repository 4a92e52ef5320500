"""The PEFT and optimizer methods beyond plain LoRA (issue 14, items 5 and 9), trained for real on the demo model:
LoRA+ with rsLoRA, PiSSA converted to LoRA, OFT (each one module-scoped run of 2 steps, then its assertions, a merge
where it has an adapter); GaLore / APOLLO's TrainingArguments; optimizers whose packages are missing refused at
validation naming the package. DoRA, QLoRA and full fine-tuning train in tests/engine/test_train.py."""

from __future__ import annotations

import importlib.util
import json
import math
import signal
from pathlib import Path

import pytest

from tests.engine.test_train import run_in_process
from tests.helpers import demo_spec

LR, STEPS = 5e-3, 2


def method_spec(demo_paths, method: dict, train: dict | None = None):
    return demo_spec(
        demo_paths,
        method={"stage": "sft", **method},
        data={"datasets": ["demo_sharegpt"], "max_samples": 16, "cutoff_len": 128},
        train={"max_steps": STEPS, "save_steps": 1000, "learning_rate": LR, "warmup_steps": 0, **(train or {})},
        output={"report_to": ["none"]},
    )


def train_keeping_trainer(spec, run_dir: Path):
    """run_in_process, keeping the Trainer engine.trainer.train built (for its optimizer)."""
    from engine.trainer import train as train_mod

    kept = {}
    build = train_mod.build_trainer  # engine.trainer.trainers' function, patched where train() looks it up

    def keep(*args, **kwargs):
        kept["trainer"] = build(*args, **kwargs)
        return kept["trainer"]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_mod, "build_trainer", keep)
        events = run_in_process(spec, run_dir)
    return events, kept["trainer"]


def finished_with_finite_losses(events: list[dict]) -> None:
    assert events[-1]["type"] == "finished", events[-1]
    losses = [e["payload"]["loss"] for e in events if e["type"] == "log"]
    assert len(losses) == STEPS and all(math.isfinite(v) for v in losses)


def merge(run_dir: Path, out: Path, monkeypatch) -> dict:
    """engine.trainer.merge in this process on the run folder; the merged model must load."""
    from transformers import AutoModelForCausalLM

    from engine.trainer import merge as merge_mod

    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(out.parent))
    old = signal.getsignal(signal.SIGTERM)
    try:
        assert merge_mod.main([str(run_dir), "--out", str(out), "--dtype", "fp32"]) == 0
    finally:
        signal.signal(signal.SIGTERM, old)
    assert AutoModelForCausalLM.from_pretrained(str(out)).config.model_type == "llama"
    report = json.loads((out / "verify.json").read_text())
    assert report["passed"] and report["max_abs_diff"] <= report["tolerance"]
    return report


# ----------------------------------------------------------------------------------------------- LoRA+ (+ rsLoRA)
@pytest.fixture(scope="module")
def loraplus(demo_paths, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("loraplus")
    spec = method_spec(demo_paths, {"lora": {"loraplus_lr_ratio": 16.0, "use_rslora": True}})
    events, trainer = train_keeping_trainer(spec, run_dir)
    return run_dir, events, trainer


def test_loraplus_trains_with_b_matrices_at_lr_times_ratio(loraplus):
    run_dir, events, trainer = loraplus
    finished_with_finite_losses(events)
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    rates: dict[str, set[float]] = {"lora_A": set(), "lora_B": set()}
    for group in trainer.optimizer.param_groups:
        for p in group["params"]:
            kind = "lora_B" if "lora_B" in names[id(p)] else "lora_A" if "lora_A" in names[id(p)] else None
            if kind:
                rates[kind].add(group["initial_lr"])  # the schedule's start: lr before decay
    assert rates == {"lora_A": {LR}, "lora_B": {LR * 16.0}}
    config = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert config["use_rslora"] is True and config["peft_type"] == "LORA"


# ----------------------------------------------------------------------------------------------- PiSSA
@pytest.fixture(scope="module")
def pissa(demo_paths, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("pissa")
    spec = method_spec(demo_paths, {"lora": {"rank": 4, "pissa_init": True, "pissa_iter": 4, "pissa_convert": True}})
    events, trainer = train_keeping_trainer(spec, run_dir)
    return run_dir, events, trainer


def test_pissa_starts_from_the_weights_and_saves_plain_lora_that_merges(pissa, demo_paths, tmp_path, monkeypatch):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    run_dir, events, trainer = pissa
    finished_with_finite_losses(events)
    init = load_file(str(run_dir / "pissa_init" / "adapter_model.safetensors"))
    init_b = [t for k, t in init.items() if "lora_B" in k]
    assert init_b and all(t.abs().max() > 0 for t in init_b), "plain LoRA starts with B = 0; PiSSA does not"
    config = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    # converted (A B - A0 B0 as one LoRA of twice the rank) onto the original base: a plain LoRA adapter
    assert config["init_lora_weights"] is True and config["r"] == 8
    # the converted adapter on the original base is the model the run trained (residual base + PiSSA adapter)
    ids = torch.randint(0, trainer.model.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        trained = trainer.model.eval()(input_ids=ids).logits
        base = AutoModelForCausalLM.from_pretrained(demo_paths["model_dir"], dtype=torch.float32)
        plain = base(input_ids=ids).logits
        converted = PeftModel.from_pretrained(base, str(run_dir / "adapter")).eval()(input_ids=ids).logits
    assert (converted - trained).abs().max() < 1e-4 < (converted - plain).abs().max()
    report = merge(run_dir, tmp_path / "pissa-merged", monkeypatch)
    assert report["adapter_effect_max_abs"] > report["tolerance"]


# ----------------------------------------------------------------------------------------------- OFT
@pytest.fixture(scope="module")
def oft(demo_paths, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("oft")
    spec = method_spec(demo_paths, {"finetuning": "oft", "oft": {"block_size": 32, "targets": ["all"]}})
    return spec, run_dir, run_in_process(spec, run_dir)


def test_oft_trains_is_planned_like_lora_and_merges(oft, demo_paths, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from engine.plan.model_shape import trainable_param_count
    from engine.plan.planner import plan
    from engine.spec.rules import read_model_config

    spec, run_dir, events = oft
    finished_with_finite_losses(events)
    assert events[-1]["payload"]["adapter_dir"] == str(run_dir / "adapter")
    config = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert config["peft_type"] == "OFT" and config["oft_block_size"] == 32
    weights = load_file(str(run_dir / "adapter" / "adapter_model.safetensors"))
    assert weights and any(t.abs().max() > 0 for t in weights.values()), "OFT starts at the identity (zeros)"
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["trainable_params"] == trainable_param_count(spec, read_model_config(demo_paths["model_dir"]))
    assert any("OFT is planned like LoRA" in str(n) for n in plan(spec).notes)
    report = merge(run_dir, tmp_path / "oft-merged", monkeypatch)
    assert report["adapter_effect_max_abs"] > report["tolerance"]


# ----------------------------------------------------------------------------------------------- GaLore / APOLLO
def test_low_rank_optimizers_reach_transformers_as_optim_target_modules_and_args(demo_paths, tmp_path):
    from transformers import AutoModelForCausalLM, Trainer

    from engine.trainer.trainers import training_arguments

    model = AutoModelForCausalLM.from_pretrained(demo_paths["model_dir"])
    galore = method_spec(demo_paths, {"finetuning": "full"}, {"optimizer": "galore_adamw", "low_rank": {"rank": 8}})
    targs = training_arguments(galore, tmp_path, tmp_path, "cpu", "fp32", has_eval=False, model=model)
    linears = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]  # lm_head excepted
    assert (targs.optim, targs.optim_target_modules) == ("galore_adamw", linears)
    assert targs.optim_args == "rank=8,update_proj_gap=200,scale=2.0,proj_type=std"
    apollo = method_spec(
        demo_paths,
        {"finetuning": "full"},
        {
            "optimizer": "apollo_adamw",
            "gradient_accumulation": 1,
            "low_rank": {"layerwise": True, "targets": ["mlp", "self_attn"], "update_interval": 50},
        },
    )
    targs = training_arguments(apollo, tmp_path, tmp_path, "cpu", "fp32", has_eval=False, model=model)
    assert (targs.optim, targs.optim_target_modules) == ("apollo_adamw_layerwise", ["mlp", "self_attn"])
    assert targs.optim_args == "rank=16,update_proj_gap=50,scale=32.0,proj_type=std,proj=random,scale_type=channel"
    for spec, package in ((galore, "galore_torch"), (apollo, "apollo_torch")):
        if importlib.util.find_spec(package) is None:  # transformers' own GaLore / APOLLO path is the one taken
            targs = training_arguments(spec, tmp_path, tmp_path, "cpu", "fp32", has_eval=False, model=model)
            with pytest.raises(ImportError, match=package):
                Trainer.get_optimizer_cls_and_kwargs(targs, model)


@pytest.mark.parametrize(
    "optimizer, package, pip",
    [
        ("galore_adamw", "galore_torch", "galore-torch"),
        ("apollo_adamw", "apollo_torch", "apollo-torch"),
        ("adam_mini", "adam_mini", "adam-mini"),
        ("muon", "muon", "KellerJordan/Muon"),
        ("badam", "badam", "badam"),
    ],
)
def test_optimizer_without_its_package_is_refused_naming_it(demo_paths, optimizer, package, pip):
    from engine.spec.schema import validate_spec

    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    spec = method_spec(demo_paths, {"finetuning": "full"}, {"optimizer": optimizer})
    _, errors, _ = validate_spec(spec.model_dump(mode="json"))
    assert len(errors) == 1 and errors[0][0] == "train.optimizer", errors
    assert f"pip install {pip}" in errors[0][1] or pip in errors[0][1]
