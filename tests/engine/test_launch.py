"""engine.runs.launch: argv, env and generated configs for every backend, without starting anything."""

from __future__ import annotations

import json
import os
import shlex
import sys

import pytest
import yaml

from engine.machine.hardware import GpuInfo, Hardware, cpu_only
from engine.runs.accelerate_configs import deepspeed_config
from engine.runs.launch import LaunchError, build_command, preview_text, write_plan_files
from engine.spec.schema import RunSpec


def make_spec(**groups) -> RunSpec:
    data = {"model": {"name_or_path": "org/model"}, "data": {"datasets": ["d"]}}
    for key, value in groups.items():
        data[key] = value
    return RunSpec.model_validate(data)


def gpus(n: int, bf16: bool = True, vendor: str = "nvidia") -> Hardware:
    return Hardware(
        gpus=[
            GpuInfo(index=i, name="H100" if bf16 else "V100", memory_total_mib=80_000, vendor=vendor, bf16=bf16)
            for i in range(n)
        ],
        vendor=vendor,
    )


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


class TestSingle:
    def test_cpu_single_process(self, tmp_path):
        plan = build_command(make_spec(), tmp_path, cpu_only())
        # no launcher: the trainer itself, with the environment accelerate's simple launcher gives its child
        assert plan.argv == [
            sys.executable,
            "-m",
            "engine.trainer.train",
            str(tmp_path / "spec.yaml"),
            "--run-dir",
            str(tmp_path),
        ]
        assert plan.env["ACCELERATE_USE_CPU"] == "True" and plan.env["ACCELERATE_MIXED_PRECISION"] == "no"
        assert plan.env["ACCELERATE_DYNAMO_BACKEND"] == "NO" and plan.env["KMP_BLOCKTIME"] == "1"
        assert plan.env["OMP_NUM_THREADS"] == "1" and plan.env["CUDA_VISIBLE_DEVICES"] == ""
        assert plan.device == "cpu" and plan.precision == "fp32" and plan.files == {}

    def test_gpu_auto_precision_bf16_and_visible_devices(self, tmp_path):
        plan = build_command(make_spec(), tmp_path, gpus(4))
        assert plan.precision == "bf16" and plan.env["CUDA_VISIBLE_DEVICES"] == "0"
        assert plan.env["ACCELERATE_USE_CPU"] == "False" and plan.env["ACCELERATE_MIXED_PRECISION"] == "bf16"
        assert "KMP_AFFINITY" not in plan.env and "accelerate.commands.launch" not in plan.argv

    @pytest.mark.parametrize("hardware", ["cpu", "cuda"])  # not "gpu": that id reads as the gpu mark
    def test_environment_is_what_accelerates_own_simple_launcher_gives(self, tmp_path, monkeypatch, hardware):
        """The single-process run skips ``accelerate launch``; what the launcher would have added to the trainer's
        environment comes from accelerate's own code, given the flags the launch used before."""
        from accelerate.commands.launch import _validate_launch_command, launch_command_parser
        from accelerate.utils.launch import prepare_simple_launcher_cmd_env

        hw = cpu_only() if hardware == "cpu" else gpus(1)
        plan = build_command(make_spec(), tmp_path, hw)
        flags = ["--num_processes", "1", "--num_machines", "1", "--dynamo_backend", "no"]
        on_cpu = hardware == "cpu"
        flags += ["--mixed_precision", "no" if on_cpu else "bf16"] + (["--cpu"] if on_cpu else [])
        monkeypatch.setenv("OMP_NUM_THREADS", plan.env["OMP_NUM_THREADS"])
        args, _, _ = _validate_launch_command(launch_command_parser().parse_args([*flags, *plan.argv[1:]]))
        cmd, theirs = prepare_simple_launcher_cmd_env(args)
        assert cmd == plan.argv
        added = {k: v for k, v in theirs.items() if os.environ.get(k) != v}
        assert added and {k: plan.env.get(k) for k in added} == added

    def test_auto_precision_fp16_on_gpu_without_bf16(self, tmp_path):
        assert build_command(make_spec(), tmp_path, gpus(1, bf16=False)).precision == "fp16"

    def test_scheduler_gpu_ids_win(self, tmp_path):
        plan = build_command(make_spec(), tmp_path, gpus(4), gpu_ids=[3])
        assert plan.env["CUDA_VISIBLE_DEVICES"] == "3" and plan.gpu_ids == [3]

    def test_rocm_sets_hip_and_rocr(self, tmp_path):
        plan = build_command(make_spec(), tmp_path, gpus(2, vendor="amd"), gpu_ids=[1])
        assert plan.env["HIP_VISIBLE_DEVICES"] == plan.env["ROCR_VISIBLE_DEVICES"] == "1"


