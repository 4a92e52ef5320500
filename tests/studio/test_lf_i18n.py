"""The LLaMA-Factory import's notes and refusals on the Chinese page: every note and every reason a key is refused
is a catalog message of engine.lf.messages (checked in the source, and by running inputs that reach each of them),
the key tables name their reasons by catalog key, and the Train tab shows them in the page's language. The real
example YAMLs in Chinese: tests/engine/test_lf_examples.py."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from engine.core.messages import Message
from engine.lf import compat, keys, launch_settings, to_lf, to_spec
from engine.lf import merge_yaml as merge
from engine.lf.messages import MESSAGES
from engine.spec.schema import SpecError, parse_spec
from studio.i18n.localize import localize
from studio.tabs import train, train_lf

CJK = re.compile(r"[\u4e00-\u9fff]")
ROOT = Path(__file__).resolve().parents[2]
LF_MODULES = [
    "engine/lf/compat.py",
    "engine/lf/to_spec.py",
    "engine/lf/to_lf.py",
    "engine/lf/merge_yaml.py",
    "engine/lf/launch_settings.py",
    "engine/lf/keys.py",
]


def _is_catalog_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "message"


def _from_catalog(node: ast.AST, name_ok: bool = False) -> bool:
    """A catalog message, or (the collector's default: ``why if why is not None else message(...)``) a choice
    between a given one and a catalog message."""
    if isinstance(node, ast.IfExp):
        return _from_catalog(node.body, True) and _from_catalog(node.orelse, True)
    return _is_catalog_call(node) or (name_ok and isinstance(node, ast.Name))


def _texts_for_the_page(tree: ast.AST):
    """(line, node) of every text that reaches the page: a note appended, the why of a refused or missing key, the
    message of a SpecError's problem."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            owner = getattr(getattr(node.func, "value", None), "attr", None)
            if name == "append" and owner == "notes":
                yield node.lineno, node.args[0]
            elif name == "bad" and len(node.args) > 1:
                yield node.lineno, node.args[1]
            elif name == "SpecError" and isinstance(node.args[0], ast.List):
                for item in node.args[0].elts:  # (path, message); a problem built before it: the run test below
                    if isinstance(item, ast.Tuple):
                        yield node.lineno, item.elts[1]
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            if getattr(node.targets[0].value, "attr", None) in ("missing", "unsupported"):
                yield node.lineno, node.value


def _catalog_keys_in(tree: ast.AST) -> set[str]:
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if _is_catalog_call(node) and node.args and isinstance(node.args[0], ast.Constant)
    }


@pytest.mark.parametrize("module", LF_MODULES)
def test_every_note_and_refusal_is_made_from_the_catalog(module):
    """An f-string note or reason bypasses the catalog and stays English on the Chinese page."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    for line, node in _texts_for_the_page(tree):
        assert _from_catalog(node), f"{module}:{line}: a note or refusal outside the catalog (engine.lf.messages)"
    for key in _catalog_keys_in(tree):
        assert key in MESSAGES, f"{module}: {key} is not in engine.lf.messages"


def test_the_key_tables_name_their_reasons_by_catalog_key():
    reasons = (
        list(keys._NOTED.values())
        + [why for _, why in keys._FEATURES.values()]
        + [instead for _, instead in keys._HF4_REMOVED.values()]
        + list(to_spec._STAGES_OUT.values())
    )
    assert reasons and all(r in MESSAGES for r in reasons), [r for r in reasons if r not in MESSAGES]


# ----------------------------------------------------------------------------------------------- each path, run
@pytest.fixture
def model(tmp_path) -> Path:
    """A model folder with fewer positions than LF's default cutoff_len (2048)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 512}))
    return folder


