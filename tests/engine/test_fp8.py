"""FP8 training (train.fp8, train.fp8_backend; LLaMA-Factory's fp8 / fp8_backend): the spec's rules, the launch's
GPU rule (compute capability 8.9 or newer, given as NVML reports it), the backend package, and the settings the
trainer hands accelerate. The FP8 matmuls themselves need such a GPU: none of this runs them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.machine import kernels
from engine.machine.hardware import GpuInfo, Hardware
from engine.runs.launch import LaunchError, build_command
from engine.spec.schema import SpecError, parse_spec

BASE = {
    "model": {"name_or_path": "meta-llama/Llama-3.1-8B-Instruct"},
    "data": {"datasets": ["d"]},
    "method": {"finetuning": "full"},
    "train": {"fp8": True, "fp8_backend": "torchao"},
    "launch": {"device": "cuda"},
}


def spec_with(**train):
    return {**BASE, "train": {**BASE["train"], **train}}


@pytest.fixture
def backends_here(monkeypatch):
    """As on a GPU machine with torchao and Transformer Engine installed (this one has neither)."""
    monkeypatch.setattr(kernels, "module_installed", lambda name: True)


def gpu(capability: str, name: str = "NVIDIA H100 80GB HBM3") -> Hardware:
    return Hardware(
        gpus=[GpuInfo(0, name, 81559, "nvidia", compute_capability=capability, bf16=True)], vendor="nvidia"
    )


def test_fp8_validates_on_a_gpu_with_its_backend(backends_here):
    spec = parse_spec(spec_with())
    assert (spec.train.fp8, spec.train.fp8_backend) == (True, "torchao")
    assert parse_spec(BASE | {"train": {}}).train.fp8 is False  # off by default


class TestFp8Rules:
    def test_refused_on_cpu_in_one_line(self, backends_here):
        with pytest.raises(SpecError, match="train.fp8: FP8 training needs an NVIDIA GPU") as err:
            parse_spec({**spec_with(), "launch": {"device": "cpu"}})
        assert len(err.value.problems) == 1

    @pytest.mark.parametrize("precision", ["fp16", "fp32"])
    def test_needs_bf16_for_the_rest(self, precision, backends_here):
        with pytest.raises(SpecError, match=f"train.precision: FP8 trains .* bf16 .*not {precision}"):
            parse_spec(spec_with(precision=precision))

    def test_not_on_a_quantized_model(self, backends_here):
        with pytest.raises(SpecError, match="train.fp8: .*4-bit quantized"):
            parse_spec({**spec_with(), "method": {"finetuning": "lora", "quantization": {"bits": 4}}})

    def test_backend_outside_accelerates_is_refused_naming_the_field(self):
        with pytest.raises(SpecError, match="train.fp8_backend"):
            parse_spec(spec_with(fp8_backend="msamp"))

    @pytest.mark.parametrize(
        ("backend", "install"),
        [
            ("torchao", "pip install torchao$"),
            ("te", r"pip install transformer-engine\[pytorch\]$"),
            ("auto", r"pip install torchao or pip install transformer-engine\[pytorch\]$"),
        ],
    )
    def test_missing_backend_package_names_what_to_install(self, backend, install, monkeypatch):
        monkeypatch.setattr(kernels, "module_installed", lambda name: False)
        with pytest.raises(SpecError, match=f"train.fp8_backend: FP8 backend {backend} is not installed: {install}"):
            parse_spec(spec_with(fp8_backend=backend))

    def test_auto_takes_either_backend(self, monkeypatch):
        monkeypatch.setattr(kernels, "module_installed", lambda name: name == "transformer_engine")
        assert kernels.fp8_backend_missing("auto") is None
        assert kernels.fp8_backend_missing("torchao") == "pip install torchao"


class TestDeviceRule:
    """engine.machine.kernels.fp8_device_refusal, given the GPUs' compute capability."""

    @pytest.mark.parametrize("capability", ["8.9", "9.0", "10.0", "12.0"])
    def test_ada_hopper_and_newer_pass(self, capability):
        assert kernels.fp8_device_refusal("cuda", gpu(capability).gpus) is None

    @pytest.mark.parametrize(
        ("capability", "name"), [("8.0", "NVIDIA A100-SXM4-80GB"), ("8.6", "NVIDIA A10"), ("7.0", "Tesla V100")]
    )
    def test_older_gpus_are_refused_naming_the_gpu(self, capability, name):
        assert kernels.fp8_device_refusal("cuda", gpu(capability, name).gpus) == (
            "fp8.capability",
            {"name": name, "capability": capability},
        )

    def test_cpu_is_refused_and_an_unknown_capability_is_left_to_the_trainer(self):
        assert kernels.fp8_device_refusal("cpu", [])[0] == "fp8.cpu"
        assert kernels.fp8_device_refusal("cuda", gpu("").gpus) is None  # `--gpus N`: a machine described by its size

    def test_launch_refuses_an_a100_in_one_line(self, backends_here, tmp_path):
        spec = parse_spec(spec_with())
        with pytest.raises(LaunchError) as err:
            build_command(spec, tmp_path, gpu("8.0", "NVIDIA A100-SXM4-80GB"))
        assert err.value.problems == [
            (
                "train.fp8",
                "FP8 training needs compute capability 8.9 or newer (Ada, Hopper): NVIDIA A100-SXM4-80GB has 8.0; "
                "turn train.fp8 off",
            )
        ]
        plan = build_command(spec, tmp_path, gpu("9.0"))
        assert plan.precision == "bf16" and plan.device == "cuda"

    def test_launch_refuses_cpu_when_auto_finds_no_gpu(self, backends_here, tmp_path):
        spec = parse_spec({**spec_with(), "launch": {"device": "auto"}})
        with pytest.raises(LaunchError, match="train.fp8: FP8 training needs an NVIDIA GPU .* this run is on CPU"):
            build_command(spec, tmp_path, Hardware(gpus=[], reason="none"))


