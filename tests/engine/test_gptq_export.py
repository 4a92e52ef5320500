"""GPTQ and AWQ export (issue 24 item 4): `studio export RUN --format gptq-4bit|gptq-8bit|awq-4bit` with gptqmodel,
on the GPU when there is one and on the CPU here.

Each missing package is refused in one line before any work, a model folder is refused unless a calibration file is
named (a bad one is refused naming the file and row), and a run with what it needs plans a merge and a size; the
calibration rows are the run's own training rows, checked against the dataset file read here, or seeded windows of
a file's rows; LLaMA-Factory's GPTQ export YAML runs through `studio merge --lf-yaml`. The export runs for real on
this CPU (`scripts/bootstrap.sh --test` installs gptqmodel and optimum): the saved folder is loaded back by
transformers as a GPTQ / AWQ model, and the quantization error its report gives is recomputed here against the
run's adapter merged by peft (or the float model). On a GPU machine (`bench/gpu_check.sh` runs the tests marked gpu)
the same export runs on CUDA.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from engine.export import convert_jobs as cj
from engine.export import convert_plan as cp
from engine.export import gguf_checks as gc
from engine.export.checks import ExportError
from engine.machine import kernels
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
    folder = tmp_path / "no-gptq"
    monkeypatch.setattr(kernels, "gptq_folder", lambda: folder)  # nor in the set-up's folder
    target = f"--target {re.escape(str(folder))}"
    for absent, fmt, said in (
        ("gptqmodel", "awq-4bit", rf"needs the gptqmodel package .*pip install --no-deps {target} gptqmodel==\d"),
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


def test_gptqmodel_kept_apart_is_found_and_on_the_path_of_the_processes_that_load_it(tmp_path, monkeypatch):
    """Issue 45 item 10b: the set-up installs gptqmodel into a folder of its own (kernels.gptq_folder), not the venv:
    the export's check counts it there, and runs, exports and Chat's worker get it on PYTHONPATH after the user's
    entries; with no gptqmodel in the folder nothing is added."""
    import importlib.util

    from engine.machine import hardware
    from engine.runs import launch

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gptqmodel" else real(name, *a))
    folder = tmp_path / "gptq"
    monkeypatch.setattr(kernels, "gptq_folder", lambda: folder)
    monkeypatch.setenv("PYTHONPATH", "/mine")
    hw = hardware.detect()
    assert gc.gptq_missing("awq-4bit") == "gptqmodel" and launch.subprocess_env("cpu", [], hw)["PYTHONPATH"] == "/mine"
    (folder / "gptqmodel").mkdir(parents=True)
    (folder / "gptqmodel" / "__init__.py").write_text("")
    assert gc.gptq_missing("awq-4bit") is None
    assert launch.subprocess_env("cpu", [], hw)["PYTHONPATH"].split(os.pathsep) == ["/mine", str(folder)]
    monkeypatch.delenv("PYTHONPATH")
    assert launch.subprocess_env("cpu", [], hw)["PYTHONPATH"] == str(folder)
    assert kernels.with_gptq_path(f"/root{os.pathsep}{folder}") == f"/root{os.pathsep}{folder}"  # not twice
    monkeypatch.undo()  # the real folder: where this test set-up (scripts/bootstrap.sh --test) installs it
    assert kernels.gptq_path() == [str(kernels.gptq_folder())], "bootstrap.sh --test installs gptqmodel there"
    assert str(kernels.gptq_folder()) in sys.path  # tests/engine/conftest.py: this process loads GPTQ folders


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


# ------------------------------------------------------------------------ a text file to calibrate on (LF's way)
C4_DEMO = ROOT / "tests" / "fixtures" / "lf" / "data" / "c4_demo.jsonl"  # rows as LF's data/c4_demo.jsonl: {"text"}


def test_a_model_folder_calibrates_on_a_text_file_checked_before_any_work(base, tmp_path, run_registry):
    plan = cp.plan_convert(base, "gptq-4bit", str(tmp_path / "g"), calibration=cp.Calibration(str(C4_DEMO), 16, 64))
    assert not plan.needs_merge and plan.model_dir == str(Path(base).resolve())
    argv = cp.convert_argv(plan, tmp_path / "t", "ev.jsonl", overwrite=False, force=False)
    assert argv[argv.index("--calibration") + 1] == str(C4_DEMO)
    assert cp.calibration_of(cp.convert_arg_parser().parse_args(argv[3:])) == plan.calibration  # read back as sent

    rows = [{"text": "fine"}, {"content": "no text"}, {"text": "fine"}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"text": "fine"}\n{"text": \n', encoding="utf-8")
    for cal, fmt, said in (
        (cp.Calibration(str(bad)), "gptq-4bit", rf"calibration file {bad}, row 2: needs a non-empty 'text' string"),
        (cp.Calibration(str(torn)), "awq-4bit", rf"calibration file: {torn}.* line 2"),
        (cp.Calibration(str(tmp_path / "nowhere.jsonl")), "gptq-8bit", "calibration file .*nowhere.jsonl: not found"),
        (cp.Calibration(str(C4_DEMO), 0), "gptq-4bit", r"calibration samples must be a whole number of at least 1"),
        (cp.Calibration(str(C4_DEMO)), "gguf-q8_0", r"--calibration is for the calibrated formats"),
    ):
        with pytest.raises(ExportError, match=said):
            cp.plan_convert(base, fmt, str(tmp_path / "g"), calibration=cal)
    assert runs.list_runs() == []  # nothing was queued


def test_file_rows_are_seeded_windows_of_the_files_rows(base):
    from transformers import AutoTokenizer

    from engine.trainer import gptq_export

    tok = AutoTokenizer.from_pretrained(base)
    texts = [json.loads(line)["text"] for line in C4_DEMO.read_text(encoding="utf-8").splitlines()]
    whole = [[int(t) for t in tok(text)["input_ids"]] for text in texts]
    cal = cp.Calibration(str(C4_DEMO), samples=40, maxlen=16)
    rows = gptq_export.file_rows(cal, tok)
    assert rows == gptq_export.file_rows(cal, tok)  # seeded: the same export calibrates the same way
    assert len(rows) == 40 and all(len(r["input_ids"]) == 16 == sum(r["attention_mask"]) for r in rows)
    for r in rows:  # each a contiguous window of one row's tokens
        ids = r["input_ids"]
        assert any(ids == w[i : i + 16] for w in whole for i in range(len(w) - 15)), tok.decode(ids)
    assert len({tuple(r["input_ids"]) for r in rows}) > 20  # drawn across the rows and their positions
    longer = gptq_export.file_rows(cp.Calibration(str(C4_DEMO), samples=5, maxlen=10_000), tok)
    assert all(r["input_ids"] in whole for r in longer)  # a row shorter than maxlen is taken whole


def test_llamafactory_gptq_yaml_quantizes_its_model_on_its_dataset(base, tmp_path, run_registry, monkeypatch):
    """LF's examples/merge_lora/llama3_gptq.yaml (export_quantization_bit, export_quantization_dataset), run as LF's
    README runs it: `studio merge --lf-yaml` quantizes the model on the YAML's dataset into its export_dir; the folder
    loads in transformers as GPTQ, and the report's quantization error is what this test measures against the
    float model."""
    import shutil

    import torch
    import yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.export import merge_jobs as mj
    from engine.trainer.gguf_verify import PROMPTS

    if torch.cuda.is_available():
        pytest.skip("the CPU's figures; a GPU machine runs test_export_on_the_gpu")
    monkeypatch.setenv("GPTQMODEL_CPU_WORKERS", "2")
    root = tmp_path / "LLaMA-Factory"
    shutil.copytree(ROOT / "tests" / "fixtures" / "lf", root)
    yaml_path = root / "examples" / "merge_lora" / "llama3_gptq.yaml"
    args = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
    assert args["export_quantization_bit"] == 4 and args["export_quantization_dataset"] == "data/c4_demo.jsonl"
    args.update(model_name_or_path=base, export_quantization_nsamples=24, export_quantization_maxlen=32)
    yaml_path.write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")
    monkeypatch.chdir(root)

    assert mj.cli(["--lf-yaml", "examples/merge_lora/llama3_gptq.yaml"]) == 0
    out = root / "output" / "llama3_gptq"
    report = json.loads((out / "verify.json").read_text())
    assert report["passed"] and report["calibration_rows"] == 24, report
    assert report["calibration"] == {"file": str(root / "data" / "c4_demo.jsonl"), "samples": 24, "maxlen": 32}
    cfg = json.loads((out / "config.json").read_text())["quantization_config"]
    assert cfg["quant_method"] == "gptq" and cfg["bits"] == 4, cfg

    tok = AutoTokenizer.from_pretrained(base)
    ref = AutoModelForCausalLM.from_pretrained(base).eval()
    quantized = AutoModelForCausalLM.from_pretrained(str(out), device_map="cpu").eval()
    err = 0.0
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            err = max(err, float((quantized(input_ids=ids).logits - ref(input_ids=ids).logits).abs().max()))
    assert 0 < err and abs(report["quantization_error_max_abs"] - err) <= 1e-4 * max(1.0, err), (report, err)
