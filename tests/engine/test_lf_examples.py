"""LLaMA-Factory's example training YAMLs, run as LF's README runs them: from the root of an LF checkout (its
examples/ and data/ folders), through every command that takes a spec. tests/fixtures/lf is that root in miniature:
YAMLs shaped like LF's examples (same keys and values, model swapped for the demo model here), its ds_z3 DeepSpeed
config and a data/dataset_info.json with small demo datasets in LF's formats. Each either imports and validates (and
one trains) or is refused in one line naming the feature."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from engine import cli as studio_cli
from engine.core import workspace
from engine.lf.compat import load_any
from engine.lf.to_spec import lf_to_spec
from engine.spec.schema import SpecError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lf"
ACCEPTED = [
    "train_lora/qwen3_lora_sft.yaml",
    "train_lora/llama3_lora_sft.yaml",
    "train_lora/llama3_lora_sft_ds3.yaml",
    "train_lora/qwen3_lora_pretrain.yaml",
    "train_lora/qwen3_lora_dpo.yaml",
    "train_lora/qwen3_lora_kto.yaml",
    "train_lora/qwen3_lora_reward.yaml",
    "train_lora/qwen3_preprocess.yaml",
    "train_qlora/qwen3_lora_sft_otfq.yaml",
    "train_full/qwen3_full_sft.yaml",
    "extras/loraplus/llama3_lora_sft.yaml",
    "extras/pissa/llama3_lora_sft.yaml",
    "extras/oft/llama3_oft_sft.yaml",
    # LF's multimodal examples, with the demo vision-language model swapped in (lf_root); rlhf_v is a local miniature
    "train_lora/qwen3vl_lora_sft.yaml",
    "train_lora/qwen3vl_lora_dpo.yaml",
    "train_lora/mossvl_lora_sft.yaml",
    "train_full/qwen3vl_full_sft.yaml",
    "train_full/mossvl_full_sft.yaml",
    "extras/oft/qwen2_5vl_oft_sft.yaml",
    "extras/qoft/llama3_oft_sft_bnb_npu.yaml",  # 4-bit OFT; NPU only in LF's file name: no key to note
    # LF's sft losses beside cross-entropy: train.loss (engine.trainer.sft_losses)
    "extras/dft/qwen2_full_sft.yaml",
    "extras/asft/llama2_full_asft.yaml",
    "extras/asft/qwen2_full_asft.yaml",
    "extras/eaft/qwen25_05b_eaft_full.yaml",
]
# file -> (train.loss, asft_alpha, eaft_alpha) as imported
SFT_LOSSES = {
    "extras/dft/qwen2_full_sft.yaml": ("dft", 0.1, 1.0),
    "extras/asft/llama2_full_asft.yaml": ("asft", 0.05, 1.0),
    "extras/asft/qwen2_full_asft.yaml": ("asft", 0.1, 1.0),
    "extras/eaft/qwen25_05b_eaft_full.yaml": ("eaft", 0.1, 1.0),
}
# LF's FP8 examples (train.fp8 through accelerate; torchao, which this machine lacks): file -> launch.backend
FP8 = {"extras/fp8/llama3_fp8_deepspeed_sft.yaml": "deepspeed", "extras/fp8/llama3_fp8_fsdp_sft.yaml": "fsdp"}
REFUSED = {  # file -> (the key named, words of its one line)
    "extras/mod/llama3_full_sft.yaml": ("mixture_of_depths", "pip install mixture-of-depth"),
}
# Optimizers from packages Studio does not install: file -> (the key named, module, what its line says to install)
NEEDS_PACKAGE = {
    "extras/galore/llama3_full_sft.yaml": ("use_galore", "galore_torch", "pip install galore-torch"),
    "extras/apollo/llama3_full_sft.yaml": ("use_apollo", "apollo_torch", "pip install apollo-torch"),
    "extras/badam/llama3_full_sft.yaml": ("use_badam", "badam", "pip install badam"),
    "extras/adam_mini/qwen2_full_sft.yaml": ("use_adam_mini", "adam_mini", "pip install adam-mini"),
    "extras/muon/qwen2_full_sft.yaml": ("use_muon", "muon", "KellerJordan/Muon"),
}


@pytest.fixture
def lf_root(tmp_path, demo_paths, monkeypatch) -> Path:
    """A copy of the LF-shaped root with every model swapped for the demo model; the working directory is the root,
    as in LF's README (`llamafactory-cli train examples/...`)."""
    root = tmp_path / "LLaMA-Factory"
    shutil.copytree(FIXTURE, root)
    for path in (root / "examples").rglob("*.yaml"):
        args = yaml.safe_load(path.read_text(encoding="utf-8"))
        if str(args["model_name_or_path"]).startswith("models/"):
            continue  # a model LF's own scripts write (llama_pro's expansion): made by the test that uses it
        vision = "image_max_pixels" in args  # LF's multimodal examples get the demo's vision-language model
        args["model_name_or_path"] = demo_paths["vlm_model_dir" if vision else "model_dir"]
        path.write_text(yaml.safe_dump(args, sort_keys=False), encoding="utf-8")
    monkeypatch.chdir(root)
    return root