class TestAccelerateSettings:
    """What the trainer hands accelerate: mixed_precision fp8 on the Trainer's arguments (read by
    Trainer._build_accelerator_args) and the recipe's backend as accelerate's own variables."""

    @pytest.mark.parametrize(("backend", "accelerate_backend"), [("torchao", "AO"), ("te", "TE"), ("auto", "NO")])
    def test_backend_reaches_accelerates_recipe_choice(self, backend, accelerate_backend, backends_here, monkeypatch):
        from accelerate.utils import parse_choice_from_env, parse_flag_from_env
        from accelerate.utils.dataclasses import FP8BackendType

        from engine.trainer.trainers import fp8_accelerate_env

        env = fp8_accelerate_env(parse_spec(spec_with(fp8_backend=backend)))
        monkeypatch.setenv("ACCELERATE_FP8_BACKEND", "")
        monkeypatch.delenv("ACCELERATE_FP8_BACKEND")
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        # as Accelerator.fp8_backend reads it: AO -> AORecipeKwargs, TE -> TERecipeKwargs, NO -> torchao if installed
        assert FP8BackendType(parse_choice_from_env("ACCELERATE_FP8_BACKEND", "NO")) == FP8BackendType(
            accelerate_backend
        )
        # AORecipeKwargs' default is on: an FSDP2 hook, off under Studio's FSDP (version 1)
        assert parse_flag_from_env("ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER", default=True) is False

    def test_training_arguments_ask_accelerate_for_fp8(self, backends_here, tmp_path, monkeypatch):
        from engine.trainer import trainers

        monkeypatch.setattr(trainers, "fp8_device_check", lambda device: None)  # the GPU rule: TestDeviceRule
        for key in ("ACCELERATE_FP8_BACKEND", "ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER"):
            monkeypatch.setenv(key, "")  # recorded: what training_arguments sets is undone after the test
            monkeypatch.delenv(key)
        spec = parse_spec(spec_with(precision="bf16"))
        targs = trainers.training_arguments(spec, tmp_path, tmp_path, "cpu", "bf16", has_eval=False)
        assert (targs.mixed_precision, targs.bf16) == ("fp8", True)
        assert os.environ["ACCELERATE_FP8_BACKEND"] == "AO"
        plain = trainers.training_arguments(
            parse_spec(spec_with(fp8=False)), tmp_path, tmp_path, "cpu", "bf16", has_eval=False
        )
        assert plain.mixed_precision == "bf16"
        # accelerate's prepare() would convert the next run's model by ACCELERATE_FP8_BACKEND with FP8 off
        assert "ACCELERATE_FP8_BACKEND" not in os.environ

    def test_the_trainer_refuses_a_gpu_below_ada_itself(self, monkeypatch):
        """accelerate would train in fp16 on it with a warning; the trainer stops with the launch's line."""
        import torch

        from engine.trainer import trainers

        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: (8, 6))
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "NVIDIA A10")
        with pytest.raises(SpecError, match="train.fp8: .*NVIDIA A10 has 8.6"):
            trainers.fp8_device_check("cuda")
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: (9, 0))
        trainers.fp8_device_check("cuda")
        with pytest.raises(SpecError, match="this run is on CPU"):
            trainers.fp8_device_check("cpu")


