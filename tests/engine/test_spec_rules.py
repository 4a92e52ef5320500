"""One class per cross-field rule (engine.spec.schema.cross_field_errors) and context rule (check_context).

Each class shows the rule firing with the field path in the message, and the fix the message suggests passing,
so a rule that stops firing or fires too widely both fail here.
"""

from __future__ import annotations

import copy
import json
import re

import pytest
from pydantic import ValidationError

from engine.spec.rules import spec_warnings
from engine.spec.schema import RunSpec, SpecError, parse_spec


def make(**groups) -> dict:
    """A minimal valid spec dict with the given groups deep-merged in."""
    data = {"model": {"name_or_path": "org/model"}, "data": {"datasets": ["a"]}}
    for group, values in groups.items():
        node = data.setdefault(group, {})
        _merge(node, values)
    return data


def _merge(node: dict, values: dict) -> None:
    for k, v in values.items():
        if isinstance(v, dict) and isinstance(node.get(k), dict):
            _merge(node[k], v)
        else:
            node[k] = copy.deepcopy(v)


def rejects(data: dict, path: str) -> str:
    """The spec is refused naming ``path``; returns the messages given for that path."""
    with pytest.raises(ValidationError, match=re.escape(path) + ":"):
        RunSpec.model_validate(data)
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert path in [p for p, _ in info.value.problems]
    return " ".join(str(m) for p, m in info.value.problems if p == path)


def accepts(data: dict) -> RunSpec:
    return RunSpec.model_validate(data)


class TestQuantizationNeedsLora:
    def test_full_with_4bit(self):
        rejects(make(method={"finetuning": "full", "quantization": {"bits": 4}}), "method.quantization.bits")

    def test_freeze_with_8bit(self):
        rejects(make(method={"finetuning": "freeze", "quantization": {"bits": 8}}), "method.quantization.bits")

    def test_lora_fix(self):
        accepts(make(method={"finetuning": "lora", "quantization": {"bits": 4}}))


class TestDoraOn8bit:
    def test_rejected(self):
        rejects(make(method={"lora": {"use_dora": True}, "quantization": {"bits": 8}}), "method.lora.use_dora")

    def test_4bit_ok(self):
        accepts(make(method={"lora": {"use_dora": True}, "quantization": {"bits": 4}}))


def _ds(**ds) -> dict:
    return make(launch={"backend": "deepspeed", "num_processes": 2, "deepspeed": ds})


class TestOptimizerOffloadNeedsZero:
    def test_stage0(self):
        rejects(_ds(zero_stage=0, offload_optimizer="cpu"), "launch.deepspeed.offload_optimizer")

    def test_stage1_ok(self):
        accepts(_ds(zero_stage=1, offload_optimizer="cpu"))

    def test_ignored_without_deepspeed(self):
        accepts(make(launch={"deepspeed": {"zero_stage": 0, "offload_optimizer": "cpu"}}))


class TestParamOffloadNeedsZero3:
    @pytest.mark.parametrize("stage", [0, 1, 2])
    def test_below_3(self, stage):
        rejects(_ds(zero_stage=stage, offload_param="cpu"), "launch.deepspeed.offload_param")

    def test_stage3_ok(self):
        accepts(_ds(zero_stage=3, offload_param="cpu"))


class TestNvmeNeedsPath:
    def test_no_path(self):
        rejects(_ds(zero_stage=3, offload_optimizer="nvme"), "launch.deepspeed.nvme_path")

    def test_with_path(self):
        accepts(_ds(zero_stage=3, offload_optimizer="nvme", offload_param="nvme", nvme_path="/nvme"))


class TestZero3Quantization:
    def test_8bit_rejected(self):
        data = _ds(zero_stage=3)
        data["method"] = {"quantization": {"bits": 8}}
        rejects(data, "method.quantization.bits")

    def test_4bit_fp32_storage_rejected(self):
        data = _ds(zero_stage=3)
        data["method"] = {"quantization": {"bits": 4, "compute_dtype": "float32"}}
        rejects(data, "method.quantization.compute_dtype")

    def test_4bit_bf16_ok(self):
        # The seed's worked example: QLoRA on ZeRO-3.
        data = _ds(zero_stage=3, offload_optimizer="cpu")
        data["method"] = {"quantization": {"bits": 4, "compute_dtype": "bfloat16"}}
        accepts(data)

    def test_8bit_zero2_ok(self):
        data = _ds(zero_stage=2)
        data["method"] = {"quantization": {"bits": 8}}
        accepts(data)