def studio(capsys, *argv: str) -> tuple[int, str, str]:
    rc = studio_cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("name", ACCEPTED)
def test_example_validates_previews_and_plans_from_the_lf_root(name, lf_root, capsys):
    path = f"examples/{name}"
    rc, out, err = studio(capsys, "validate", path, "--gpus", "1")
    assert rc == 0 and out.startswith("OK"), out + err
    assert "plot_loss: accepted, ignored" in err or "plot_loss" not in Path(path).read_text()
    rc, out, err = studio(capsys, "preview", path, "--gpus", "1")
    assert rc == 0 and "-m engine.trainer.train" in out, out + err
    rc, out, err = studio(capsys, "plan", path, "--gpu-mem", "80GiB")
    assert rc in (0, 1) and "per GPU" in out, out + err  # 1: does not fit


def test_flagship_example_maps_every_key(lf_root):
    notes: list[str] = []
    spec = load_any("examples/train_lora/qwen3_lora_sft.yaml", notes=notes)
    t, d = spec.train, spec.data
    assert (spec.launch.ddp_timeout, t.save_only_model, d.dataloader_workers) == (180000000, False, 4)
    assert d.dataset_dir == str(lf_root / "data")  # LF's default ./data, from the working directory
    # LF would write saves/... under the working directory; Studio keeps outputs in the workspace (issue 18) unless
    # STUDIO_OUTPUT_ROOTS allows that root (test_lf_example_trains_through_studio_train)
    assert spec.output.output_dir == str(workspace.home() / "saves" / "qwen3-4b" / "lora" / "sft")
    assert any(n.startswith("output_dir:") and "inside the workspace" in n for n in notes)
    assert (t.eval_strategy, t.save_strategy, spec.output.report_to) == ("no", "steps", ["none"])
    assert {n.split(":")[0] for n in notes} >= {"plot_loss"}
    assert spec.output.overwrite is True  # overwrite_output_dir: a rerun replaces the earlier run's output, as in LF


@pytest.mark.parametrize("name", sorted(SFT_LOSSES))
def test_sft_loss_examples_import_their_loss_and_write_it_back(name, lf_root):
    """use_dft_loss / use_asft_loss (asft_alpha) / use_eaft_loss land in train.loss and its weights, and "Save as
    LF YAML" writes the switch back (the weight only where it is not LF's default)."""
    from engine.lf.to_lf import spec_to_lf

    spec = load_any(f"examples/{name}")
    assert (spec.train.loss, spec.train.asft_alpha, spec.train.eaft_alpha) == SFT_LOSSES[name]
    back = spec_to_lf(spec)[0]
    assert back[f"use_{spec.train.loss}_loss"] is True
    assert back.get("asft_alpha", 0.1) == spec.train.asft_alpha and "eaft_alpha" not in back


