"""`studio merge --lf-yaml FILE`: LLaMA-Factory's export YAMLs (examples/merge_lora in LF) merged by Studio's merge.

tests/fixtures/lf/examples/merge_lora holds YAMLs shaped like LF's (same keys); they are run from a copy of the LF
root, as LF's README runs them, with the model swapped for the demo model and the adapter for one trained here for
a few steps. One merge shards (export_size below the model's size) and is loaded back with transformers; one
re-exports a full model in the legacy .bin format. Refusals (GPTQ's as LF refuses them, a quantized base, unknown
keys, a missing adapter) come in one line per key before any merge starts; the GPTQ YAML itself is run by
tests/engine/test_gptq_export.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from engine.export import merge_jobs as mj
from engine.lf.merge_yaml import lf_export_to_merge
from engine.runs import registry as runs
from tests.helpers import demo_spec, log_tail, run_trainer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lf"
LORA_YAML = "examples/merge_lora/llama3_lora_sft.yaml"
FULL_YAML = "examples/merge_lora/llama3_full_sft.yaml"
GPTQ_YAML = "examples/merge_lora/llama3_gptq.yaml"


@pytest.fixture(scope="module")
def trained_adapter(demo_paths, tmp_path_factory) -> Path:
    """A LoRA adapter trained for 3 steps on the demo (the real trainer through accelerate)."""
    run_dir = tmp_path_factory.mktemp("lf-export-run")
    spec = demo_spec(demo_paths, train={"max_steps": 3, "save_steps": 1000, "logging_steps": 1})
    rc, _ = run_trainer(spec, run_dir)
    assert rc == 0, log_tail(run_dir)
    return run_dir / "adapter"


@pytest.fixture
def lf_root(tmp_path, demo_paths, trained_adapter, run_registry, monkeypatch) -> Path:
    """A copy of the LF-shaped root (the working directory, as in LF's README) with the demo model as the base, the
    trained adapter where LF's training would have saved it (saves/llama3-8b/lora/sft; it names a hub base that is
    not here: model_name_or_path decides) and the demo model as the full fine-tune's output (saves/.../full/sft)."""
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(tmp_path))
    root = tmp_path / "LLaMA-Factory"
    shutil.copytree(FIXTURE, root)
    for path in (root / "examples" / "merge_lora").glob("*.yaml"):
        args = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "full" not in path.name:
            args["model_name_or_path"] = demo_paths["model_dir"]
        path.write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")
    adapter = shutil.copytree(trained_adapter, root / "saves" / "llama3-8b" / "lora" / "sft")
    config = json.loads((adapter / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "meta-llama/Meta-Llama-3-8B-Instruct"  # as LF's adapter names its base
    (adapter / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    shutil.copytree(demo_paths["model_dir"], root / "saves" / "llama3-8b" / "full" / "sft")
    monkeypatch.chdir(root)
    return root


def edit(path: Path, **changes) -> Path:
    args = yaml.safe_load(path.read_text(encoding="utf-8"))
    args.update(changes)
    path.write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")
    return path


def test_lora_export_yaml_merges_into_shards_that_transformers_loads(lf_root, demo_paths, capsys):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    # 1 MB shards: the demo model (~4 MB in float32) is written in several files
    edit(lf_root / LORA_YAML, export_size=0.001, export_hub_model_id="someone/llama3-merged")
    rc = mj.cli(["--lf-yaml", LORA_YAML])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "note: template: llama3 accepted, ignored" in err and "note: trust_remote_code" in err
    # the hub cannot be reached (HF_HUB_OFFLINE): said before the merge, and the merge still happens
    assert "export_hub_model_id someone/llama3-merged: the hub cannot be reached" in err
    assert "push to someone/llama3-merged skipped: offline" in out
    target = lf_root / "output" / "llama3_lora_sft"  # export_dir from the working directory, as LF writes it
    assert f"merged model written to {target}" in out
    shards = sorted(target.glob("model-*.safetensors"))
    assert len(shards) > 1 and (target / "model.safetensors.index.json").is_file()
    assert not list(target.glob("*.bin"))
    assert json.loads((target / "verify.json").read_text())["passed"] is True

    merged = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    base = AutoModelForCausalLM.from_pretrained(demo_paths["model_dir"], dtype=torch.float32)
    ref = PeftModel.from_pretrained(base, str(lf_root / "saves/llama3-8b/lora/sft")).eval()
    ids = torch.arange(3, 19).unsqueeze(0)
    with torch.no_grad():
        want, got = ref(input_ids=ids).logits, merged(input_ids=ids).logits
        with ref.disable_adapter():
            plain = ref(input_ids=ids).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert (want - plain).abs().max() > 1e-4  # the trained adapter changes the logits: the check can fail


def test_full_model_export_in_legacy_bin_format(lf_root, capsys):
    from transformers import AutoModelForCausalLM

    edit(lf_root / FULL_YAML, finetuning_type="full", export_legacy_format=True, export_size=0.002)
    rc = mj.cli(["--lf-yaml", FULL_YAML])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    target = lf_root / "output" / "llama3_full_sft"
    bins = sorted(target.glob("pytorch_model*.bin"))
    assert len(bins) > 1 and (target / "pytorch_model.bin.index.json").is_file()
    assert not list(target.glob("*.safetensors"))
    assert json.loads((target / "verify.json").read_text())["passed"] is True
    assert "| format | bin (legacy) |" in (target / "README.md").read_text()
    model = AutoModelForCausalLM.from_pretrained(str(target))
    assert model.config.model_type == "llama"


def test_refusals_come_one_line_per_key_before_any_merge(lf_root, capsys):
    # GPTQ at export (tests/engine/test_gptq_export.py runs it): what LF refuses too, and what Studio does not write
    edit(
        lf_root / GPTQ_YAML,
        adapter_name_or_path="saves/llama3-8b/lora/sft",
        export_quantization_bit=3,
        export_quantization_dataset="data/c4_nowhere.jsonl",
        export_quantization_nsamples=0,
    )
    rc = mj.cli(["--lf-yaml", GPTQ_YAML])
    err = capsys.readouterr().err
    assert rc == 2
    lines = {ln.split(":")[0].strip(): ln for ln in err.splitlines()[1:]}
    assert "4 or 8 bits" in lines["export_quantization_bit"]
    assert "Please merge adapters before quantizing the model." in lines["adapter_name_or_path"]
    assert "data/c4_nowhere.jsonl: no such file (looked in" in lines["export_quantization_dataset"]
    assert "at least 1" in lines["export_quantization_nsamples"]
    edit(lf_root / GPTQ_YAML, adapter_name_or_path=None, export_quantization_bit=4, export_quantization_dataset=None)
    rc = mj.cli(["--lf-yaml", GPTQ_YAML, "--dtype", "bf16"])
    err = capsys.readouterr().err
    assert rc == 2 and "Quantization dataset is necessary for exporting." in err, err
    edit(lf_root / GPTQ_YAML, export_quantization_dataset="data/c4_demo.jsonl", export_quantization_nsamples=8)
    rc = mj.cli(["--lf-yaml", GPTQ_YAML, "--dtype", "bf16"])
    assert rc == 2 and "--dtype: not taken by the GPTQ export" in capsys.readouterr().err

    edit(
        lf_root / LORA_YAML,
        adapter_name_or_path="saves/nowhere",
        quantization_bit=4,
        export_size="big",
        export_devise="cpu",
    )
    rc = mj.cli(["--lf-yaml", LORA_YAML])
    err = capsys.readouterr().err
    assert rc == 2
    lines = {ln.split(":")[0].strip(): ln for ln in err.splitlines()[1:]}
    assert "saves/nowhere: not found (looked in" in lines["adapter_name_or_path[0]"]
    assert "quantized" in lines["quantization_bit"]
    assert "shard size in GB" in lines["export_size"]
    assert "not a LLaMA-Factory key" in lines["export_devise"]
    assert runs.list_runs(refresh_status=False) == []  # nothing was queued

    rc = mj.cli(["--lf-yaml", LORA_YAML, "some-run"])
    assert rc == 2 and "give no RUN_OR_ADAPTER" in capsys.readouterr().err


def test_paths_resolve_from_the_working_directory_then_the_yaml_folder(lf_root, tmp_path, monkeypatch):
    args = yaml.safe_load((lf_root / LORA_YAML).read_text(encoding="utf-8"))
    args["adapter_name_or_path"] = "../../saves/llama3-8b/lora/sft"  # from the YAML's folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    imp = lf_export_to_merge(args, lf_root / "examples" / "merge_lora")
    assert not imp.unsupported and not imp.missing
    assert imp.data["adapters"] == [str(lf_root / "saves/llama3-8b/lora/sft")]
    assert imp.data["out_dir"] == str(elsewhere / "output" / "llama3_lora_sft")  # LF writes under the cwd
    assert imp.data["max_shard_size"] == "2GB" and imp.data["device"] == "cpu"
    imp = lf_export_to_merge({**args, "export_device": "auto", "learning_rate": 1e-4}, lf_root)
    assert imp.data["device"] == "cpu"  # auto on a machine without GPUs
    assert any(n.startswith("export_device: auto") for n in imp.notes)
    assert any(n.startswith("learning_rate: accepted, ignored (a training or inference setting") for n in imp.notes)
    assert "adapter_name_or_path[0]" in imp.missing  # not under this root's working directory nor its folder


def test_a_studio_run_output_dir_is_an_adapter_source(lf_root, demo_paths):
    """A run Studio trained from an LF training YAML keeps its adapter in <output_dir>/adapter: the LF export YAML's
    adapter_name_or_path (that output_dir) finds it, merged into model_name_or_path, not the base it names."""
    from engine.export import checks as xp
    from engine.export import sources

    out_dir = lf_root / "saves" / "studio" / "sft"
    shutil.copytree(lf_root / "saves" / "llama3-8b" / "lora" / "sft", out_dir / "adapter")
    imp = lf_export_to_merge(
        {"model_name_or_path": demo_paths["model_dir"], "adapter_name_or_path": "saves/studio/sft", "export_dir": "x"}
    )
    assert not imp.unsupported and not imp.missing
    src = sources.resolve_source(imp.data["adapters"][0], imp.data["base"])
    assert src.kind == "adapter" and src.weights_dir == str(out_dir / "adapter")
    assert src.base == str(Path(demo_paths["model_dir"]).resolve())
    with pytest.raises(xp.ExportError, match="Meta-Llama-3-8B-Instruct"):  # without it: the hub id it names
        sources.resolve_source(imp.data["adapters"][0])