class TestFsdpQuantization:
    def test_8bit_rejected(self):
        rejects(
            make(launch={"backend": "fsdp", "num_processes": 2}, method={"quantization": {"bits": 8}}),
            "method.quantization.bits",
        )

    def test_4bit_fp32_rejected(self):
        rejects(
            make(
                launch={"backend": "fsdp", "num_processes": 2},
                method={"quantization": {"bits": 4, "compute_dtype": "float32"}},
            ),
            "method.quantization.compute_dtype",
        )

    def test_4bit_bf16_ok(self):
        accepts(
            make(
                launch={"backend": "fsdp", "num_processes": 2},
                method={"quantization": {"bits": 4, "compute_dtype": "bfloat16"}},
            )
        )


class TestSingleBackendOneProcess:
    def test_rejected(self):
        rejects(make(launch={"backend": "single", "num_processes": 2}), "launch.num_processes")

    def test_ddp_ok(self):
        accepts(make(launch={"backend": "ddp", "num_processes": 2}))


class TestDdpOneProcess:
    """Issue 27 item 18: accelerate refuses DDP with one process at launch; the spec refuses it first, naming the
    field, and DDP over two machines of one process each stays valid."""

    def test_rejected_naming_the_field(self):
        err = rejects(make(launch={"backend": "ddp", "num_processes": 1}), "launch.num_processes")
        assert "at least 2 processes" in str(err) and "launch.backend to single" in str(err)

    def test_two_machines_of_one_process_ok(self):
        accepts(make(launch={"backend": "ddp", "num_machines": 2, "main_process_ip": "10.0.0.1"}))


class TestSingleBackendOneMachine:
    def test_rejected(self):
        rejects(
            make(launch={"backend": "single", "num_machines": 2, "main_process_ip": "10.0.0.1"}), "launch.num_machines"
        )


class TestGpuIds:
    @pytest.mark.parametrize("gpus", [[0, 0], [-1]])
    def test_duplicate_or_negative(self, gpus):
        rejects(make(launch={"gpus": gpus}), "launch.gpus")

    def test_distinct_ok(self):
        accepts(make(launch={"backend": "ddp", "gpus": [0, 3], "num_processes": 2}))


class TestProcessesAboveGpus:
    def test_rejected(self):
        rejects(make(launch={"backend": "ddp", "num_processes": 4, "gpus": [0, 1]}), "launch.num_processes")

    def test_equal_ok(self):
        accepts(make(launch={"backend": "ddp", "num_processes": 2, "gpus": [0, 1]}))


class TestGpusOnCpu:
    def test_rejected(self):
        rejects(make(launch={"device": "cpu", "gpus": [0]}), "launch.gpus")


class TestSeveralMachinesNeedAddress:
    def test_no_ip(self):
        rejects(make(launch={"backend": "ddp", "num_machines": 2}), "launch.main_process_ip")

    def test_blank_ip(self):
        rejects(make(launch={"backend": "ddp", "num_machines": 2, "main_process_ip": "  "}), "launch.main_process_ip")

    def test_ip_ok(self):
        accepts(make(launch={"backend": "ddp", "num_machines": 2, "main_process_ip": "10.0.0.1"}))


class TestMachineRankBelowCount:
    def test_rank_equal_count(self):
        rejects(
            make(launch={"backend": "ddp", "num_machines": 2, "machine_rank": 2, "main_process_ip": "h"}),
            "launch.machine_rank",
        )

    def test_rank_on_one_machine(self):
        rejects(make(launch={"machine_rank": 1}), "launch.machine_rank")

    def test_last_rank_ok(self):
        accepts(make(launch={"backend": "ddp", "num_machines": 2, "machine_rank": 1, "main_process_ip": "h"}))


class TestFsdpNeedsGpu:
    def test_rejected(self):
        rejects(make(launch={"backend": "fsdp", "device": "cpu", "num_processes": 2}), "launch.backend")