def test_two_sft_loss_switches_and_a_loss_outside_sft_are_refused_naming_lfs_key(lf_root):
    args = yaml.safe_load(Path("examples/extras/dft/qwen2_full_sft.yaml").read_text())
    Path("two.yaml").write_text(yaml.safe_dump(args | {"use_asft_loss": True}))
    with pytest.raises(SpecError) as info:
        load_any("two.yaml")
    (key, msg), *_ = info.value.problems
    assert key == "use_asft_loss" and "use_dft_loss and use_asft_loss are both true" in msg, info.value
    Path("dpo.yaml").write_text(yaml.safe_dump(args | {"stage": "dpo", "dataset": "dpo_en_demo"}))
    with pytest.raises(SpecError) as info:
        load_any("dpo.yaml")
    named = [m for p, m in info.value.problems if p.startswith("use_dft_loss")]
    assert named and "set method.stage to sft" in named[0], info.value


def test_kto_and_reward_examples_import_with_their_stage(lf_root):
    notes: list[str] = []
    kto = load_any("examples/train_lora/qwen3_lora_kto.yaml", notes=notes)
    assert (kto.method.stage, kto.method.kto.beta, kto.data.datasets) == ("kto", 0.1, ["kto_en_demo"])
    assert (kto.train.per_device_batch_size, kto.train.gradient_accumulation) == (2, 4)  # LF's 1 x 8, for TRL
    assert any(n.startswith("per_device_train_batch_size:") for n in notes)
    rm = load_any("examples/train_lora/qwen3_lora_reward.yaml")
    assert (rm.method.stage, rm.data.datasets, rm.train.learning_rate) == ("rm", ["dpo_en_demo"], 1e-4)


def test_peft_and_optimizer_examples_map_to_their_fields(lf_root):
    """LoRA+, PiSSA, OFT, GaLore, APOLLO, BAdam, Adam-mini and Muon as LF's examples write them."""
    lora = load_any("examples/extras/loraplus/llama3_lora_sft.yaml").method.lora
    assert (lora.loraplus_lr_ratio, lora.loraplus_lr_embedding, lora.use_rslora) == (16.0, 1e-6, True)
    lora = load_any("examples/extras/pissa/llama3_lora_sft.yaml").method.lora
    assert (lora.pissa_init, lora.pissa_iter, lora.pissa_convert) == (True, 16, True)
    method = load_any("examples/extras/oft/llama3_oft_sft.yaml").method
    assert (method.finetuning, method.oft.rank, method.oft.block_size, method.oft.targets) == ("oft", 0, 32, ["all"])
    method = load_any("examples/extras/qoft/llama3_oft_sft_bnb_npu.yaml").method
    assert (method.finetuning, method.oft.block_size, method.quantization.bits) == ("oft", 32, 4)
    assert method.quantization.double_quant is False
    imported = {name: lf_to_spec(yaml.safe_load(Path(f"examples/{name}").read_text()))[0] for name in NEEDS_PACKAGE}
    galore = imported["extras/galore/llama3_full_sft.yaml"]["train"]
    assert galore["optimizer"] == "galore_adamw" and galore["low_rank"] == {
        "targets": ["mlp", "self_attn"],
        "rank": 128,
        "scale": 2.0,
        "layerwise": True,
    }
    apollo = imported["extras/apollo/llama3_full_sft.yaml"]["train"]
    assert apollo["optimizer"] == "apollo_adamw" and apollo["low_rank"] == {
        "targets": ["all"],
        "rank": 128,
        "scale": 32.0,
        "layerwise": True,
        "apollo_scale_type": "channel",
    }
    badam = imported["extras/badam/llama3_full_sft.yaml"]["train"]
    assert badam["optimizer"] == "badam"
    assert badam["badam"] == {"mode": "layer", "switch_mode": "ascending", "switch_interval": 50, "verbose": 2}
    assert imported["extras/adam_mini/qwen2_full_sft.yaml"]["train"]["optimizer"] == "adam_mini"
    assert imported["extras/muon/qwen2_full_sft.yaml"]["train"]["optimizer"] == "muon"
    # the flavour of GaLore follows optim, as in LF; rsLoRA / DoRA keys are the spec's own fields
    data, _ = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "use_galore": True, "optim": "adafactor"})
    assert data["train"]["optimizer"] == "galore_adafactor"
    data, _ = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "use_dora": True, "use_rslora": True})
    assert data["method"]["lora"]["use_dora"] is True and data["method"]["lora"]["use_rslora"] is True
    _, bad = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "use_galore": True, "use_badam": True})
    assert bad == ["use_badam"]