def _imports(model: Path, tmp_path: Path) -> list[keys._Import]:
    """Imports that between them reach every note and refusal of engine.lf.to_spec, merge and launch."""
    tokenized = tmp_path / "tokenized"
    tokenized.mkdir()
    (tokenized / "data.arrow").write_text("x")
    base = {"model_name_or_path": str(model), "dataset": "demo_alpaca", "template": "default"}
    many = {
        **base,
        "plot_loss": True,  # noted
        "save_safetensors": True,  # removed in transformers 5, at its default: noted
        "per_gpu_train_batch_size": 4,  # removed, set: refused
        "image_max_pixels": 1024 * 1024,  # a feature Studio does not have
        "adam_beta1": "high",  # a TrainingArguments field of the wrong type
        "no_such_key": 1,
        "rope_scaling": "linear",
        "cutoff_len": "long",  # no factor from the model: the default one, with a note
        "dataset_dir": "ONLINE",
        "output_dir": "saves/run",  # relative, outside the workspace
        "deepspeed": "nowhere/ds.json",
        "adapter_name_or_path": "nowhere/adapter",
        "do_train": False,
        "quantization_method": "gptq",
        "freeze_trainable_layers": -2,
        "interleave_probs": "a,b",
        "packing": True,
        "bf16": True,
        "fp16": True,
        "report_to": "all",
        "use_galore": True,
        "use_apollo": True,
        "use_dft_loss": True,
        "use_asft_loss": True,
    }
    imps = [to_spec._lf_import(many, None, None)]
    imps.append(to_spec._lf_import({**base, "stage": "ppo", "tokenized_path": str(tokenized)}, None, None))
    imps.append(
        to_spec._lf_import({**base, "tokenized_path": str(tmp_path / "empty"), "dataset_dir": "none"}, None, None)
    )
    kto = {**base, "stage": "kto", "per_device_train_batch_size": 1, "gradient_accumulation_steps": 8}
    imps.append(to_spec._lf_import(kto, None, None))
    imps.append(
        to_spec._lf_import({**base, "stage": "pt", "packing": False, "use_galore": True, "optim": "sgd"}, None, None)
    )
    imps.append(to_spec._lf_import({**base, "use_apollo": True, "apollo_scale_front": True, "bf16": True}, None, None))
    acc = {
        "distributed_type": "TPU",
        "num_machines": 2,
        "num_processes": 3,
        "gpu_ids": "zero",
        "mixed_precision": "fp8",
        "fsdp_config": "full",
        "deepspeed_config": {"zero3_init_flag": True, "odd": 1},
        "odd_key": 1,
    }
    imps.append(to_spec._lf_import(base, acc, None))
    acc2 = {"distributed_type": "FSDP", "mixed_precision": "fp16", "fsdp_config": {"fsdp_version": 2, "odd": 1}}
    imps.append(to_spec._lf_import({**base, "bf16": True}, acc2, None))
    imps.append(to_spec._lf_import({**base, "template": "moss_vl"}, None, None))  # a VLM family's processor template
    ray = {"ray_num_workers": 2, "master_addr": "10.0.0.1", "ray_storage_filesystem": "s3"}  # LF's Ray launcher
    imps.append(to_spec._lf_import({**base, **ray}, None, None))
    fp8 = {"fp8": True, "fp8_backend": "msamp", "fp8_enable_fsdp_float8_all_gather": True}  # LF's FP8 FSDP example
    fsdp = {
        "fsdp": ["full_shard", "auto_wrap", "hybrid_shard_zero2"],
        "fsdp_transformer_layer_cls_to_wrap": ["A", "B"],
    }
    imps.append(to_spec._lf_import({**base, **fp8, **fsdp}, None, None))
    imps.append(to_spec._lf_import({**base, "fsdp_min_num_params": 10}, None, None))  # without fsdp: no effect
    with pytest.MonkeyPatch.context() as env:  # LF's default for use_openmind_hub: refused when the key is unwritten
        env.setenv("USE_OPENMIND_HUB", "1")
        imps.append(to_spec._lf_import(base, None, None))
    ds = {
        "zero_optimization": {"stage": 2, "odd": 5},
        "bf16": {"enabled": True},
        "train_batch_size": 8,
        "odd": 1,
    }
    (tmp_path / "list.json").write_text("[1]")
    for source in (ds, str(tmp_path / "missing.json"), str(tmp_path / "list.json")):
        imps.append(keys._Import())
        launch_settings._from_ds_json(source, imps[-1])
    export = {
        "model_name_or_path": str(tmp_path),  # a folder without config.json
        "adapter_name_or_path": "nowhere/adapter",
        "finetuning_type": "full",
        "template": "llama3",
        "trust_remote_code": True,
        "export_size": 0,
        "export_device": "tpu",
        "export_legacy_format": "yes",
        "quantization_bit": 4,
        "learning_rate": 1e-4,  # a training key
        "no_such_key": 1,
    }
    imps.append(merge.lf_export_to_merge(export, tmp_path))
    gptq = {"model_name_or_path": str(tmp_path), "export_dir": "out", "export_quantization_bit": 3}
    gptq.update(export_quantization_dataset="nowhere.jsonl", export_quantization_nsamples=0)
    gptq.update(export_legacy_format=True, export_size=1)
    imps.append(merge.lf_export_to_merge(gptq, tmp_path))  # GPTQ at export: LF's refusals, what Studio ignores
    gptq = {"model_name_or_path": str(tmp_path), "adapter_name_or_path": "a", "export_quantization_bit": 4}
    imps.append(merge.lf_export_to_merge(gptq, tmp_path))
    imps.append(merge.lf_export_to_merge({"finetuning_type": "oft", "export_device": "auto"}, tmp_path))
    imps.append(merge.lf_export_to_merge({"model_name_or_path": "nowhere/model", "adapter_name_or_path": "a"}, None))
    imps.append(merge.lf_export_to_merge(["not", "a", "mapping"], None))
    return imps