class TestHardwareRules:
    def test_bf16_on_gpu_without_bf16(self, tmp_path):
        with pytest.raises(LaunchError, match="train.precision"):
            build_command(make_spec(train={"precision": "bf16"}), tmp_path, gpus(1, bf16=False))

    def test_fp16_when_the_run_lands_on_cpu(self, tmp_path):
        with pytest.raises(LaunchError, match="train.precision"):
            build_command(make_spec(train={"precision": "fp16"}), tmp_path, cpu_only())

    def test_cuda_requested_without_gpu(self, tmp_path):
        with pytest.raises(LaunchError, match="launch.device"):
            build_command(make_spec(launch={"device": "cuda"}), tmp_path, cpu_only())

    def test_fsdp_on_cpu(self, tmp_path):
        with pytest.raises(LaunchError, match="launch.backend"):
            build_command(make_spec(launch={"backend": "fsdp", "num_processes": 2}), tmp_path, cpu_only())

    def test_flash_attention_on_cpu(self, tmp_path):
        with pytest.raises(LaunchError, match="model.attn_implementation"):
            build_command(
                make_spec(model={"name_or_path": "m", "attn_implementation": "flash_attention_2"}),
                tmp_path,
                cpu_only(),
            )

    def test_more_processes_than_gpus(self, tmp_path):
        with pytest.raises(LaunchError, match="launch.num_processes"):
            build_command(make_spec(launch={"backend": "ddp", "num_processes": 8}), tmp_path, gpus(2))

    def test_gpu_id_that_does_not_exist(self, tmp_path):
        with pytest.raises(LaunchError, match="launch.gpus"):
            build_command(make_spec(launch={"gpus": [7]}), tmp_path, gpus(2))