@pytest.mark.parametrize("name", sorted(NEEDS_PACKAGE))
def test_optimizer_example_without_its_package_is_refused_naming_it(name, lf_root, capsys):
    import importlib.util

    key, module, words = NEEDS_PACKAGE[name]
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here")
    rc, out, err = studio(capsys, "validate", f"examples/{name}", "--gpus", "1")
    problems = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert rc == 1 and len(problems) == 1, err
    assert problems[0].startswith(f"{key} (train.optimizer): ") and words in problems[0], problems


@pytest.mark.parametrize("name", sorted(FP8))
def test_fp8_example_validates_previews_and_plans_where_torchao_is(name, lf_root, capsys, monkeypatch):
    """fp8 / fp8_backend land in train.fp8 / train.fp8_backend; the DeepSpeed example's ZeRO-3 sizes and sections
    in launch.deepspeed, the FSDP one's training-argument FSDP in launch.fsdp; written back for LF. The run itself
    needs a GPU of compute capability 8.9 or newer (tests/engine/test_fp8.py)."""
    from engine.lf.to_lf import spec_to_lf
    from engine.machine import kernels

    monkeypatch.setattr(kernels, "module_installed", lambda module: module == "torchao")  # as where it is installed
    path = f"examples/{name}"
    notes: list[str] = []
    spec = load_any(path, notes=notes)
    assert (spec.train.fp8, spec.train.fp8_backend, spec.train.precision) == (True, "torchao", "bf16")
    assert spec.launch.backend == FP8[name] and spec.output.report_to == ["wandb"]
    if FP8[name] == "deepspeed":
        ds = spec.launch.deepspeed
        assert (ds.zero_stage, ds.stage3_param_persistence_threshold, ds.stage3_prefetch_bucket_size) == (
            3,
            35840,
            11560550,
        )
        assert set(ds.extra_config) == {"comms_config", "monitor_config"}
    else:
        fs = spec.launch.fsdp
        assert (fs.sharding_strategy, fs.auto_wrap_policy, fs.layer_cls_to_wrap) == (
            "FULL_SHARD",
            "TRANSFORMER_BASED_WRAP",
            "LlamaDecoderLayer",
        )
        assert fs.cpu_ram_efficient_loading is False  # transformers' default for FSDP through training arguments
        assert any(n.startswith("fp8_enable_fsdp_float8_all_gather: accepted, no effect") for n in notes)
    back = spec_to_lf(spec)[0]
    assert (back["fp8"], back["fp8_backend"]) == (True, "torchao")
    rc, out, err = studio(capsys, "validate", path, "--gpus", "2")
    assert rc == 0 and out.startswith("OK"), out + err
    rc, out, err = studio(capsys, "preview", path, "--gpus", "2")
    assert rc == 0 and "-m engine.trainer.train" in out, out + err
    rc, out, err = studio(capsys, "plan", path, "--gpu-mem", "80GiB")
    assert rc in (0, 1) and "per GPU" in out, out + err


@pytest.mark.parametrize("name", sorted(FP8))
def test_fp8_example_without_its_backend_is_refused_naming_it(name, lf_root, capsys):
    import importlib.util

    if importlib.util.find_spec("torchao") is not None:
        pytest.skip("torchao is installed here")
    rc, out, err = studio(capsys, "validate", f"examples/{name}", "--gpus", "1")
    problems = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert rc == 1 and problems == [
        "fp8_backend (train.fp8_backend): FP8 backend torchao is not installed: pip install torchao"
    ], err