class TestFp16NeedsGpu:
    def test_rejected(self):
        rejects(make(train={"precision": "fp16"}, launch={"device": "cpu"}), "train.precision")

    def test_bf16_on_cpu_ok(self):
        accepts(make(train={"precision": "bf16"}, launch={"device": "cpu"}))


class TestMixProbs:
    def test_count(self):
        rejects(make(data={"datasets": ["a", "b"], "mix": "interleave_under", "mix_probs": [1.0]}), "data.mix_probs")

    def test_sum(self):
        rejects(
            make(data={"datasets": ["a", "b"], "mix": "interleave_over", "mix_probs": [0.5, 0.6]}), "data.mix_probs"
        )

    def test_negative(self):
        rejects(
            make(data={"datasets": ["a", "b"], "mix": "interleave_over", "mix_probs": [1.5, -0.5]}), "data.mix_probs"
        )

    def test_not_a_number(self):
        nan = float("nan")
        rejects(
            make(data={"datasets": ["a", "b"], "mix": "interleave_over", "mix_probs": [nan, nan]}), "data.mix_probs"
        )

    def test_with_concat(self):
        rejects(make(data={"datasets": ["a", "b"], "mix_probs": [0.5, 0.5]}), "data.mix_probs")

    def test_ok(self):
        accepts(make(data={"datasets": ["a", "b"], "mix": "interleave_under", "mix_probs": [0.25, 0.75]}))


class TestDatasetListedTwice:
    def test_rejected(self):
        rejects(make(data={"datasets": ["a", "a"]}), "data.datasets")


class TestPackingNotForDpo:
    def test_rejected(self):
        rejects(make(method={"stage": "dpo"}, data={"packing": True}), "data.packing")

    def test_pt_ok(self):
        accepts(make(method={"stage": "pt"}, data={"packing": True}))


class TestPreferenceStagesTakeWholeAnswers:
    """kto and rm, like dpo, hand whole answers to TRL: no packing, no length grouping, no padding-free collator."""

    @pytest.mark.parametrize("stage", ["kto", "rm"])
    def test_packing_and_grouping_refused(self, stage):
        batch = {"per_device_batch_size": 2}
        err = rejects(make(method={"stage": stage}, data={"packing": True}, train=batch), "data.packing")
        assert f"not {stage}" in err
        rejects(make(method={"stage": stage}, data={"group_by_length": True}, train=batch), "data.group_by_length")
        rejects(make(method={"stage": stage}, data={"padding_free": "on"}, train=batch), "data.padding_free")
        accepts(make(method={"stage": stage}, data={"padding_free": "auto"}, train=batch))


class TestPackedAttention:
    """Per-sample attention is an sdpa path (engine.trainer.attention)."""

    @pytest.mark.parametrize("attn", ["eager", "flash_attention_2"])
    def test_per_sample_needs_sdpa(self, attn):
        err = rejects(make(model={"attn_implementation": attn, "packed_attention": "per_sample"}),
                      "model.packed_attention")  # fmt: skip
        assert attn in err and "model.attn_implementation to sdpa" in err
        accepts(make(model={"attn_implementation": attn, "packed_attention": "auto"}))
        accepts(make(model={"attn_implementation": "sdpa", "packed_attention": "per_sample"}))

    def test_per_sample_needs_a_covered_architecture_before_launch(self, model_dir, data_dir):
        """The model's config.json decides (engine.machine.kernels.per_sample_refusal): llama passes, another
        architecture or a sliding window is refused naming the field; auto just keeps the mask there."""
        per_sample = {"packed_attention": "per_sample"}
        parse_spec(ctx(model_dir, data_dir, data={"cutoff_len": 256}, model=per_sample), context=True)
        config = model_dir / "config.json"
        for extra, said in (({"model_type": "gemma2"}, "not gemma2"), ({"model_type": "mistral", "sliding_window": 64},
                            "sliding-window")):  # fmt: skip
            config.write_text(json.dumps({"max_position_embeddings": 512, "num_hidden_layers": 4, **extra}))
            err = ctx_rejects(ctx(model_dir, data_dir, data={"cutoff_len": 256}, model=per_sample),
                              "model.packed_attention")  # fmt: skip
            assert said in str(err) and "auto or mask" in str(err)
            parse_spec(ctx(model_dir, data_dir, data={"cutoff_len": 256}), context=True)