class TestDistributed:
    def test_cpu_ddp_uses_multi_gpu_flag_with_accelerate_use_cpu(self, tmp_path):
        plan = build_command(make_spec(launch={"backend": "ddp", "num_processes": 2}), tmp_path, cpu_only())
        assert "--multi_gpu" in plan.argv and flag(plan.argv, "--num_processes") == "2"
        assert plan.env["ACCELERATE_USE_CPU"] == "true" and "--cpu" not in plan.argv

    def test_cpu_deepspeed_uses_deepspeeds_cpu_accelerator(self, tmp_path):
        plan = build_command(make_spec(launch={"backend": "deepspeed", "num_processes": 2}), tmp_path, cpu_only())
        assert yaml.safe_load(plan.files["accelerate.yaml"])["distributed_type"] == "DEEPSPEED"
        # ACCELERATE_USE_CPU would keep accelerate's state MULTI_CPU: the Trainer would train plain DDP
        assert plan.env["DS_ACCELERATOR"] == "cpu" and "ACCELERATE_USE_CPU" not in plan.env
        assert "DS_ACCELERATOR=cpu" in preview_text(
            make_spec(launch={"backend": "deepspeed", "num_processes": 2}), tmp_path, cpu_only()
        )

    def test_gpu_ddp_config_file(self, tmp_path):
        plan = build_command(make_spec(launch={"backend": "ddp", "num_processes": 4}), tmp_path, gpus(8))
        cfg = yaml.safe_load(plan.files["accelerate.yaml"])
        assert cfg["distributed_type"] == "MULTI_GPU" and cfg["num_processes"] == 4
        assert flag(plan.argv, "--config_file") == str(tmp_path / "accelerate.yaml")
        assert plan.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"

    def test_deepspeed_zero3_matches_the_seed(self, tmp_path):
        spec = make_spec(
            launch={
                "backend": "deepspeed",
                "num_processes": 8,
                "deepspeed": {"zero_stage": 3, "offload_optimizer": "cpu"},
            },
            method={"finetuning": "lora", "quantization": {"bits": 4}},
        )
        plan = build_command(spec, tmp_path, gpus(8))
        acc = yaml.safe_load(plan.files["accelerate.yaml"])
        assert acc["distributed_type"] == "DEEPSPEED" and acc["num_processes"] == 8
        assert acc["deepspeed_config"]["deepspeed_config_file"] == str(tmp_path / "ds_config.json")
        ds = json.loads(plan.files["ds_config.json"])
        zero = ds["zero_optimization"]
        assert zero["stage"] == 3 and zero["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
        assert zero["offload_param"]["device"] == "none" and zero["overlap_comm"] and zero["contiguous_gradients"]
        assert zero["sub_group_size"] == 1_000_000_000 and zero["reduce_bucket_size"] == 500_000_000

    @pytest.mark.parametrize("stage", [0, 1, 2, 3])
    def test_deepspeed_config_accepted_by_deepspeed(self, stage):
        from deepspeed.runtime.config import DeepSpeedConfig
        from transformers import TrainingArguments
        from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

        spec = make_spec(
            launch={"backend": "deepspeed", "deepspeed": {"zero_stage": stage}},
            train={"per_device_batch_size": 2, "gradient_accumulation": 8},
        )
        cfg = HfTrainerDeepSpeedConfig(deepspeed_config(spec, "bf16"))
        args = TrainingArguments(
            output_dir="/tmp/x", per_device_train_batch_size=2, gradient_accumulation_steps=8, bf16=True, use_cpu=True
        )
        cfg.trainer_config_process(args)
        ds = DeepSpeedConfig(cfg.config, mpu=None) if stage else None
        filled = cfg.config
        assert filled["train_micro_batch_size_per_gpu"] == 2 and filled["gradient_accumulation_steps"] == 8
        assert filled["bf16"]["enabled"] is True and filled["fp16"]["enabled"] is False
        if ds is not None:
            assert ds.zero_optimization_stage == stage

    def test_fsdp_config_matches_the_seed(self, tmp_path):
        model = tmp_path / "m"
        model.mkdir()
        (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
        spec = make_spec(model={"name_or_path": str(model)}, launch={"backend": "fsdp", "num_processes": 8})
        acc = yaml.safe_load(build_command(spec, tmp_path, gpus(8)).files["accelerate.yaml"])
        assert acc["distributed_type"] == "FSDP" and acc["mixed_precision"] == "bf16"
        fs = acc["fsdp_config"]
        assert fs["fsdp_sharding_strategy"] == "FULL_SHARD" and fs["fsdp_offload_params"] is False
        assert fs["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
        assert fs["fsdp_transformer_layer_cls_to_wrap"] == "Qwen2DecoderLayer"


class TestSeveralMachines:
    def spec(self):
        return make_spec(
            launch={
                "backend": "deepspeed",
                "num_processes": 8,
                "num_machines": 2,
                "main_process_ip": "10.0.0.1",
                "machine_rank": 0,
            }
        )

    def test_every_node_gets_its_rank(self, tmp_path):
        plan = build_command(self.spec(), tmp_path, gpus(8))
        assert len(plan.node_commands) == 2
        for rank, cmd in enumerate(plan.node_commands):
            argv = shlex.split(cmd)
            assert flag(argv, "--machine_rank") == str(rank) and flag(argv, "--main_process_ip") == "10.0.0.1"
        acc = yaml.safe_load(plan.files["accelerate.yaml"])
        assert acc["num_processes"] == 16 and acc["num_machines"] == 2
        # one launcher per node, not accelerate's default (pdsh: every node started from the main one over ssh)
        assert acc["deepspeed_config"]["deepspeed_multinode_launcher"] == "standard"

    def test_slurm_script(self, tmp_path):
        script = build_command(self.spec(), tmp_path, gpus(8)).slurm_script
        assert "#SBATCH --nodes=2" in script and "#SBATCH --gpus-per-node=8" in script
        assert '--machine_rank "$SLURM_NODEID"' in script and '--main_process_ip "$MAIN_ADDR"' in script
        assert "scontrol show hostnames" in script


class TestFilesAndSecrets:
    def test_secrets_are_passed_but_never_written(self, tmp_path, monkeypatch):
        monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
        plan = build_command(make_spec(), tmp_path, cpu_only())
        assert plan.env["HF_TOKEN"] == "hf_secret_value"
        write_plan_files(plan, tmp_path)
        for f in tmp_path.iterdir():
            assert "hf_secret_value" not in f.read_text()
        assert "hf_secret_value" not in preview_text(make_spec(), tmp_path, cpu_only())

    def test_unrelated_environment_is_not_inherited(self, tmp_path, monkeypatch):
        monkeypatch.setenv("SOME_RANDOM_SECRET", "x")
        assert "SOME_RANDOM_SECRET" not in build_command(make_spec(), tmp_path, cpu_only()).env

    def test_preview_shows_commands_and_configs(self, tmp_path):
        text = preview_text(make_spec(launch={"backend": "deepspeed", "num_processes": 2}), tmp_path, gpus(2))
        assert "accelerate.commands.launch" in text and "ds_config.json" in text and "zero_optimization" in text

    def test_preview_explains_what_cannot_run(self, tmp_path):
        text = preview_text(make_spec(launch={"device": "cuda"}), tmp_path, cpu_only())
        assert text.startswith("Cannot launch") and "launch.device" in text
