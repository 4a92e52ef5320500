"""GPTQ and AWQ export (issue 24 item 4): `studio export RUN --format gptq-4bit|gptq-8bit|awq-4bit` with gptqmodel,
on the GPU when there is one and on the CPU here.

Each missing package is refused in one line before any work, a model folder is refused (both calibrate on a run's
training rows), and a run with what it needs plans a merge and a size; the calibration rows are the run's own
training rows, checked against the dataset file read here. The export runs for real on this CPU (`scripts/bootstrap.sh
--test` installs gptqmodel and optimum): the saved folder is loaded back by transformers as a GPTQ / AWQ model, and
the quantization error its report gives is recomputed here against the run's adapter merged by peft. On a GPU machine
(`bench/gpu_check.sh` runs the tests marked gpu) the same export runs on CUDA.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.export import convert_jobs as cj
from engine.export import convert_plan as cp
from engine.export import gguf_checks as gc
from engine.export.checks import ExportError
from engine.runs import registry as runs
from tests.engine import test_merge as tm

ROOT = Path(__file__).resolve().parents[2]  # the exports' subprocesses run from here (engine.runs.scheduler)

pytestmark = pytest.mark.usefixtures("outputs_in_tmp")  # tests/engine/conftest.py


@pytest.fixture(scope="module")
def adapter(base, tmp_path_factory):
    return tm.make_adapter(base, tmp_path_factory.mktemp("adapters") / "lora", seed=3)


def test_refused_in_one_line_for_what_is_missing(base, adapter, tmp_path, run_registry, monkeypatch):
    import importlib.util
    import math

    from tests.helpers import safetensors_shapes

    run = tm.make_run(tmp_path / "src", "r1", base, adapter_from=adapter)
    assert gc.gptq_missing("gptq-4bit") is None and gc.gptq_missing("awq-4bit") is None  # the test set-up has both
    real = importlib.util.find_spec
    for absent, fmt, said in (
        ("gptqmodel", "awq-4bit", r"needs the gptqmodel package .*pip install --no-deps gptqmodel==\d"),
        ("gptqmodel", "gptq-8bit", r"needs the gptqmodel package"),
        ("optimum", "gptq-4bit", r"needs optimum, through which transformers reads a GPTQ folder: `pip install"),
    ):
        gone = lambda name, *a, absent=absent: None if name == absent else real(name)  # noqa: E731
        monkeypatch.setattr(importlib.util, "find_spec", gone)
        with pytest.raises(ExportError, match=f"--format {fmt} {said}"):
            cj.start_export(str(run), fmt, str(tmp_path / "g"))
    assert gc.gptq_missing("awq-4bit") is None  # optimum absent: AWQ folders load without it
    monkeypatch.setattr(importlib.util, "find_spec", real)
    for fmt in gc.CALIBRATED_FORMATS:
        with pytest.raises(ExportError, match="calibrates on the run's own training rows: .* is a model folder"):
            cp.plan_convert(base, fmt, str(tmp_path / "g"))
    weights = sum(math.prod(s) for s in safetensors_shapes(base).values() if len(s) >= 2)  # read from the header
    for fmt in ("gptq-4bit", "awq-4bit"):
        plan = cp.plan_convert(str(run), fmt, str(tmp_path / "g"))
        assert plan.needs_merge and plan.model_dir == str(base)
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


def _export_and_check(base, adapter, tmp_path, data_dir: str, fmt: str, device: str) -> None:
    """Export a run as ``fmt``; the folder loads in transformers as that quantization, its report passed, and the
    quantization error the report states is what this test measures against the adapter merged by peft."""
    import shutil

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.trainer.gguf_verify import PROMPTS

    shutil.copytree(data_dir, tmp_path / "data")  # the run's datasets, in this test's workspace (run_registry)
    run = tm.make_run(tmp_path / "src", f"r-{fmt}", base, adapter_from=adapter)  # not in runs/: no run to queue
    out = tmp_path / fmt
    assert cj.cli([str(run), "--format", fmt, "--out", str(out)]) == 0
    report = json.loads((out / "verify.json").read_text())
    assert report["passed"] and report["calibration_rows"] > 0 and report["device"] == device, report
    assert not (out / "offload").exists() and not (out / "merged").exists()  # working files left behind
    assert not (ROOT / "logs").exists(), "gptqmodel's logs/ written into the folder the export runs from"
    cfg = json.loads((out / "config.json").read_text())["quantization_config"]
    method, bits = fmt.split("-")[0], int(fmt.split("-")[1].removesuffix("bit"))
    assert cfg["quant_method"] == method and cfg["bits"] == bits and cfg["group_size"] == 128, cfg
    if method == "awq":
        assert cfg["zero_point"] is True and cfg["version"] == "gemm", cfg  # the GEMM layout vLLM's AWQ reads

    tok = AutoTokenizer.from_pretrained(base)
    merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(adapter)).merge_and_unload()
    merged = merged.to(device).eval()
    quantized = AutoModelForCausalLM.from_pretrained(str(out), device_map=device).eval()
    linear = quantized.model.layers[0].self_attn.q_proj
    assert type(linear).__module__.startswith("gptqmodel.") and not hasattr(linear, "weight"), type(linear)
    err = 0.0
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids.to(device)
        with torch.no_grad():
            a, b = merged(input_ids=ids).logits.float(), quantized(input_ids=ids).logits.float()
        assert torch.isfinite(b).all()
        err = max(err, float((b - a).abs().max()))
    assert 0 < err, "the logits did not move: nothing was quantized"
    tol = 1e-4 if device == "cpu" else 5e-2  # CPU: both float32 here; the GPU's reference runs in float16
    assert abs(report["quantization_error_max_abs"] - err) <= tol * max(1.0, err), (report, err)


@pytest.mark.parametrize("fmt", ["gptq-4bit", "awq-4bit"])
def test_export_on_the_cpu_loads_back_in_transformers(
    fmt, base, adapter, demo_paths, tmp_path, run_registry, monkeypatch
):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU machine quantizes on CUDA: test_export_on_the_gpu")
    monkeypatch.setenv("GPTQMODEL_CPU_WORKERS", "2")  # gptqmodel 7.6 on 1-2 cores (engine.trainer.gptq_export)
    _export_and_check(base, adapter, tmp_path, demo_paths["data_dir"], fmt, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["gptq-4bit", "gptq-8bit", "awq-4bit"])
def test_export_on_the_gpu(fmt, base, adapter, demo_paths, tmp_path, run_registry):
    _export_and_check(base, adapter, tmp_path, demo_paths["data_dir"], fmt, "cuda")