FIXTURE_DS = (
    Path(__file__).resolve().parents[1] / "fixtures" / "lf" / "examples" / "deepspeed" / "ds_z3_fp8_config.json"
)


class TestDeepSpeedKeys:
    """LF's ds_z3_fp8_config.json: its ZeRO-3 sizes and its other sections reach the generated ds_config.json."""

    def test_lfs_fp8_deepspeed_config_imports_every_key(self):
        from engine.lf.to_spec import lf_to_spec

        data, unsupported = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "deepspeed": str(FIXTURE_DS)})
        assert unsupported == []
        ds = parse_spec(data).launch.deepspeed
        assert (ds.zero_stage, ds.offload_optimizer, ds.pin_memory, ds.overlap_comm) == (3, "cpu", False, False)
        assert (ds.stage3_param_persistence_threshold, ds.stage3_prefetch_bucket_size) == (35840, 11560550)
        assert (ds.reduce_bucket_size, ds.sub_group_size, ds.steps_per_print) == (12845056, 1_000_000_000, 10_000_000)
        # zero_force_ds_cpu_optimizer true is DeepSpeed's default: nothing to carry
        assert ds.extra_config == {
            "comms_config": {"verbose": False},
            "monitor_config": {"enabled": True, "tag": "DeepSpeedMonitor", "csv_monitor": {"enabled": False}},
        }

    def test_lfs_first_fp8_config_keeps_its_fp8_section_and_clipping(self):
        from engine.lf.to_spec import lf_to_spec

        first = json.loads(FIXTURE_DS.read_text())
        first |= {"gradient_clipping": 0.001, "bf16": {"enabled": False}, "zero_force_ds_cpu_optimizer": False}
        first["fp8"] = {"enabled": True, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1}
        data, unsupported = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "deepspeed": first})
        assert unsupported == []
        spec = parse_spec(data)
        assert spec.train.max_grad_norm == 0.001
        assert spec.launch.deepspeed.extra_config["fp8"]["enabled"] is True
        assert spec.launch.deepspeed.extra_config["zero_force_ds_cpu_optimizer"] is False

    def test_generated_config_carries_them(self):
        from engine.lf.to_spec import lf_to_spec
        from engine.runs.accelerate_configs import deepspeed_config

        data, _ = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "deepspeed": str(FIXTURE_DS)})
        out = deepspeed_config(parse_spec(data), "bf16")
        zero = out["zero_optimization"]
        assert (zero["stage3_param_persistence_threshold"], zero["stage3_prefetch_bucket_size"]) == (35840, 11560550)
        assert out["comms_config"] == {"verbose": False} and out["monitor_config"]["tag"] == "DeepSpeedMonitor"
        assert out["bf16"] == {"enabled": "auto"} and out["train_micro_batch_size_per_gpu"] == "auto"
        plain = deepspeed_config(parse_spec({**BASE, "train": {}, "launch": {"backend": "deepspeed"}}), "bf16")
        assert "stage3_param_persistence_threshold" not in str(plain)  # unset: DeepSpeed's default, as before

    def test_studio_keys_are_the_generated_ones(self):
        from engine.runs.accelerate_configs import deepspeed_config
        from engine.spec.launch_group import DS_STUDIO_KEYS

        spec = parse_spec({**BASE, "train": {}, "launch": {"backend": "deepspeed"}})
        assert set(deepspeed_config(spec, "bf16")) == DS_STUDIO_KEYS

    @pytest.mark.parametrize("key", ["bf16", "zero_optimization", "gradient_accumulation_steps"])
    def test_extra_config_cannot_override_what_studio_writes(self, key):
        launch = {"backend": "deepspeed", "deepspeed": {"extra_config": {key: {}}}}
        with pytest.raises(SpecError, match=f"launch.deepspeed.extra_config: {key} is written by Studio"):
            parse_spec({**BASE, "train": {}, "launch": launch})

    def test_an_unknown_section_of_an_lf_config_is_still_named(self):
        from engine.lf.to_spec import lf_to_spec

        ds = json.loads(FIXTURE_DS.read_text()) | {"flops_profiler": {"enabled": True}}
        ds["zero_optimization"]["stage3_max_live_parameters"] = 5
        _, unsupported = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "deepspeed": ds})
        assert unsupported == ["deepspeed.zero_optimization.stage3_max_live_parameters", "deepspeed.flops_profiler"]