def _spec_errors(tmp_path: Path) -> list[SpecError]:
    """The refusals of reading a YAML (load_any, lf_text_to_spec) before any key is looked at."""
    out = []
    (tmp_path / "bad.yaml").write_text("a: [", encoding="utf-8")
    (tmp_path / "spec.yaml").write_text("schema_version: 1\n", encoding="utf-8")
    (tmp_path / "lf.yaml").write_text("model_name_or_path: m\n", encoding="utf-8")
    (tmp_path / "acc.yaml").write_text("- a list\n", encoding="utf-8")
    calls = [
        lambda: compat.load_any(tmp_path / "missing.yaml"),
        lambda: compat.load_any(tmp_path / "bad.yaml"),
        lambda: compat.load_any(tmp_path / "spec.yaml", tmp_path / "acc.yaml"),
        lambda: compat.load_any(tmp_path / "lf.yaml", tmp_path / "acc.yaml"),
        lambda: compat.lf_text_to_spec("a: ["),
        lambda: compat.lf_text_to_spec("a: 1"),
        lambda: compat.lf_text_to_spec("model_name_or_path: m", "a: ["),
        lambda: compat.lf_text_to_spec("model_name_or_path: m", "- a list"),
        # a grpo spec written as LF YAML (the page's "Save as LF YAML"): LF has no GRPO stage
        lambda: to_lf.spec_to_lf(
            parse_spec(
                {
                    "model": {"name_or_path": "m"},
                    "method": {"stage": "grpo", "grpo": {"num_generations": 2, "rewards": [{"kind": "math"}]}},
                    "data": {"datasets": ["d"]},
                }
            )
        ),
    ]
    for call in calls:
        with pytest.raises(SpecError) as info:
            call()
        out.append(info.value)
    return out


def test_every_note_and_refusal_reached_is_a_catalog_message_shown_in_chinese(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from engine.machine import hardware

    monkeypatch.setattr(hardware, "detect", lambda: type("Hw", (), {"gpus": []})())  # export_device auto: no GPU
    texts: list = []
    for imp in _imports(model, tmp_path):
        texts += list(imp.notes) + list(imp.unsupported.values()) + list(imp.missing.values())
    for exc in _spec_errors(tmp_path):
        texts += [msg for _, msg in exc.problems]
    for text in texts:
        assert isinstance(text, Message) and text.key in MESSAGES, repr(text)
        zh = localize(text, "zh")
        assert CJK.search(zh) and zh != str(text), (text.key, zh)
    reached = set()
    while texts:  # with the messages inside them ("looked in ...")
        text = texts.pop()
        reached.add(text.key)
        texts += [p for p in text.params.values() if isinstance(p, Message)]
    made = set().union(*(_catalog_keys_in(ast.parse((ROOT / m).read_text(encoding="utf-8"))) for m in LF_MODULES))
    assert made - reached == set(), "catalog messages no input here reaches"


def test_a_refused_transformers_4_key_says_what_to_use_in_chinese(model):
    imp = to_spec._lf_import({"model_name_or_path": str(model), "per_gpu_train_batch_size": 4}, None, None)
    why = imp.unsupported["per_gpu_train_batch_size"]
    assert str(why).startswith("removed in transformers 5") and str(why).endswith("use per_device_train_batch_size")
    assert localize(why, "zh").endswith("请改用 per_device_train_batch_size")


# ----------------------------------------------------------------------------------------------- the Train tab
def _lf_yaml(model: Path, **extra) -> str:
    args = {
        "model_name_or_path": str(model),
        "stage": "sft",
        "finetuning_type": "lora",
        "lora_rank": 16,
        "dataset": "demo_alpaca",
        "template": "default",
        "cutoff_len": 128,
        "overwrite_cache": True,
        "plot_loss": True,
        "packing": True,
        **extra,
    }
    return yaml.safe_dump(args, sort_keys=False)


def _notes(msg: str, lang: str) -> list[str]:
    lines = msg.split("\n")
    return [line[2:] for line in lines[lines.index(train.t("lf_notes", lang)) + 1 :]]


def test_the_train_tab_shows_the_notes_in_the_pages_language(model):
    values, msg = train_lf.import_lf(_lf_yaml(model), "", "zh")
    assert values is not None, msg
    notes = _notes(msg, "zh")
    assert "plot_loss：已接受，但不起作用（Studio 实时绘制 loss 曲线）" in notes
    assert "packing：Studio 打包时样本之间互不注意（即 LF 的 neat_packing）" in notes
    assert all(CJK.search(n) for n in notes), notes
    _, english = train_lf.import_lf(_lf_yaml(model), "", "en")
    assert "plot_loss: accepted, ignored (the studio plots loss live)" in _notes(english, "en")


def test_the_train_tab_names_refused_keys_with_chinese_reasons(model):
    values, msg = train_lf.import_lf(_lf_yaml(model, use_unsloth=True, stage="ppo", no_such_key=1), "", "zh")
    assert values is None
    lines = msg.split("\n")[1:]
    assert "- `use_unsloth`：不支持 Unsloth：Studio 使用 transformers 和 PEFT 训练" in lines
    assert any(line.startswith("- `stage`：不支持 PPO（stage ppo）") for line in lines), lines
    assert "- `no_such_key`：不是 LLaMA-Factory 的训练参数（LLaMA-Factory 也会拒绝）" in lines
    values, msg = train_lf.import_lf("a: 1", "", "zh")
    assert values is None and "不是 LLaMA-Factory 训练 YAML" in msg