def test_passed_through_training_arguments(lf_root):
    spec = load_any("examples/train_lora/llama3_lora_sft.yaml")
    assert spec.train.count_input_tokens == "all"  # include_num_input_tokens_seen: true, as transformers 5 reads it
    assert spec.train.extra_args == {"adam_beta2": 0.95}  # a TrainingArguments field with no spec field
    args = yaml.safe_load(Path("examples/train_lora/llama3_lora_sft.yaml").read_text())
    for bad, named in (({"adam_beta2": "high"}, "adam_beta2"), ({"per_gpu_train_batch_size": 2}, "per_gpu")):
        Path("bad.yaml").write_text(yaml.safe_dump(args | bad))
        with pytest.raises(SpecError) as info:
            load_any("bad.yaml")
        assert [p for p, _ in info.value.problems] == [next(iter(bad))], info.value
        assert named in str(info.value)


def test_deepspeed_resolves_from_the_working_directory_first(lf_root, monkeypatch, tmp_path):
    spec = load_any("examples/train_lora/llama3_lora_sft_ds3.yaml")
    assert spec.launch.backend == "deepspeed" and spec.launch.deepspeed.zero_stage == 3
    assert (spec.data.val_size, spec.train.eval_strategy, spec.train.per_device_eval_batch_size) == (0.1, "steps", 1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(SpecError) as info:
        load_any(lf_root / "examples" / "train_lora" / "llama3_lora_sft_ds3.yaml")
    (key, msg), *_ = info.value.problems
    assert key == "deepspeed" and str(elsewhere / "examples" / "deepspeed") in msg
    assert str(lf_root / "examples" / "train_lora" / "examples" / "deepspeed") in msg, "both places are listed"


def test_llama_pro_example_validates_on_the_model_expand_model_wrote(lf_root, demo_paths, capsys):
    """LF's extras/llama_pro: its expand.sh writes models/llama3-8b-instruct-pro with 8 new blocks, the YAML trains
    them (freeze_trainable_layers 8, use_llama_pro). Here `studio expand-model` writes that name into the workspace
    (the demo's 4 layers grown to 8, then by LF's 8 to 16), and the unchanged YAML finds and validates against it."""
    name = "extras/llama_pro/llama3_freeze_sft.yaml"
    assert studio(capsys, "expand-model", demo_paths["model_dir"], "--num-expand", "4", "--name", "demo-8")[0] == 0
    rc, out, err = studio(
        capsys, "expand-model", "models/demo-8", "--num-expand", "8", "--name", "llama3-8b-instruct-pro"
    )
    assert rc == 0, out + err
    rc, out, err = studio(capsys, "validate", f"examples/{name}", "--gpus", "1")
    assert rc == 0 and out.startswith("OK"), out + err
    spec = load_any(f"examples/{name}")
    freeze = spec.method.freeze
    assert (freeze.trainable_layers, freeze.use_llama_pro, freeze.trainable_modules) == (8, True, [])
    from engine.lf.to_lf import spec_to_lf

    back = spec_to_lf(spec)[0]  # written back for LF as LF's example has it
    assert (back["finetuning_type"], back["freeze_trainable_layers"], back["use_llama_pro"]) == ("freeze", 8, True)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_feature_is_refused_in_one_line(name, lf_root, capsys):
    key, words = REFUSED[name]
    rc, out, err = studio(capsys, "validate", f"examples/{name}", "--gpus", "1")
    problems = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert rc == 1 and len(problems) == 1, err
    assert problems[0].startswith(f"{key}: ") and words in problems[0], problems


@pytest.mark.parametrize("name", ACCEPTED)
def test_example_pasted_in_the_chinese_page_shows_its_notes_in_chinese(name, lf_root):
    """The Train tab's LLaMA-Factory YAML section on the Chinese page: the import's notes (plot_loss accepted and
    ignored, the deepspeed launch, the kto batch, pt packing, ...) in Chinese, LF's key names as written."""
    import re

    from studio.tabs import train_lf

    text = (lf_root / "examples" / name).read_text(encoding="utf-8")
    values, msg = train_lf.import_lf(text, "", "zh")
    assert values is not None, msg
    lines = msg.split("\n")
    assert lines[0] == "✅ " + train_lf.t("lf_filled", "zh")
    notes = [line[2:] for line in lines[lines.index(train_lf.t("lf_notes", "zh")) + 1 :]]
    assert notes, msg
    assert all(re.search(r"[\u4e00-\u9fff]", n) for n in notes), notes
    english = train_lf.import_lf(text, "", "en")[1]
    assert not any(n in english for n in notes)  # no note left in English
    if "plot_loss" in text:
        assert "plot_loss：已接受，但不起作用（Studio 实时绘制 loss 曲线）" in notes
    if "deepspeed:" in text:
        assert "有 deepspeed 但没有 accelerate 配置：只用一个进程；需要更多进程请设置 launch.num_processes" in notes


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_feature_is_refused_in_chinese_on_the_chinese_page(name, lf_root):
    from studio.i18n.lf import LF_ZH
    from studio.tabs import train_lf

    key, _ = REFUSED[name]
    values, msg = train_lf.import_lf((lf_root / "examples" / name).read_text(encoding="utf-8"), "", "zh")
    assert values is None
    assert msg.split("\n")[1:] == [f"- `{key}`：" + LF_ZH["lf.refused_mixture_of_depths"]]


def test_default_cutoff_is_lowered_to_what_the_model_takes(lf_root, demo_paths):
    """LF's default cutoff_len (2048) on a model with 256 positions: 256, with a note; written by the user: refused."""
    model = lf_root / "short-model"
    shutil.copytree(demo_paths["model_dir"], model)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(cfg | {"max_position_embeddings": 256}))
    args = yaml.safe_load(Path("examples/train_lora/qwen3_lora_sft.yaml").read_text())
    args["model_name_or_path"] = str(model)
    Path("default.yaml").write_text(yaml.safe_dump({k: v for k, v in args.items() if k != "cutoff_len"}))
    notes: list[str] = []
    assert load_any("default.yaml", notes=notes).data.cutoff_len == 256
    assert any(n.startswith("cutoff_len:") and "256" in n for n in notes)
    Path("written.yaml").write_text(yaml.safe_dump(args))
    with pytest.raises(SpecError, match="cutoff_len"):
        load_any("written.yaml")