class TestLfImport:
    """LF's fp8 keys and transformers' FSDP through training arguments (its FP8 FSDP example's launch)."""

    def lf(self, **args):
        from engine.lf.to_spec import lf_to_spec

        notes: list[str] = []
        data, unsupported = lf_to_spec({"model_name_or_path": "m", "dataset": "d", "bf16": True, **args}, notes=notes)
        return data, unsupported, notes

    def test_fp8_keys(self, backends_here):
        data, unsupported, _ = self.lf(fp8=True, fp8_backend="te")
        assert unsupported == [] and (data["train"]["fp8"], data["train"]["fp8_backend"]) == (True, "te")
        data, unsupported, _ = self.lf(fp8=True)
        assert unsupported == [] and parse_spec(data).train.fp8_backend == "auto"  # LF's default
        data, unsupported, _ = self.lf(fp8=False, fp8_backend="msamp", fp8_enable_fsdp_float8_all_gather=True)
        assert unsupported == [] and "fp8" not in data["train"]  # options of FP8 while it is off

    def test_msamp_is_refused_in_one_line(self):
        from engine.lf.to_spec import _lf_import

        imp = _lf_import({"model_name_or_path": "m", "dataset": "d", "fp8": True, "fp8_backend": "msamp"}, None, None)
        assert list(imp.unsupported) == ["fp8_backend"]
        assert "MS-AMP is not among the installed accelerate's FP8 backends" in str(imp.unsupported["fp8_backend"])

    @pytest.mark.parametrize(
        ("fsdp", "want"),
        [
            ("full_shard auto_wrap", ("FULL_SHARD", "TRANSFORMER_BASED_WRAP", False)),
            (["shard_grad_op", "offload"], ("SHARD_GRAD_OP", "NO_WRAP", True)),
            (["hybrid_shard", "auto_wrap"], ("HYBRID_SHARD", "TRANSFORMER_BASED_WRAP", False)),
        ],
    )
    def test_fsdp_training_arguments(self, fsdp, want):
        data, unsupported, notes = self.lf(fsdp=fsdp)
        assert unsupported == []
        ln = parse_spec(data).launch
        assert ln.backend == "fsdp"
        assert (ln.fsdp.sharding_strategy, ln.fsdp.auto_wrap_policy, ln.fsdp.offload_params) == want
        assert any(n.startswith("fsdp without an accelerate config") for n in notes)

    def test_fsdp_size_based_wrap(self):
        data, unsupported, _ = self.lf(fsdp=["full_shard", "auto_wrap"], fsdp_min_num_params=1_000_000)
        fs = parse_spec(data).launch.fsdp
        assert unsupported == [] and (fs.auto_wrap_policy, fs.min_num_params) == ("SIZE_BASED_WRAP", 1_000_000)

    def test_what_studio_cannot_take_is_named(self):
        assert self.lf(fsdp=["full_shard", "hybrid_shard_zero2"])[1] == ["fsdp"]
        assert self.lf(fsdp="full_shard", fsdp_transformer_layer_cls_to_wrap=["A", "B"])[1] == [
            "fsdp_transformer_layer_cls_to_wrap"
        ]
        assert self.lf(fsdp_transformer_layer_cls_to_wrap="LlamaDecoderLayer")[1] == [
            "fsdp_transformer_layer_cls_to_wrap"
        ]
        # an fsdp_config was skipped without a word before; Studio takes FSDP settings from an accelerate config
        assert self.lf(fsdp="full_shard", fsdp_config={"version": 2})[1] == ["fsdp_config"]

    def test_torchao_under_fsdp_needs_ram_efficient_loading_off(self, backends_here):
        launch = {"backend": "fsdp", "num_processes": 2}
        with pytest.raises(SpecError, match="launch.fsdp.cpu_ram_efficient_loading: accelerate refuses torchao"):
            parse_spec({**spec_with(), "launch": {**BASE["launch"], **launch}})
        off = {**launch, "fsdp": {"cpu_ram_efficient_loading": False}}
        assert parse_spec({**spec_with(), "launch": {**BASE["launch"], **off}}).launch.backend == "fsdp"
        te = parse_spec({**spec_with(fp8_backend="te"), "launch": {**BASE["launch"], **launch}})
        assert te.launch.fsdp.cpu_ram_efficient_loading is True


def test_run_started_says_what_accelerate_trains_with():
    from types import SimpleNamespace

    from accelerate.utils.dataclasses import FP8BackendType

    from engine.trainer.trainers import fp8_in_use

    def trainer(mixed_precision, backend):
        state = SimpleNamespace(mixed_precision=mixed_precision)
        return SimpleNamespace(accelerator=SimpleNamespace(state=state, fp8_backend=FP8BackendType(backend)))

    assert fp8_in_use(trainer("fp8", "AO")) == "torchao" and fp8_in_use(trainer("fp8", "TE")) == "te"
    assert fp8_in_use(trainer("fp16", "AO")) == "off: fp16"  # accelerate's own fallback below compute capability 8.9