class TestKtoBatch:
    def test_one_sample_per_device_refused(self):
        err = rejects(make(method={"stage": "kto"}, train={"per_device_batch_size": 1}), "train.per_device_batch_size")
        assert "KL" in err and "gradient_accumulation" in err

    def test_two_ok(self):
        spec = accepts(make(method={"stage": "kto", "kto": {"beta": 0.2}}, train={"per_device_batch_size": 2}))
        assert (spec.method.kto.beta, spec.method.kto.desirable_weight) == (0.2, 1.0)

    def test_rm_takes_one(self):
        accepts(make(method={"stage": "rm"}, train={"per_device_batch_size": 1}))


class TestGroupByLength:
    def test_not_with_packing(self):
        for stage in ("sft", "pt"):
            data = make(method={"stage": stage}, data={"group_by_length": True, "packing": True})
            rejects(data, "data.group_by_length")
            with pytest.raises(SpecError, match=r"data\.group_by_length or data\.packing"):
                parse_spec(data)

    def test_not_for_dpo(self):
        rejects(make(method={"stage": "dpo"}, data={"group_by_length": True}), "data.group_by_length")

    def test_ok_alone(self):
        accepts(make(method={"stage": "pt"}, data={"group_by_length": True}))
        accepts(make(data={"group_by_length": True}))


class TestReportToNone:
    def test_rejected(self):
        rejects(make(output={"report_to": ["none", "tensorboard"]}), "output.report_to")


class TestLoraTargetsAll:
    def test_all_with_names(self):
        rejects(make(method={"lora": {"targets": ["all", "q_proj"]}}), "method.lora.targets")

    def test_names_ok(self):
        accepts(make(method={"lora": {"targets": ["q_proj", "v_proj"]}}))


class TestPeftAndOptimizerMethods:
    """LoRA+, PiSSA, OFT and the optimizers beyond AdamW: each refused combination names its field; the fix passes."""

    @pytest.mark.parametrize(
        "groups, path",
        [
            ({"method": {"finetuning": "full", "lora": {"loraplus_lr_ratio": 16}}}, "method.lora.loraplus_lr_ratio"),
            (
                {"method": {"lora": {"loraplus_lr_ratio": 16}}, "train": {"optimizer": "muon"}},
                "method.lora.loraplus_lr_ratio",
            ),
            ({"method": {"finetuning": "oft", "lora": {"pissa_init": True}}}, "method.lora.pissa_init"),
            ({"method": {"stage": "dpo", "lora": {"pissa_init": True}}}, "method.lora.pissa_init"),
            (
                {"method": {"lora": {"pissa_init": True}, "quantization": {"bits": 4}}, "launch": {"device": "cuda"}},
                "method.lora.pissa_init",
            ),
            ({"method": {"lora": {"pissa_convert": True}}}, "method.lora.pissa_convert"),
            ({"method": {"finetuning": "oft", "oft": {"rank": 4}}}, "method.oft.block_size"),
            ({"method": {"finetuning": "oft", "oft": {"rank": 0, "block_size": 0}}}, "method.oft.block_size"),
            ({"method": {"finetuning": "oft", "oft": {"targets": ["all", "q_proj"]}}}, "method.oft.targets"),
            ({"train": {"optimizer": "galore_adamw"}}, "train.optimizer"),  # with LoRA, as LF refuses
            ({"method": {"finetuning": "oft"}, "train": {"optimizer": "badam"}}, "train.optimizer"),
            (
                {"method": {"finetuning": "full"}, "train": {"optimizer": "muon"}, "launch": {"backend": "deepspeed"}},
                "train.optimizer",
            ),
            (
                {
                    "method": {"finetuning": "full"},
                    "train": {"optimizer": "apollo_adamw", "low_rank": {"proj_type": "reverse_std"}},
                },
                "train.low_rank.proj_type",
            ),
            (
                {
                    "method": {"finetuning": "full"},
                    "train": {"optimizer": "galore_adamw", "low_rank": {"layerwise": True}},
                },
                "train.low_rank.layerwise",
            ),
            (
                {
                    "method": {"finetuning": "full"},
                    "train": {"optimizer": "badam", "gradient_accumulation": 1},
                    "launch": {"backend": "ddp", "num_processes": 2},
                },
                "train.optimizer",
            ),
        ],
    )
    def test_refused_naming_the_field(self, groups, path):
        rejects(make(**groups), path)

    def test_fixes_pass(self):
        accepts(make(method={"lora": {"loraplus_lr_ratio": 16, "pissa_init": True, "pissa_convert": True}}))
        accepts(make(method={"lora": {"pissa_init": True, "use_dora": True}}, launch={"device": "cpu"}))
        accepts(make(method={"finetuning": "oft", "oft": {"rank": 4, "block_size": 0}}))
        accepts(make(method={"finetuning": "full"}, train={"optimizer": "galore_adamw"}))
        low_rank = {"layerwise": True}
        accepts(
            make(
                method={"finetuning": "freeze"},
                train={"optimizer": "apollo_adamw", "gradient_accumulation": 1, "low_rank": low_rank},
            )
        )
        accepts(make(train={"optimizer": "muon"}))  # Muon and Adam-mini also train adapters


