"""GPTQ export (issue 24 item 4): `studio export RUN --format gptq-4bit|gptq-8bit` with gptqmodel on an NVIDIA GPU.

Here (no GPU, no gptqmodel): each missing piece is refused in one line before any work, a model folder is refused
(GPTQ calibrates on a run's training rows), and a run with what it needs plans a merge and a size; the calibration
rows are the run's own training rows, checked against the dataset file read here. On a GPU machine
(`bench/gpu_check.sh` runs the tests marked gpu, after installing gptqmodel) the export runs for real and the saved
folder is loaded back by transformers as a GPTQ model.
"""

from __future__ import annotations

import json
import os

import pytest

from engine.export import convert_jobs as cj
from engine.export import convert_plan as cp
from engine.export import gguf_checks as gc
from engine.export.checks import ExportError
from engine.runs import registry as runs
from tests.engine import test_merge as tm

pytestmark = pytest.mark.usefixtures("outputs_in_tmp")  # tests/engine/conftest.py


@pytest.fixture(scope="module")
def adapter(base, tmp_path_factory):
    return tm.make_adapter(base, tmp_path_factory.mktemp("adapters") / "lora", seed=3)


def test_refused_in_one_line_for_what_is_missing(base, adapter, tmp_path, run_registry, monkeypatch):
    import math

    from tests.helpers import safetensors_shapes

    run = tm.make_run(tmp_path / "src", "r1", base, adapter_from=adapter)
    missing = gc.gptq_missing()  # this machine as it is: no gptqmodel here, or no NVIDIA GPU
    said = {"gptqmodel": r"needs the gptqmodel package .*pip install gptqmodel", "cuda": "needs an NVIDIA GPU"}
    if missing:
        with pytest.raises(ExportError, match=f"--format gptq-4bit {said[missing]}"):
            cj.start_export(str(run), "gptq-4bit", str(tmp_path / "g"))
    monkeypatch.setattr(gc, "gptq_missing", lambda: "cuda")
    with pytest.raises(ExportError, match=f"--format gptq-8bit {said['cuda']}"):
        cj.start_export(str(run), "gptq-8bit", str(tmp_path / "g"))
    monkeypatch.setattr(gc, "gptq_missing", lambda: "gptqmodel")
    with pytest.raises(ExportError, match=f"--format gptq-8bit {said['gptqmodel']}"):
        cj.start_export(str(run), "gptq-8bit", str(tmp_path / "g"))
    monkeypatch.setattr(gc, "gptq_missing", lambda: None)  # a GPU machine with gptqmodel
    with pytest.raises(ExportError, match="calibrates on the run's own training rows: .* is a model folder"):
        cp.plan_convert(base, "gptq-4bit", str(tmp_path / "g"))
    plan = cp.plan_convert(str(run), "gptq-4bit", str(tmp_path / "g"))
    assert plan.needs_merge and plan.model_dir == str(base)
    weights = sum(math.prod(s) for s in safetensors_shapes(base).values() if len(s) >= 2)  # read from the header
    assert weights * 0.5 <= plan.bytes_needed <= weights * 0.6 + 2e6  # 4 bits each, groups' scales, the tokenizer
    assert runs.list_runs() == []  # nothing was queued


def test_calibration_rows_are_the_runs_training_rows(base, adapter, tmp_path, demo_paths):
    from transformers import AutoTokenizer

    from engine.trainer import gptq_export

    run = tm.make_run(tmp_path / "runs", "r2", base, adapter_from=adapter)
    tok = AutoTokenizer.from_pretrained(base)
    rows = gptq_export.calibration_rows(run, tok, log=lambda _: None)
    data = json.loads(open(os.path.join(demo_paths["data_dir"], "demo_alpaca.json"), encoding="utf-8").read())
    assert len(rows) == min(gptq_export.CALIBRATION_ROWS, len(data)) and rows
    instructions = {r["instruction"] for r in data}
    for row in rows:
        assert len(row["input_ids"]) == len(row["attention_mask"]) and set(row["attention_mask"]) == {1}
        text = tok.decode(row["input_ids"])
        assert any(i in text for i in instructions), text  # each row is one of the dataset's, as trained


@pytest.mark.gpu
def test_gptq_4bit_export_loads_back_in_transformers(base, adapter, tmp_path, run_registry):
    import torch
    from transformers import AutoModelForCausalLM

    run = tm.make_run(tmp_path / "runs", "r3", base, adapter_from=adapter)
    out = tmp_path / "gptq"
    assert cj.cli([str(run), "--format", "gptq-4bit", "--out", str(out)]) == 0
    report = json.loads((out / "verify.json").read_text())
    assert report["passed"] and report["calibration_rows"] > 0, report
    cfg = json.loads((out / "config.json").read_text())["quantization_config"]
    assert cfg["quant_method"] == "gptq" and cfg["bits"] == 4
    model = AutoModelForCausalLM.from_pretrained(str(out), device_map="cuda")
    ids = torch.tensor([[5, 17, 300, 42]], device="cuda")
    assert torch.isfinite(model(input_ids=ids).logits).all()