def test_queue_add_takes_an_lf_yaml(lf_root, run_registry, capsys):
    from engine.runs import registry as runs

    rc, out, err = studio(capsys, "queue", "add", "examples/train_lora/qwen3_lora_dpo.yaml", "--name", "lf-dpo")
    assert rc == 0, out + err
    rec = runs.get(out.split(":")[0])
    spec = rec.load_spec()
    assert (rec.name, spec.method.stage, spec.launch.ddp_timeout) == ("lf-dpo", "dpo", 180000000)
    # this LF checkout lies inside the workspace, so LF's place is kept
    assert rec.output_dir == str(lf_root / "saves" / "qwen3-4b" / "lora" / "dpo")
    runs.stop(rec.id, grace_s=1)


@pytest.mark.slow
def test_lf_example_trains_through_studio_train(lf_root, run_registry, capsys, monkeypatch):
    """The llama3 LoRA SFT example as LF ships it, with the demo model and 2 steps (max_samples kept small); the
    adapter's files land where LF writes them, in output_dir itself (tests/engine/test_lf_chain.py: from a folder
    outside the workspace, with no STUDIO_OUTPUT_ROOTS)."""
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(lf_root))
    path = Path("examples/train_lora/llama3_lora_sft.yaml")
    args = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump(args | {"max_steps": 2, "save_steps": 1000, "logging_steps": 1}))
    rc, out, err = studio(capsys, "train", str(path))
    assert rc == 0 and "completed" in out, out + err
    assert "step 2/2" in out
    adapter = lf_root / "saves" / "llama3-8b" / "lora" / "sft"
    assert (adapter / "adapter_config.json").is_file(), "the adapter is where LF would write it (output_dir)"