# ----------------------------------------------------------------------------------------------- context rules
@pytest.fixture
def model_dir(tmp_path):
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "llama", "max_position_embeddings": 512, "num_hidden_layers": 4}), encoding="utf-8"
    )
    return folder


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "dataset_info.json").write_text(
        json.dumps(
            {
                "sft_set": {"file_name": "sft.json", "formatting": "alpaca"},
                "pairs": {
                    "file_name": "pairs.json",
                    "ranking": True,
                    "columns": {"prompt": "instruction", "chosen": "chosen", "rejected": "rejected"},
                },
                "tagged": {"file_name": "tagged.json", "columns": {"kto_tag": "label"}},
            }
        ),
        encoding="utf-8",
    )
    return folder


def ctx(model_dir, data_dir, **groups) -> dict:
    data = make(**groups)
    data["model"].setdefault("name_or_path", str(model_dir))
    if data["model"]["name_or_path"] == "org/model":
        data["model"]["name_or_path"] = str(model_dir)
    data["data"].setdefault("dataset_dir", str(data_dir))
    if data["data"]["datasets"] == ["a"]:
        data["data"]["datasets"] = ["sft_set"]
    return data


def ctx_rejects(data: dict, path: str) -> SpecError:
    with pytest.raises(SpecError, match=re.escape(path) + ":") as info:
        parse_spec(data, context=True)
    assert path in [p for p, _ in info.value.problems]
    return info.value


class TestContextBaseline:
    def test_valid(self, model_dir, data_dir):
        parse_spec(ctx(model_dir, data_dir, data={"cutoff_len": 512}), context=True)


class TestModelFolder:
    def test_missing_folder(self, tmp_path, data_dir):
        ctx_rejects(
            ctx(tmp_path / "nope", data_dir, model={"name_or_path": str(tmp_path / "nope")}), "model.name_or_path"
        )

    def test_folder_without_config(self, tmp_path, data_dir):
        (tmp_path / "empty").mkdir()
        ctx_rejects(ctx(None, data_dir, model={"name_or_path": str(tmp_path / "empty")}), "model.name_or_path")


class TestCutoffAboveMaxPositions:
    def test_rejected(self, model_dir, data_dir):
        err = ctx_rejects(ctx(model_dir, data_dir, data={"cutoff_len": 1024}), "data.cutoff_len")
        assert "512" in str(err)

    def test_rope_scaling_extends(self, model_dir, data_dir):
        parse_spec(
            ctx(
                model_dir,
                data_dir,
                data={"cutoff_len": 1024},
                model={"rope_scaling": {"type": "linear", "factor": 2.0}},
            ),
            context=True,
        )


class TestLoraTargetsNameModules:
    def test_unknown_module(self, model_dir, data_dir):
        err = ctx_rejects(
            ctx(model_dir, data_dir, data={"cutoff_len": 256}, method={"lora": {"targets": ["q_proj", "qkv"]}}),
            "method.lora.targets",
        )
        assert "qkv" in str(err) and "q_proj," not in str(err).split("name no module")[0]

    def test_known_modules(self, model_dir, data_dir):
        parse_spec(
            ctx(model_dir, data_dir, data={"cutoff_len": 256}, method={"lora": {"targets": ["q_proj", "down_proj"]}}),
            context=True,
        )


