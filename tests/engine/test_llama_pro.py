"""LLaMA Pro (LF's scripts/llama_pro.py and use_llama_pro): `studio expand-model` inserts identity copies of every
N-th decoder layer into a workspace model folder; the expanded model computes what the base did, and training with
use_llama_pro changes only the inserted blocks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine import cli as studio_cli
from engine.core import workspace
from tests.helpers import demo_spec


def expand(capsys, *argv: str) -> tuple[int, str, str]:
    rc = studio_cli.main(["expand-model", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_expanded_model_computes_what_the_base_did(demo_paths, capsys):
    import torch
    from transformers import AutoModelForCausalLM

    base_dir = Path(demo_paths["model_dir"])
    layers = json.loads((base_dir / "config.json").read_text())["num_hidden_layers"]
    rc, out, err = expand(capsys, str(base_dir), "--num-expand", "2", "--name", "tiny-pro")
    assert rc == 0, out + err
    pro = workspace.models_dir() / "tiny-pro"
    assert json.loads((pro / "config.json").read_text())["num_hidden_layers"] == layers + 2
    assert f"blocks at layers [{layers // 2}, {layers + 1}]" in out, out
    ids = torch.tensor([[1, 5, 9, 30, 77, 12, 3, 8]])
    with torch.no_grad():
        before = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)(ids).logits
        after = AutoModelForCausalLM.from_pretrained(pro, dtype=torch.float32)(ids).logits
    assert torch.allclose(before, after, atol=1e-6, rtol=0), (before - after).abs().max()
    rc, out, err = expand(capsys, str(base_dir), "--num-expand", "2", "--name", "tiny-pro")
    assert rc == 2 and "already exists" in err, err  # never overwrites
    rc, out, err = expand(capsys, str(base_dir), "--num-expand", str(layers + 1), "--name", "other")
    assert rc == 2 and err.count("\n") == 1 and f"{layers} layers" in err, err
    assert not (workspace.models_dir() / "other").exists()


def test_use_llama_pro_trains_only_the_inserted_blocks(demo_paths, tmp_path, capsys):
    from safetensors.torch import load_file

    from tests.engine.test_train import run_in_process

    base_dir = Path(demo_paths["model_dir"])
    assert expand(capsys, str(base_dir), "--num-expand", "2", "--name", "tiny-pro-train")[0] == 0
    pro = workspace.models_dir() / "tiny-pro-train"
    layers = json.loads((pro / "config.json").read_text())["num_hidden_layers"]
    spec = demo_spec(
        demo_paths,
        model={"name_or_path": str(pro)},
        method={"finetuning": "freeze", "freeze": {"trainable_layers": 2, "use_llama_pro": True}},
        data={"max_samples": 16, "cutoff_len": 128},
        train={"max_steps": 2, "save_steps": 1000, "learning_rate": 5e-3, "warmup_steps": 0},
        output={"report_to": ["none"]},
    )
    events = run_in_process(spec, tmp_path)
    assert events[-1]["type"] == "finished", events[-1]
    assert all(math.isfinite(e["payload"]["loss"]) for e in events if e["type"] == "log")
    before = load_file(str(pro / "model.safetensors"))
    after = load_file(str(tmp_path / "model" / "model.safetensors"))
    changed = {k.split(".layers.")[1].split(".")[0] for k in before if not before[k].equal(after[k])}
    stride = layers // 2
    assert changed == {str(stride - 1), str(layers - 1)}, changed  # the inserted blocks, nothing else


@pytest.mark.parametrize(
    ("method", "field"),
    [
        ({"finetuning": "lora", "freeze": {"use_llama_pro": True}}, "method.freeze.use_llama_pro"),
        ({"finetuning": "freeze", "freeze": {"trainable_layers": 3, "use_llama_pro": True}}, "method.freeze"),
    ],
)
def test_use_llama_pro_is_refused_where_it_cannot_apply(demo_paths, method, field):
    """Only freeze tuning trains the inserted blocks; they sit every layers / trainable_layers layers, so the model's
    layer count (the demo model's 4) must be a multiple of trainable_layers."""
    from engine.spec.schema import validate_spec

    data = demo_spec(demo_paths).model_dump(mode="json")
    data["method"] = {**data["method"], **method}
    spec, errors, _ = validate_spec(data)
    assert spec is None and [f for f, _ in errors] == [field if "." in field[7:] else "method.freeze.trainable_layers"]