def test_ray_example_imports_as_a_ray_launch_with_lfs_keys(lf_root, capsys, monkeypatch):
    """LF's train_lora/qwen3_lora_sft_ray.yaml (ray_num_workers 4, run by LF with USE_RAY=1) imports as
    launch.target ray with LF's one GPU per worker; its other Ray keys land in launch.ray as LF reads them (a JSON
    string too); preview shows the Ray driver. Ray's s3/gcs storage is refused in one line, naming the key."""
    name = "examples/train_lora/qwen3_lora_sft_ray.yaml"
    notes: list[str] = []
    spec = load_any(name, notes=notes)
    ray = spec.launch.ray
    assert (spec.launch.target, spec.launch.backend, ray.num_workers) == ("ray", "ddp", 4)
    assert (ray.resources_per_worker, ray.placement_strategy, ray.storage_path) == ({"GPU": 1.0}, "PACK", "")
    assert spec.world_size == 4 and spec.effective_batch == 32
    assert any(n.startswith("ray keys: launch.target ray") for n in notes), notes
    rc, out, err = studio(capsys, "validate", name, "--gpus", "4")
    assert rc == 0 and out.startswith("OK"), out + err
    rc, out, err = studio(capsys, "preview", name, "--gpus", "1")
    assert rc == 0 and "-m engine.trainer.ray_driver" in out, out + err
    from engine.lf.to_lf import spec_to_lf_text

    text, acc = spec_to_lf_text(spec)  # written back for LF's Ray launcher, no accelerate config
    back = yaml.safe_load(text)
    assert acc is None and "# run with USE_RAY=1" in text
    ray_back = (back["ray_num_workers"], back["resources_per_worker"], back["placement_strategy"])
    assert ray_back == (4, {"GPU": 1.0}, "PACK")
    again = lf_to_spec(back)[0]["launch"]
    assert (again["target"], again["ray"]["num_workers"]) == ("ray", 4)
    args = yaml.safe_load(Path(name).read_text())
    args |= {
        "resources_per_worker": '{"GPU": 2, "CPU": 8}',
        "placement_strategy": "SPREAD",
        "ray_init_kwargs": {"runtime_env": {"env_vars": {"A": "b"}}},
        "ray_storage_path": "ray_saves",
        "ray_run_name": "qwen3-ray",
        "master_addr": "10.0.0.1",
    }
    notes = []
    data, unsupported = lf_to_spec(args, notes=notes)
    assert unsupported == [] and any(n.startswith("master_addr: accepted, ignored") for n in notes), notes
    assert data["launch"]["ray"] == {
        "num_workers": 4,
        "resources_per_worker": {"GPU": 2, "CPU": 8},
        "placement_strategy": "SPREAD",
        "init_kwargs": {"runtime_env": {"env_vars": {"A": "b"}}},
        "storage_path": str(lf_root / "ray_saves"),
        "run_name": "qwen3-ray",
    }
    defaults = {"ray_num_workers": 1, "resources_per_worker": {"GPU": 1}, "placement_strategy": "PACK"}
    data = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "ray_storage_path": "./saves", **defaults})[0]
    assert "target" not in data.get("launch", {})  # LF's defaults written out: LF trains without Ray, so does Studio
    monkeypatch.setenv("USE_RAY", "1")  # LF's switch: Ray with its defaults, one worker on one GPU
    data = lf_to_spec({"model_name_or_path": "m", "dataset": "d"})[0]
    assert data["launch"]["target"] == "ray" and data["launch"]["ray"] == {
        "num_workers": 1,
        "resources_per_worker": {"GPU": 1},
        "placement_strategy": "PACK",
    }
    monkeypatch.delenv("USE_RAY")
    assert "target" not in lf_to_spec({"model_name_or_path": "m", "dataset": "d"})[0].get("launch", {})
    Path(name).write_text(yaml.safe_dump(args | {"ray_storage_filesystem": "s3"}))
    rc, out, err = studio(capsys, "validate", name, "--gpus", "4")
    problems = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert rc == 1 and len(problems) == 1, err
    assert problems[0].startswith("ray_storage_filesystem: ") and "ray_storage_path" in problems[0], problems


