"""The run spec as a whole: shipped examples validate, YAML round trips, versioned specs load, field metadata."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from engine.spec.method import MethodSpec
from engine.spec.schema import (
    SCHEMA_VERSION,
    RunSpec,
    SpecError,
    dump_spec,
    load_spec,
    parse_spec,
    save_spec,
    spec_to_dict,
    validate_spec,
)
from engine.spec.watch_group import NotifySpec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "assets" / "examples").glob("*.yaml"))
FIXTURES = ROOT / "tests" / "fixtures" / "specs"
# Examples that train the demo model: validated with context against the built demo workspace.
DEMO_EXAMPLES = ["lora_sft_demo.yaml", "ddp_2proc_cpu.yaml"]


def test_examples_cover_every_method_and_backend():
    specs = [load_spec(p, context=False) for p in EXAMPLES]
    assert len(specs) >= 9
    assert {s.method.stage for s in specs} == {"sft", "pt", "dpo", "kto", "rm", "grpo"}  # kto on demo_kto
    methods = set(typing.get_args(MethodSpec.model_fields["finetuning"].annotation))
    assert {s.method.finetuning for s in specs} == methods == {"lora", "oft", "full", "freeze"}
    assert {s.launch.backend for s in specs} == {"single", "ddp", "fsdp", "deepspeed"}
    assert any(s.method.quantization.bits == 4 and s.launch.deepspeed.zero_stage == 3 for s in specs)
    assert any(s.launch.num_machines > 1 for s in specs)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_validates(path):
    spec = load_spec(path, context=False)
    assert spec.schema_version == SCHEMA_VERSION
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert raw.get("schema_version") == SCHEMA_VERSION, "examples carry their schema version"


@pytest.mark.parametrize("name", DEMO_EXAMPLES)
def test_demo_example_validates_with_context(name, demo_paths):
    data = yaml.safe_load((ROOT / "assets" / "examples" / name).read_text(encoding="utf-8"))
    data["model"]["name_or_path"] = demo_paths["model_dir"]
    data["data"]["dataset_dir"] = demo_paths["data_dir"]
    spec, errors, _ = validate_spec(data)
    assert errors == [] and spec is not None


def test_demo_workspace_spec_validates_with_context(demo_paths):
    load_spec(demo_paths["example_spec"], context=True)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_yaml_round_trip(path, tmp_path):
    spec = load_spec(path, context=False)
    again = parse_spec(yaml.safe_load(dump_spec(spec)))
    assert again == spec
    saved = save_spec(spec, tmp_path / "sub" / "spec.yaml")
    assert load_spec(saved, context=False) == spec
    assert not list(tmp_path.rglob("*.tmp")), "save_spec leaves no temporary file"


def test_dump_is_complete_and_versioned():
    spec = parse_spec({"model": {"name_or_path": "m"}, "data": {"datasets": ["d"]}})
    dumped = yaml.safe_load(dump_spec(spec))
    assert dumped["schema_version"] == SCHEMA_VERSION
    assert set(dumped) == set(RunSpec.model_fields)
    assert dumped == spec_to_dict(spec)


class TestVersions:
    def test_v1_fixture_loads_unchanged(self):
        path = FIXTURES / "v1_full.yaml"
        spec = load_spec(path, context=False)
        assert spec.launch.deepspeed.zero_stage == 3 and spec.method.quantization.bits == 4
        dumped = spec_to_dict(spec)
        # Fields added to version 1 since the fixture was written, with defaults that change nothing for it.
        assert dumped["data"].pop("group_by_length") is False
        assert dumped["data"].pop("dataloader_workers") == 0
        assert dumped["data"].pop("padding_free") == "auto"
        data_added = {"eval_datasets": [], "mask_history": False, "enable_thinking": True, "tool_format": "template"}
        assert {k: dumped["data"].pop(k) for k in data_added} == data_added
        assert dumped["model"].pop("packed_attention") == "auto"
        assert dumped["model"].pop("hub") == "huggingface"  # model.hub: modelscope is LF's use_modelscope_hub
        vision = {"freeze_vision_tower": True, "freeze_multi_modal_projector": True, "freeze_language_model": False}
        assert dumped["model"].pop("vision") == {**vision, "image_max_pixels": 589824, "image_min_pixels": 1024}
        assert dumped["launch"].pop("ddp_timeout") == 1800
        assert dumped["output"].pop("layout") == "studio"  # LF's own layout is only for an LF YAML's output_dir
        assert dumped["output"].pop("overwrite") is False  # LF's overwrite_output_dir
        assert dumped["method"].pop("kto") == {"beta": 0.1, "desirable_weight": 1.0, "undesirable_weight": 1.0}
        added = {
            "save_strategy": "steps",
            "save_only_model": False,
            "eval_strategy": "steps",
            "per_device_eval_batch_size": None,
            "neftune_noise_alpha": None,
            "count_input_tokens": "non_padding",
            "extra_args": {},
            "liger_kernel": "auto",
            "trained_logits_only": True,
            "loss": "cross_entropy",  # sft's dft / asft / eaft (LF's use_*_loss): off
            "asft_alpha": 0.1,
            "eaft_alpha": 1.0,
            "fp8": False,  # accelerate's FP8 (LF's fp8, fp8_backend): off
            "fp8_backend": "auto",
        }
        assert {k: dumped["train"].pop(k) for k in added} == added
        ds_added = ("stage3_param_persistence_threshold", "stage3_prefetch_bucket_size", "extra_config")
        ds = {k: dumped["launch"]["deepspeed"].pop(k) for k in ds_added}  # LF's FP8 example's DeepSpeed keys: unset
        assert ds == dict(zip(ds_added, (None, None, {})))
        # LoRA+, PiSSA, OFT and the optimizers' settings: off, at their defaults
        lora_added = ("loraplus_lr_ratio", "loraplus_lr_embedding", "pissa_init", "pissa_iter", "pissa_convert")
        assert {k: dumped["method"]["lora"].pop(k) for k in lora_added} == {
            "loraplus_lr_ratio": None,
            "loraplus_lr_embedding": 1e-6,
            "pissa_init": False,
            "pissa_iter": 16,
            "pissa_convert": False,
        }
        assert dumped["method"].pop("grpo")["rewards"] == []  # stage grpo's group: no reward functions
        # SimPO's settings (LLaMA-Factory's simpo_gamma, pref_ftx), at LF's defaults
        assert (dumped["method"]["dpo"].pop("simpo_gamma"), dumped["method"]["dpo"].pop("ftx")) == (0.5, 0.0)
        assert dumped["method"].pop("oft") == {"rank": 0, "block_size": 32, "targets": ["all"], "dropout": 0.0}
        assert dumped["method"]["freeze"].pop("use_llama_pro") is False  # LLaMA Pro (LF's use_llama_pro): off
        assert dumped["train"].pop("low_rank")["rank"] == 16 and dumped["train"].pop("badam")["mode"] == "layer"
        assert dumped["launch"].pop("target") == "local" and dumped["launch"].pop("slurm")["extra_sbatch"] == []
        assert dumped["launch"].pop("ray")["num_workers"] == 1  # launch.target ray's group (LF's ray_num_workers)
        # the health rules and notifications (engine.spec.watch_group): at their defaults, no webhook and no email
        assert dumped.pop("health")["loss_nan"] == "stop"
        assert dumped.pop("notify") == {**NotifySpec().model_dump(), "webhook_env": "", "email_to": []}
        want = yaml.safe_load(path.read_text(encoding="utf-8"))
        # gradient_checkpointing became on / off / auto; the fixture's boolean true reads as on
        assert want["train"]["gradient_checkpointing"] is True and dumped["train"]["gradient_checkpointing"] == "on"
        want["train"]["gradient_checkpointing"] = "on"
        assert dumped == want

    def test_v1_minimal_fixture_loads(self):
        spec = load_spec(FIXTURES / "v1_minimal.yaml", context=False)
        assert spec.data.datasets == ["alpaca_zh"] and spec.method.finetuning == "lora"

    def test_unversioned_reads_as_v1(self):
        spec = load_spec(FIXTURES / "unversioned.yaml", context=False)
        assert spec.schema_version == SCHEMA_VERSION and spec.method.finetuning == "full"

    def test_every_fixture_loads(self):
        fixtures = sorted(FIXTURES.glob("*.yaml"))
        assert fixtures
        for path in fixtures:
            load_spec(path, context=False)

    def test_newer_version_is_a_clear_error(self):
        data = yaml.safe_load((FIXTURES / "v1_minimal.yaml").read_text(encoding="utf-8"))
        data["schema_version"] = SCHEMA_VERSION + 1
        with pytest.raises(SpecError, match="schema_version") as info:
            parse_spec(data)
        assert "newer Studio" in str(info.value) and str(SCHEMA_VERSION) in str(info.value)

    @pytest.mark.parametrize("version", [0, -3, "one", 1.5, None])
    def test_nonsense_version(self, version):
        with pytest.raises(SpecError, match="schema_version"):
            parse_spec({"schema_version": version, "model": {"name_or_path": "m"}, "data": {"datasets": ["d"]}})


class TestLoadErrors:
    def test_missing_file(self, tmp_path):
        with pytest.raises(SpecError, match="cannot read"):
            load_spec(tmp_path / "nope.yaml")

    def test_bad_yaml(self, tmp_path):
        path = tmp_path / "bad.yaml"
        path.write_text("model: [unclosed\n", encoding="utf-8")
        with pytest.raises(SpecError, match="not valid YAML"):
            load_spec(path)

    @pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", ""])
    def test_not_a_mapping(self, tmp_path, text):
        path = tmp_path / "s.yaml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(SpecError, match="spec: expected a mapping"):
            load_spec(path, context=False)

    def test_unknown_field_named(self):
        with pytest.raises(SpecError, match=r"train\.lerning_rate: unknown field"):
            parse_spec({"model": {"name_or_path": "m"}, "data": {"datasets": ["d"]}, "train": {"lerning_rate": 1}})

    def test_every_problem_reported(self):
        with pytest.raises(SpecError) as info:
            parse_spec({"model": {"name_or_path": ""}, "data": {"datasets": []}, "train": {"seed": -1}})
        paths = {p for p, _ in info.value.problems}
        assert {"model.name_or_path", "data.datasets", "train.seed"} <= paths

    def test_validate_spec_never_raises(self):
        spec, errors, warns = validate_spec("not a mapping")
        assert spec is None and errors and errors[0][0] == "spec" and warns == []


def _leaf_fields(model: type[BaseModel], prefix: str = ""):
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _leaf_fields(ann, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field


LEAVES = [(p, f) for p, f in _leaf_fields(RunSpec) if p != "schema_version"]


@pytest.mark.parametrize(("path", "field"), LEAVES, ids=[p for p, _ in LEAVES])
def test_field_metadata_for_the_ui(path, field):
    """The UI builds widgets from Field metadata: every field needs a description and a label."""
    assert field.description, f"{path} has no description"
    extra = field.json_schema_extra or {}
    assert extra.get("label"), f"{path} has no label"
    assert "label_zh" not in extra, f"{path}: Chinese labels live in studio/i18n/labels.py"
    assert "group" in extra and "advanced" in extra
    required = {"model.name_or_path", "data.datasets"}
    assert field.is_required() == (path in required), f"{path}: only the model and datasets are required"