class TestResumeFromNeedsCheckpoint:
    def test_missing_checkpoint(self, model_dir, data_dir, tmp_path):
        ctx_rejects(
            ctx(model_dir, data_dir, data={"cutoff_len": 256}, train={"resume_from": str(tmp_path / "checkpoint-7")}),
            "train.resume_from",
        )

    def test_checkpoint_folder_and_last(self, model_dir, data_dir, tmp_path):
        ckpt = tmp_path / "checkpoint-7"
        ckpt.mkdir()
        (ckpt / "trainer_state.json").write_text("{}")
        for value in (str(ckpt), "last"):
            parse_spec(ctx(model_dir, data_dir, data={"cutoff_len": 256}, train={"resume_from": value}), context=True)


class TestFreezeModules:
    def test_unknown_module(self, model_dir, data_dir):
        ctx_rejects(
            ctx(
                model_dir,
                data_dir,
                data={"cutoff_len": 256},
                method={"finetuning": "freeze", "freeze": {"trainable_modules": ["attention"]}},
            ),
            "method.freeze.trainable_modules",
        )

    def test_too_many_layers(self, model_dir, data_dir):
        ctx_rejects(
            ctx(
                model_dir,
                data_dir,
                data={"cutoff_len": 256},
                method={"finetuning": "freeze", "freeze": {"trainable_layers": 5}},
            ),
            "method.freeze.trainable_layers",
        )

    def test_ok(self, model_dir, data_dir):
        parse_spec(
            ctx(
                model_dir,
                data_dir,
                data={"cutoff_len": 256},
                method={"finetuning": "freeze", "freeze": {"trainable_layers": 4, "trainable_modules": ["mlp"]}},
            ),
            context=True,
        )


class TestDatasetRegistry:
    def test_no_registry(self, model_dir, tmp_path):
        ctx_rejects(ctx(model_dir, tmp_path, data={"cutoff_len": 256}), "data.dataset_dir")

    def test_registry_not_json(self, model_dir, tmp_path):
        (tmp_path / "dataset_info.json").write_text("{oops", encoding="utf-8")
        ctx_rejects(ctx(model_dir, tmp_path, data={"cutoff_len": 256}), "data.dataset_dir")

    def test_registry_not_a_mapping(self, model_dir, tmp_path):
        (tmp_path / "dataset_info.json").write_text("[1, 2]", encoding="utf-8")
        ctx_rejects(ctx(model_dir, tmp_path, data={"cutoff_len": 256}), "data.dataset_dir")

    def test_dataset_not_registered(self, model_dir, data_dir):
        err = ctx_rejects(ctx(model_dir, data_dir, data={"datasets": ["missing"], "cutoff_len": 256}), "data.datasets")
        assert "'missing'" in str(err) and "sft_set" in str(err)


class TestDpoNeedsRanking:
    def test_dpo_on_sft_data(self, model_dir, data_dir):
        err = ctx_rejects(
            ctx(model_dir, data_dir, method={"stage": "dpo"}, data={"datasets": ["sft_set"], "cutoff_len": 256}),
            "data.datasets",
        )
        assert "chosen/rejected" in str(err)

    def test_ranking_data_needs_dpo(self, model_dir, data_dir):
        ctx_rejects(ctx(model_dir, data_dir, data={"datasets": ["pairs"], "cutoff_len": 256}), "data.datasets")

    def test_dpo_on_pairs_ok(self, model_dir, data_dir):
        parse_spec(
            ctx(model_dir, data_dir, method={"stage": "dpo"}, data={"datasets": ["pairs"], "cutoff_len": 256}),
            context=True,
        )