def test_every_key_lf_accepts_is_handled():
    """Each of the keys LLaMA-Factory 0.9.5's `train` accepts (its dataclasses + the transformers 4.57
    TrainingArguments it passed through; tests/fixtures/lf/lf_0.9.5_train_keys.json: key -> LF's default) imports at
    its default: mapped, noted or off. Only do_train false is refused (Studio trains)."""
    keys = json.loads((FIXTURE / "lf_0.9.5_train_keys.json").read_text())
    assert len(keys) == 371  # 376 in its dataclasses, less the 5 it refuses (init=False)
    refused = {}
    for key, default in keys.items():
        data, unsupported = lf_to_spec({"model_name_or_path": "m", "dataset": "d", key: default})
        refused |= dict.fromkeys(unsupported, default)
    assert refused == {"do_train": False}


def test_multimodal_examples_map_lfs_vision_switches(lf_root):
    """LF's vision keys land in model.vision; its video keys are noted (videos are refused at check time); the
    moss_vl template is the processor's own; the dpo example imports with its stage."""
    notes: list[str] = []
    spec = load_any("examples/train_lora/mossvl_lora_sft.yaml", notes=notes)
    v = spec.model.vision
    assert (v.image_max_pixels, v.freeze_vision_tower, v.freeze_multi_modal_projector) == (262144, True, True)
    assert v.freeze_language_model is False and spec.data.template == "auto"
    assert {n.split(":")[0] for n in notes} >= {"video_max_pixels", "video_fps", "video_maxlen", "template moss_vl"}
    assert spec.data.datasets == ["mllm_demo", "identity", "alpaca_en_demo"]
    data, unsupported = lf_to_spec(yaml.safe_load(Path("examples/train_lora/qwen3vl_lora_dpo.yaml").read_text()))
    assert not unsupported and data["method"]["stage"] == "dpo"
    assert data["model"]["vision"]["image_max_pixels"] == 262144 and data["data"]["datasets"] == ["rlhf_v"]


def test_multimodal_lf_example_trains_through_studio_train(lf_root, run_registry, capsys, monkeypatch):
    """LF's Qwen3-VL LoRA SFT example with the demo VLM swapped in trains 2 steps on LF's mllm_demo + identity +
    alpaca_en_demo (images and text rows together), the adapter where LF would write it."""
    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(lf_root))
    path = Path("examples/train_lora/qwen3vl_lora_sft.yaml")
    args = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump(args | {"max_steps": 2, "save_steps": 1000, "logging_steps": 1}))
    rc, out, err = studio(capsys, "train", str(path))
    assert rc == 0 and "completed" in out, out + err
    adapter = lf_root / "saves" / "qwen3-vl-4b" / "lora" / "sft"  # output_dir itself, as LF writes it
    assert (adapter / "adapter_config.json").is_file() and (adapter / "processor_config.json").is_file()


def test_multimodal_dpo_example_trains_through_studio_train(lf_root, run_registry, capsys, monkeypatch):
    """LF's Qwen3-VL LoRA DPO example with the demo VLM swapped in trains 2 steps on rlhf_v (LF's multimodal
    preference layout, its images in LF's mllm_demo_data), logging TRL's preference figures."""
    from engine.core.events import read_all
    from engine.runs import registry as runs

    monkeypatch.setenv("STUDIO_OUTPUT_ROOTS", str(lf_root))
    path = Path("examples/train_lora/qwen3vl_lora_dpo.yaml")
    args = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump(args | {"max_steps": 2, "save_steps": 1000, "logging_steps": 1}))
    rc, out, err = studio(capsys, "train", str(path))
    assert rc == 0 and "completed" in out, out + err
    adapter = lf_root / "saves" / "qwen3-vl-4b" / "lora" / "dpo"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "processor_config.json").is_file()
    (rec,) = [r for r in runs.list_runs() if r.kind == "train"]
    events = read_all(Path(rec.run_dir) / "events.jsonl")
    assert next(e for e in events if e["type"] == "data_ready")["payload"]["num_images"] == 3
    logs = [e["payload"]["metrics"] for e in events if e["type"] == "log"]
    assert len(logs) == 2 and all({"rewards/chosen", "rewards/margins", "rewards/accuracies"} <= set(m) for m in logs)
