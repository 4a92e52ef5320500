"""RoPE scaling (``model.rope_scaling``, LF's ``rope_scaling``) as the trainer loads it on transformers 5: the model
keeps its own rope base and gets the scaled frequencies, checked against the formula computed here (linear scaling
divides every inverse frequency by the factor), and a run with it trains."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from tests.helpers import demo_spec, log_tail, run_trainer


def test_linear_scaling_divides_the_models_own_frequencies(demo_paths):
    from engine.trainer.model import load_model

    config = json.loads((Path(demo_paths["model_dir"]) / "config.json").read_text())
    spec = demo_spec(demo_paths, model={"rope_scaling": {"type": "linear", "factor": 2.0}})
    model = load_model(spec, device="cpu", precision="fp32")
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    rotary = base.model.rotary_emb
    theta = (config.get("rope_parameters") or {}).get("rope_theta") or config.get("rope_theta") or 10000.0
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    expected = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)) / 2.0
    assert torch.allclose(rotary.inv_freq.float(), expected, rtol=1e-6)
    assert base.config.rope_parameters["rope_theta"] == theta and base.config.rope_parameters["factor"] == 2.0


def test_a_run_with_dynamic_scaling_trains(demo_paths, tmp_path):
    spec = demo_spec(
        demo_paths,
        model={"rope_scaling": {"type": "dynamic", "factor": 2.0}},
        train={"max_steps": 2, "save_steps": 1000},
        output={"report_to": ["none"]},
    )
    rc, events = run_trainer(spec, tmp_path)
    assert rc == 0 and events[-1]["type"] == "finished", log_tail(tmp_path)
    losses = [e["payload"]["loss"] for e in events if e["type"] == "log" and "loss" in e["payload"]]
    assert losses and all(math.isfinite(v) for v in losses)