class TestStageDataKind:
    """rm trains on pairs like dpo; kto on answers a kto_tag column marks; sft and pt on neither. Each refusal names
    the dataset and what it lacks."""

    def spec(self, model_dir, data_dir, stage: str, dataset: str) -> dict:
        groups = {"method": {"stage": stage}, "data": {"datasets": [dataset], "cutoff_len": 256}}
        return ctx(model_dir, data_dir, **groups, train={"per_device_batch_size": 2})

    def test_rm_needs_pairs(self, model_dir, data_dir):
        err = ctx_rejects(self.spec(model_dir, data_dir, "rm", "sft_set"), "data.datasets")
        assert "rm needs preference pairs" in str(err) and "'sft_set'" in str(err) and "chosen/rejected" in str(err)
        parse_spec(self.spec(model_dir, data_dir, "rm", "pairs"), context=True)

    def test_kto_needs_a_kto_tag(self, model_dir, data_dir):
        err = ctx_rejects(self.spec(model_dir, data_dir, "kto", "sft_set"), "data.datasets")
        assert "'sft_set'" in str(err) and "kto_tag" in str(err)
        err = ctx_rejects(self.spec(model_dir, data_dir, "kto", "pairs"), "data.datasets")
        assert "'pairs'" in str(err) and "preference pairs" in str(err)
        spec = parse_spec(self.spec(model_dir, data_dir, "kto", "tagged"), context=True)
        assert spec.method.stage == "kto"

    @pytest.mark.parametrize("stage", ["sft", "pt", "dpo", "rm"])
    def test_kto_data_only_for_kto(self, model_dir, data_dir, stage):
        err = ctx_rejects(self.spec(model_dir, data_dir, stage, "tagged"), "data.datasets")
        if stage in ("sft", "pt"):
            assert "use stage kto" in str(err) and "'label'" in str(err)

    def test_pairs_name_both_pair_stages(self, model_dir, data_dir):
        err = ctx_rejects(self.spec(model_dir, data_dir, "sft", "pairs"), "data.datasets")
        assert "stage dpo or rm" in str(err)


# ----------------------------------------------------------------------------------------------- warnings
@pytest.mark.parametrize(
    ("groups", "path"),
    [
        (
            {
                "launch": {
                    "backend": "deepspeed",
                    "num_processes": 2,
                    "deepspeed": {"zero_stage": 3, "offload_param": "cpu"},
                }
            },
            "launch.deepspeed.offload_param",
        ),
        ({"launch": {"backend": "deepspeed"}}, "launch.backend"),
        (
            {"train": {"gradient_checkpointing": True, "per_device_batch_size": 1}, "data": {"cutoff_len": 256}},
            "train.gradient_checkpointing",
        ),
        ({"method": {"finetuning": "full"}, "train": {"learning_rate": 1e-2}}, "train.learning_rate"),
        ({"train": {"learning_rate": 1e-6}}, "train.learning_rate"),
        ({"method": {"lora": {"rank": 2, "alpha": 64}}}, "method.lora.alpha"),
        ({"launch": {"gpus": [0, 1]}}, "launch.gpus"),
        ({"train": {"eval_steps": 100}}, "train.eval_steps"),
        ({"data": {"val_size": 0.1}, "train": {"eval_strategy": "no"}}, "train.eval_strategy"),
        ({"data": {"eval_datasets": ["b"]}, "train": {"eval_strategy": "no"}}, "train.eval_strategy"),
        (
            {"launch": {"backend": "deepspeed", "num_processes": 2}, "train": {"optimizer": "adamw_8bit"}},
            "train.optimizer",
        ),
        ({"model": {"trust_remote_code": True}}, "model.trust_remote_code"),
    ],
)
def test_warning(groups, path):
    spec = accepts(make(**groups))
    assert path in [p for p, _ in spec_warnings(spec)]
    assert path not in [p for p, _ in spec_warnings(accepts(make()))]


class TestReportTargetsInstalled:
    def test_a_target_that_is_not_installed_is_refused_before_launch(self, model_dir, data_dir):
        import importlib.util

        missing = [t for t in ("wandb", "mlflow", "trackio", "swanlab") if importlib.util.find_spec(t) is None]
        if not missing:
            pytest.skip("every tracker is installed here")
        for target in missing:
            err = ctx_rejects(ctx(model_dir, data_dir, data={"cutoff_len": 256}, output={"report_to": [target]}),
                              "output.report_to")  # fmt: skip
            assert f"{target} is not installed here: pip install {target}" in str(err)
        parse_spec(
            ctx(model_dir, data_dir, data={"cutoff_len": 256}, output={"report_to": ["tensorboard"]}), context=True
        )
