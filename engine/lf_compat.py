"""LLaMA-Factory compatibility: its training YAML (+ accelerate config) in, our RunSpec out, and back.

Light: yaml, json and engine.spec only (never torch). ``studio train`` / ``studio validate`` call ``load_any`` so a
LLaMA-Factory user's ``train_args.yaml`` and ``accelerate_config.yaml`` work unchanged on the features we support.
Every key we do not support is reported by name (``SpecError``), never silently dropped; keys that are accepted but
change nothing (``overwrite_cache``, ``logging_dir``) produce a note. Absent keys take LLaMA-Factory's and
transformers' defaults (not ours), so a converted run is the run LLaMA-Factory would have made.

Commands (argv[0] is the command name):
  studio import-lf FILE [--accelerate-config F] -o SPEC
  studio export-lf SPEC -o FILE [--accelerate-config-out F]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import yaml

from engine.spec import RunSpec, SpecError, load_spec, parse_spec, read_model_config, save_spec

# LF key -> spec path for values that pass through unchanged (pydantic checks them; errors name the LF key).
_DIRECT: dict[str, str] = {
    "model_name_or_path": "model.name_or_path",
    "model_revision": "model.revision",
    "trust_remote_code": "model.trust_remote_code",
    "stage": "method.stage",
    "finetuning_type": "method.finetuning",
    "quantization_bit": "method.quantization.bits",
    "quantization_type": "method.quantization.quant_type",
    "double_quantization": "method.quantization.double_quant",
    "lora_rank": "method.lora.rank",
    "lora_alpha": "method.lora.alpha",
    "lora_dropout": "method.lora.dropout",
    "use_rslora": "method.lora.use_rslora",
    "use_dora": "method.lora.use_dora",
    "freeze_trainable_layers": "method.freeze.trainable_layers",
    "pref_beta": "method.dpo.beta",
    "pref_loss": "method.dpo.loss_type",
    "mix_strategy": "data.mix",
    "template": "data.template",
    "cutoff_len": "data.cutoff_len",
    "max_samples": "data.max_samples",
    "val_size": "data.val_size",
    "train_on_prompt": "data.train_on_prompt",
    "preprocessing_num_workers": "data.preprocessing_workers",
    "group_by_length": "data.group_by_length",  # transformers 4's TrainingArguments key, which LF passes through
    "output_dir": "output.output_dir",
    "run_name": "output.run_name",
    "logging_steps": "train.logging_steps",
    "save_steps": "train.save_steps",
    "eval_steps": "train.eval_steps",
    "save_total_limit": "train.save_total_limit",
    "num_train_epochs": "train.num_epochs",
    "max_steps": "train.max_steps",
    "per_device_train_batch_size": "train.per_device_batch_size",
    "gradient_accumulation_steps": "train.gradient_accumulation",
    "learning_rate": "train.learning_rate",
    "lr_scheduler_type": "train.lr_scheduler",
    "warmup_ratio": "train.warmup_ratio",
    "warmup_steps": "train.warmup_steps",
    "weight_decay": "train.weight_decay",
    "optim": "train.optimizer",
    "max_grad_norm": "train.max_grad_norm",
    "seed": "train.seed",
    "resume_from_checkpoint": "train.resume_from",
}
# Keys handled by code below (conversions), with the spec path used to name them in errors.
_CONVERTED: dict[str, str] = {
    "flash_attn": "model.attn_implementation",
    "rope_scaling": "model.rope_scaling",
    "lora_target": "method.lora.targets",
    "freeze_trainable_modules": "method.freeze.trainable_modules",
    "freeze_extra_modules": "method.freeze.extra_modules",
    "dataset": "data.datasets",
    "dataset_dir": "data.dataset_dir",
    "interleave_probs": "data.mix_probs",
    "packing": "data.packing",
    "neat_packing": "data.packing",
    "bf16": "train.precision",
    "fp16": "train.precision",
    "pure_bf16": "train.precision",
    "disable_gradient_checkpointing": "train.gradient_checkpointing",
    "gradient_checkpointing": "train.gradient_checkpointing",
    "report_to": "output.report_to",
    "deepspeed": "launch",
    "do_train": "",
    "quantization_method": "",
    "overwrite_cache": "",
    "logging_dir": "",
    "overwrite_output_dir": "",
    "plot_loss": "",
}
# Defaults of LLaMA-Factory / transformers that differ from ours: applied when the key is absent.
_LF_DEFAULTS: dict[str, Any] = {
    "cutoff_len": 2048,
    "learning_rate": 5e-5,
    "lr_scheduler_type": "linear",
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "logging_steps": 500,
    "save_total_limit": None,
    "lora_rank": 8,
    "template": "auto",
}
_NULLABLE = {"max_samples", "save_total_limit", "resume_from_checkpoint"}
_FLASH_IN = {"auto": "sdpa", "sdpa": "sdpa", "fa2": "flash_attention_2", "disabled": "eager"}
_FLASH_OUT = {"sdpa": "sdpa", "flash_attention_2": "fa2", "eager": "disabled"}
_BACKEND_IN = {"NO": "single", "MULTI_GPU": "ddp", "MULTI_CPU": "ddp", "DEEPSPEED": "deepspeed", "FSDP": "fsdp"}
_BACKEND_OUT = {"single": "NO", "ddp": "MULTI_GPU", "deepspeed": "DEEPSPEED", "fsdp": "FSDP"}
_DS_ACC = {  # accelerate deepspeed_config key -> launch.deepspeed field
    "zero_stage": "zero_stage",
    "offload_optimizer_device": "offload_optimizer",
    "offload_param_device": "offload_param",
    "overlap_comm": "overlap_comm",
    "contiguous_gradients": "contiguous_gradients",
    "pin_memory": "pin_memory",
    "sub_group_size": "sub_group_size",
    "reduce_bucket_size": "reduce_bucket_size",
    "steps_per_print": "steps_per_print",
}
_FSDP_ACC = {
    "fsdp_sharding_strategy": "sharding_strategy",
    "fsdp_auto_wrap_policy": "auto_wrap_policy",
    "fsdp_transformer_layer_cls_to_wrap": "layer_cls_to_wrap",
    "fsdp_min_num_params": "min_num_params",
    "fsdp_offload_params": "offload_params",
    "fsdp_state_dict_type": "state_dict_type",
    "fsdp_cpu_ram_efficient_loading": "cpu_ram_efficient_loading",
}
_SHARDING_NUM = {1: "FULL_SHARD", 2: "SHARD_GRAD_OP", 3: "NO_SHARD", 4: "HYBRID_SHARD"}
# Accepted only with the value our launcher uses anyway; anything else is unsupported.
_FSDP_FIXED = {
    "fsdp_backward_prefetch": "BACKWARD_PRE",
    "fsdp_forward_prefetch": False,
    "fsdp_sync_module_states": True,
    "fsdp_use_orig_params": True,
    "fsdp_version": 1,
}
_ACC_NOOP = {
    "compute_environment": "LOCAL_MACHINE",
    "debug": False,
    "downcast_bf16": "no",
    "rdzv_backend": "static",
    "same_network": True,
    "main_training_function": "main",
    "enable_cpu_affinity": False,
    "tpu_env": [],
    "tpu_use_cluster": False,
    "tpu_use_sudo": False,
}
# DeepSpeed's defaults for ZeRO keys we have no field for (LLaMA-Factory's ds_z*_config.json files set these).
_DS_DEFAULTS = {
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    "allgather_partitions": True,
    "reduce_scatter": True,
    "allgather_bucket_size": 5e8,
    "round_robin_gradients": False,
    "stage3_gather_16bit_weights_on_model_save": True,
}
_LF_MARKERS = {"model_name_or_path", "stage", "finetuning_type", "dataset", "do_train", "lora_target", "template"}


class _Import:
    """Collects the spec dict, unsupported keys (with why) and notes while converting."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.unsupported: dict[str, str] = {}
        self.notes: list[str] = []

    def put(self, path: str, value: Any) -> None:
        node = self.data
        *parents, leaf = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value

    def bad(self, key: str, why: str = "not supported by Studio") -> None:
        self.unsupported[key] = why


def _csv(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"))


def _resolve(path: str, base_dir: Path | None) -> str:
    try:
        p = Path(str(path)).expanduser()
    except RuntimeError:  # ~user that does not exist: keep it literal, the context check reports it
        p = Path(str(path))
    return str((base_dir / p).resolve()) if base_dir is not None and not p.is_absolute() else str(p)


def lf_to_spec(
    train_args: dict,
    accelerate_config: dict | None = None,
    *,
    base_dir: str | Path | None = None,
    notes: list[str] | None = None,
) -> tuple[dict, list[str]]:
    """Convert LLaMA-Factory training args (+ an accelerate config) to a RunSpec dict.

    Returns (spec dict, names of unsupported keys); accelerate keys are named ``accelerate_config.<key>``, keys of a
    DeepSpeed JSON ``deepspeed.<key>``. Relative ``dataset_dir`` and ``deepspeed`` paths resolve against
    ``base_dir`` (the YAML's folder). ``notes`` (when given) receives one line per accepted-but-ignored key.
    """
    imp = _lf_import(train_args, accelerate_config, Path(base_dir) if base_dir is not None else None)
    if notes is not None:
        notes.extend(imp.notes)
    return imp.data, list(imp.unsupported)


def _lf_import(args: dict, acc: dict | None, base_dir: Path | None) -> _Import:
    imp = _Import()
    args = {**{k: v for k, v in _LF_DEFAULTS.items() if k not in args}, **args}
    for key, value in args.items():
        if key in _DIRECT and (value is not None or key in _NULLABLE):  # LF writes null for "not set"
            imp.put(_DIRECT[key], value)
        elif key in _DIRECT:
            continue
        elif key not in _CONVERTED:
            imp.bad(key)
    imp.put("schema_version", 1)
    if "lora_alpha" not in args or args["lora_alpha"] is None:  # LF: alpha defaults to 2 x rank
        rank = args.get("lora_rank")
        imp.put("method.lora.alpha", rank * 2 if isinstance(rank, int) and not isinstance(rank, bool) else 16)
    _convert(args, imp, base_dir)
    if acc:
        _from_accelerate(acc, args, imp, base_dir)
    return imp


def _convert(args: dict, imp: _Import, base_dir: Path | None) -> None:
    flash = str(args.get("flash_attn", "auto"))
    imp.put("model.attn_implementation", _FLASH_IN.get(flash, flash))
    if args.get("rope_scaling"):
        factor = 2.0
        cfg = read_model_config(str(args.get("model_name_or_path", "")))
        max_pos = cfg.get("max_position_embeddings") if cfg else None
        if isinstance(max_pos, int) and max_pos > 0 and isinstance(args.get("cutoff_len"), int):
            factor = float(max(1, math.ceil(args["cutoff_len"] / max_pos)))  # as LF does
        else:
            imp.notes.append(f"rope_scaling: factor {factor:g} (LF derives it from the local config.json)")
        imp.put("model.rope_scaling", {"type": args["rope_scaling"], "factor": factor})
    if not _truthy(args.get("do_train", True)):
        imp.bad("do_train", "only training runs are supported (do_train: true)")
    if str(args.get("quantization_method", "bnb")).lower() not in ("bnb", "bitsandbytes"):
        imp.bad("quantization_method", "only bitsandbytes (bnb) quantization is supported")
    if "lora_target" in args:
        imp.put("method.lora.targets", _csv(args["lora_target"]))
    mods = _csv(args.get("freeze_trainable_modules", "all"))
    imp.put("method.freeze.trainable_modules", [] if mods == ["all"] else mods)
    if args.get("freeze_extra_modules"):
        imp.put("method.freeze.extra_modules", _csv(args["freeze_extra_modules"]))
    if isinstance(args.get("freeze_trainable_layers"), int) and args["freeze_trainable_layers"] < 0:
        imp.bad("freeze_trainable_layers", "negative values (train the first layers) are not supported")
    if "dataset" in args:
        imp.put("data.datasets", _csv(args["dataset"]))
    if "dataset_dir" in args:
        if str(args["dataset_dir"]).upper() == "ONLINE":
            imp.bad("dataset_dir", "ONLINE datasets are not supported: register them in a dataset_info.json")
        imp.put("data.dataset_dir", _resolve(args["dataset_dir"], base_dir))
    elif base_dir is not None and (base_dir / "data" / "dataset_info.json").is_file():
        imp.put("data.dataset_dir", str((base_dir / "data").resolve()))  # LF's default dataset_dir is ./data
    else:
        imp.notes.append("dataset_dir not set: datasets resolve in the Studio workspace's data folder")
    if args.get("interleave_probs") is not None:
        try:
            imp.put("data.mix_probs", [float(p) for p in _csv(args["interleave_probs"])])
        except ValueError:
            imp.bad("interleave_probs", f"{args['interleave_probs']!r} is not a comma list of numbers")
    # LF packs by default for pt. Its pt packing (concatenated blocks) is ours; its plain sft packing lets samples
    # attend to each other, ours never does.
    packing = args.get("packing")
    pretrain = args.get("stage", "sft") == "pt"
    if packing is None:
        packing = pretrain
    imp.put("data.packing", _truthy(packing) or _truthy(args.get("neat_packing", False)))
    if _truthy(packing) and not _truthy(args.get("neat_packing", False)) and not pretrain:
        imp.notes.append("packing: Studio packs without attention across samples (LF's neat_packing)")
    if pretrain and not (_truthy(packing) or _truthy(args.get("neat_packing", False))):
        imp.notes.append(
            "packing: false with stage pt: Studio cuts each text into blocks of cutoff_len (LF truncates it)"
        )
    if _truthy(args.get("pure_bf16")):
        imp.put("train.precision", "bf16")
        imp.put("model.dtype", "bfloat16")
    elif _truthy(args.get("bf16")) and _truthy(args.get("fp16")):
        imp.bad("fp16", "bf16 and fp16 are both true: keep one")
    elif _truthy(args.get("bf16")) or _truthy(args.get("fp16")):
        imp.put("train.precision", "bf16" if _truthy(args.get("bf16")) else "fp16")
    else:
        imp.put("train.precision", "fp32")  # neither flag: transformers trains in fp32
    if "gradient_checkpointing" in args:
        imp.put("train.gradient_checkpointing", _truthy(args["gradient_checkpointing"]))
    else:  # LF checkpoints by default
        imp.put("train.gradient_checkpointing", not _truthy(args.get("disable_gradient_checkpointing", False)))
    report = args.get("report_to", "none")
    report = ["none"] if report is None else _csv(report)
    if "all" in report:
        imp.bad("report_to", "'all' is not supported: name the trackers (tensorboard, wandb) or none")
    imp.put("output.report_to", report)
    for key, note in (
        ("overwrite_cache", "no cache is reused across runs"),
        ("logging_dir", "TensorBoard logs go to <output>/tensorboard"),
        ("overwrite_output_dir", "removed in transformers 5"),
        ("plot_loss", "the studio plots loss live"),
    ):
        if key in args:
            imp.notes.append(f"{key}: accepted, ignored ({note})")
    if args.get("deepspeed"):
        ds = args["deepspeed"]
        _from_ds_json(ds if isinstance(ds, dict) else _resolve(ds, base_dir), imp)
        imp.put("launch.backend", "deepspeed")
        imp.notes.append("deepspeed without an accelerate config: one process; set launch.num_processes for more")


def _from_ds_json(path: str | dict, imp: _Import) -> None:
    """A DeepSpeed config (a JSON file, or a dict as transformers also accepts) into launch.deepspeed."""
    try:
        ds = path if isinstance(path, dict) else json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        imp.bad("deepspeed", f"cannot read DeepSpeed config {path}: {exc}")
        return
    if not isinstance(ds, dict):
        imp.bad("deepspeed", f"{path} is not a JSON object")
        return
    auto = {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size"}
    for key, value in ds.items():
        if key == "zero_optimization" and isinstance(value, dict):
            for zk, zv in value.items():
                if zk in ("offload_optimizer", "offload_param") and isinstance(zv, dict):
                    imp.put(f"launch.deepspeed.{zk}", zv.get("device", "none"))
                    if zv.get("nvme_path"):
                        imp.put("launch.deepspeed.nvme_path", zv["nvme_path"])
                    if "pin_memory" in zv:
                        imp.put("launch.deepspeed.pin_memory", zv["pin_memory"])
                elif zk == "stage":
                    imp.put("launch.deepspeed.zero_stage", zv)
                elif zv == "auto" or _DS_DEFAULTS.get(zk, object()) == zv:
                    continue  # filled by transformers / DeepSpeed's own default: nothing to carry
                elif zk in _DS_ACC.values():
                    integral = isinstance(zv, float) and zv.is_integer()  # JSON writes 1e9 as a float
                    imp.put(f"launch.deepspeed.{zk}", int(zv) if zk.endswith("_size") and integral else zv)
                else:
                    imp.bad(
                        f"deepspeed.zero_optimization.{zk}", f"{zv!r} is not supported (only 'auto' or the default)"
                    )
        elif key in ("bf16", "fp16") and isinstance(value, dict):
            if value.get("enabled") not in ("auto", False):
                imp.notes.append(f"deepspeed.{key}: precision comes from bf16/fp16 in the training args")
        elif key == "gradient_clipping":
            if value != "auto":
                imp.put("train.max_grad_norm", value)
        elif key == "steps_per_print":
            imp.put("launch.deepspeed.steps_per_print", value)
        elif key in auto or key in ("zero_allow_untested_optimizer", "wall_clock_breakdown"):
            if value != "auto" and key in auto:
                imp.notes.append(f"deepspeed.{key}: the batch comes from the training args")
        else:
            imp.bad(f"deepspeed.{key}")


def _from_accelerate(acc: dict, args: dict, imp: _Import, base_dir: Path | None) -> None:
    pre = "accelerate_config."
    dtype = str(acc.get("distributed_type", "NO")).upper()
    if dtype not in _BACKEND_IN:
        imp.bad(pre + "distributed_type", f"{dtype} is not supported (NO, MULTI_GPU, MULTI_CPU, FSDP, DEEPSPEED)")
    else:
        imp.put("launch.backend", _BACKEND_IN[dtype])
    if dtype == "MULTI_CPU" or _truthy(acc.get("use_cpu")):
        imp.put("launch.device", "cpu")
    machines = acc.get("num_machines", 1)
    total = acc.get("num_processes", 1)
    if isinstance(machines, int) and isinstance(total, int) and machines >= 1 and total >= 1:
        if total % machines:  # accelerate counts processes over all machines; we count per machine
            imp.bad(pre + "num_processes", f"{total} processes do not divide over {machines} machines")
        imp.put("launch.num_processes", max(1, total // machines))
    else:
        imp.put("launch.num_processes", total)
    imp.put("launch.num_machines", machines)
    for key in ("machine_rank", "main_process_ip", "main_process_port"):
        if key in acc and acc[key] is not None:
            imp.put(f"launch.{key}", acc[key])
    gpu_ids = acc.get("gpu_ids", "all")
    if gpu_ids not in (None, "all"):
        try:
            imp.put("launch.gpus", [int(g) for g in _csv(gpu_ids)])
        except ValueError:
            imp.bad(pre + "gpu_ids", f"{gpu_ids!r} is not 'all' or a comma list of GPU ids")
    mp = str(acc.get("mixed_precision", "no")).lower()
    lf_flags = any(_truthy(args.get(k)) for k in ("bf16", "fp16", "pure_bf16"))
    if mp not in ("no", "bf16", "fp16"):
        imp.bad(pre + "mixed_precision", f"{mp} is not supported (no, bf16, fp16)")
    elif not lf_flags and mp != "no":
        imp.put("train.precision", mp)  # the launcher's setting applies when the training args name none
    elif lf_flags and mp != "no" and imp.data["train"]["precision"] != mp:
        imp.notes.append(f"accelerate mixed_precision {mp} differs from the training args: the training args win")
    handled = {
        "distributed_type",
        "use_cpu",
        "num_machines",
        "num_processes",
        "machine_rank",
        "main_process_ip",
        "main_process_port",
        "gpu_ids",
        "mixed_precision",
        "deepspeed_config",
        "fsdp_config",
    }
    for key, value in acc.items():
        if key in handled:
            continue
        if key in _ACC_NOOP and (value == _ACC_NOOP[key] or value in (None, {}, "")):
            continue
        if key == "dynamo_config" and not value:
            continue
        imp.bad(pre + key)
    for section in ("deepspeed_config", "fsdp_config"):
        if not isinstance(acc.get(section) or {}, dict):
            imp.bad(pre + section, "must be a mapping")
            acc = {**acc, section: {}}
    for key, value in (acc.get("deepspeed_config") or {}).items():
        if key in _DS_ACC:
            imp.put(f"launch.deepspeed.{_DS_ACC[key]}", value)
        elif key in ("offload_optimizer_nvme_path", "offload_param_nvme_path"):
            if value and value != "none":
                imp.put("launch.deepspeed.nvme_path", value)
        elif key == "gradient_clipping":
            imp.put("train.max_grad_norm", value)
        elif key == "gradient_accumulation_steps":
            if "gradient_accumulation_steps" not in args:
                imp.put("train.gradient_accumulation", value)
        elif key == "deepspeed_config_file":
            _from_ds_json(_resolve(value, base_dir), imp)
        elif key in ("zero3_init_flag", "zero3_save_16bit_model", "deepspeed_multinode_launcher"):
            imp.notes.append(f"{pre}deepspeed_config.{key}: accepted, Studio sets it")
        else:
            imp.bad(f"{pre}deepspeed_config.{key}")
    for key, value in (acc.get("fsdp_config") or {}).items():
        if key in _FSDP_ACC:
            if key == "fsdp_sharding_strategy" and isinstance(value, int):
                value = _SHARDING_NUM.get(value, value)
            if key == "fsdp_offload_params" or key == "fsdp_cpu_ram_efficient_loading":
                value = _truthy(value)
            imp.put(f"launch.fsdp.{_FSDP_ACC[key]}", value)
        elif key in _FSDP_FIXED and value == _FSDP_FIXED[key]:
            continue
        elif key in _FSDP_FIXED:
            imp.bad(f"{pre}fsdp_config.{key}", f"{value!r} is not supported (Studio uses {_FSDP_FIXED[key]!r})")
        else:
            imp.bad(f"{pre}fsdp_config.{key}")


# ----------------------------------------------------------------------------------------------- export
def spec_to_lf(spec: RunSpec) -> tuple[dict, dict]:
    """A spec as LLaMA-Factory training args + an accelerate config in the shape of the seed's examples.

    Precision 'auto' is written as bf16 (LF has no 'auto'); model.dtype, quantization compute dtype, launch.device
    cpu and share_gpus have no LF key and are left out. Stage pt without packing is written as packing: false, with
    which LF truncates each text at cutoff_len where Studio cuts it into blocks.
    """
    m, d, t, o = spec.method, spec.data, spec.train, spec.output
    args: dict[str, Any] = {"model_name_or_path": spec.model.name_or_path}
    if spec.model.revision != "main":
        args["model_revision"] = spec.model.revision
    if spec.model.trust_remote_code:
        args["trust_remote_code"] = True
    args["flash_attn"] = _FLASH_OUT[spec.model.attn_implementation]
    if spec.model.rope_scaling:
        args["rope_scaling"] = spec.model.rope_scaling.type
    args.update({"stage": m.stage, "do_train": True, "finetuning_type": m.finetuning})
    if m.finetuning == "lora":
        if m.quantization.bits:
            args.update(
                {
                    "quantization_bit": m.quantization.bits,
                    "quantization_type": m.quantization.quant_type,
                    "double_quantization": m.quantization.double_quant,
                }
            )
        args.update(
            {
                "lora_rank": m.lora.rank,
                "lora_alpha": m.lora.alpha,
                "lora_dropout": m.lora.dropout,
                "lora_target": ",".join(m.lora.targets),
                "use_rslora": m.lora.use_rslora,
                "use_dora": m.lora.use_dora,
            }
        )
    elif m.finetuning == "freeze":
        args["freeze_trainable_layers"] = m.freeze.trainable_layers
        args["freeze_trainable_modules"] = ",".join(m.freeze.trainable_modules) or "all"
        if m.freeze.extra_modules:
            args["freeze_extra_modules"] = ",".join(m.freeze.extra_modules)
    if m.stage == "dpo":
        args.update({"pref_beta": m.dpo.beta, "pref_loss": m.dpo.loss_type})
    args["dataset"] = ",".join(d.datasets)
    if d.dataset_dir:
        args["dataset_dir"] = d.dataset_dir
    if d.mix != "concat":
        args["mix_strategy"] = d.mix
    if d.mix_probs:
        args["interleave_probs"] = ",".join(f"{p:g}" for p in d.mix_probs)
    args.update({"template": d.template, "cutoff_len": d.cutoff_len})
    if d.max_samples is not None:
        args["max_samples"] = d.max_samples
    if d.val_size:
        args["val_size"] = d.val_size
    args.update(
        {
            "packing": d.packing,
            "neat_packing": d.packing and m.stage != "pt",  # LF's pt packing is concatenation, as ours
            "train_on_prompt": d.train_on_prompt,
            "preprocessing_num_workers": d.preprocessing_workers,
        }
    )
    if d.group_by_length:
        args["group_by_length"] = True
    if o.output_dir:
        args["output_dir"] = o.output_dir
    if o.run_name:
        args["run_name"] = o.run_name
    args.update(
        {
            "logging_steps": t.logging_steps,
            "save_steps": t.save_steps,
            "eval_steps": t.eval_steps,
            "save_total_limit": t.save_total_limit,
            "num_train_epochs": t.num_epochs,
            "max_steps": t.max_steps,
            "per_device_train_batch_size": t.per_device_batch_size,
            "gradient_accumulation_steps": t.gradient_accumulation,
            "learning_rate": t.learning_rate,
            "lr_scheduler_type": t.lr_scheduler,
            "warmup_ratio": t.warmup_ratio,
            "warmup_steps": t.warmup_steps,
            "weight_decay": t.weight_decay,
            "optim": t.optimizer,
            "max_grad_norm": t.max_grad_norm,
        }
    )
    if t.precision in ("bf16", "auto") and spec.model.dtype == "bfloat16":
        args["pure_bf16"] = True
    elif t.precision in ("bf16", "auto"):
        args["bf16"] = True
    elif t.precision == "fp16":
        args["fp16"] = True
    args.update(
        {
            "disable_gradient_checkpointing": not t.gradient_checkpointing,
            "seed": t.seed,
            "report_to": ",".join(o.report_to),
        }
    )
    if t.resume_from:
        args["resume_from_checkpoint"] = t.resume_from
    return args, _accelerate_out(spec)


def _accelerate_out(spec: RunSpec) -> dict:
    ln, t = spec.launch, spec.train
    acc: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "distributed_type": _BACKEND_OUT[ln.backend]}
    if ln.backend == "ddp" and ln.device == "cpu":
        acc["distributed_type"] = "MULTI_CPU"
    acc["num_processes"] = ln.num_processes * ln.num_machines
    if ln.backend == "deepspeed":
        ds, dflt = ln.deepspeed, type(ln.deepspeed)()
        out: dict[str, Any] = {
            "zero_stage": ds.zero_stage,
            "offload_optimizer_device": ds.offload_optimizer,
            "offload_param_device": ds.offload_param,
            "overlap_comm": ds.overlap_comm,
            "contiguous_gradients": ds.contiguous_gradients,
            "gradient_clipping": t.max_grad_norm,
        }
        if ds.nvme_path:
            out.update({"offload_optimizer_nvme_path": ds.nvme_path, "offload_param_nvme_path": ds.nvme_path})
        for name in ("pin_memory", "sub_group_size", "reduce_bucket_size", "steps_per_print"):
            if getattr(ds, name) != getattr(dflt, name):  # beyond the seed's shape only when changed
                out[name] = getattr(ds, name)
        acc["deepspeed_config"] = out
    if ln.backend == "fsdp":
        acc["fsdp_config"] = {k: getattr(ln.fsdp, v) for k, v in _FSDP_ACC.items()}
    acc["mixed_precision"] = {"bf16": "bf16", "auto": "bf16", "fp16": "fp16", "fp32": "no"}[t.precision]
    if ln.device == "cpu":
        acc["use_cpu"] = True
    if ln.gpus:
        acc["gpu_ids"] = ",".join(str(g) for g in ln.gpus)
    if ln.num_machines > 1:
        acc.update(
            {
                "num_machines": ln.num_machines,
                "machine_rank": ln.machine_rank,
                "main_process_ip": ln.main_process_ip,
                "main_process_port": ln.main_process_port,
            }
        )
    return acc


# ----------------------------------------------------------------------------------------------- loading
_REVERSE = {path: key for key, path in {**_DIRECT, **_CONVERTED}.items() if path}


def _read_yaml(path: Path, what: str) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError([(what, f"cannot read {path}: {exc.strerror or exc}")], str(path)) from None
    except yaml.YAMLError as exc:
        raise SpecError([(what, f"{path} is not valid YAML: {exc}")], str(path)) from None


def is_lf_args(data: Any) -> bool:
    """True for a LLaMA-Factory flat training-args mapping; False for our spec (``model:`` mapping, schema_version)."""
    if not isinstance(data, dict) or isinstance(data.get("model"), dict) or "schema_version" in data:
        return False
    return bool(_LF_MARKERS & set(data))


def load_any(
    path: str | Path,
    accelerate_config_path: str | Path | None = None,
    *,
    context: bool = True,
    notes: list[str] | None = None,
) -> RunSpec:
    """Load our spec or a LLaMA-Factory training YAML (+ accelerate config); raise SpecError listing every problem."""
    path = Path(path)
    data = _read_yaml(path, "spec")
    if not is_lf_args(data):
        if accelerate_config_path is not None:
            msg = "--accelerate-config is for LLaMA-Factory YAML; a Studio spec carries launch settings under launch:"
            raise SpecError([("accelerate_config", msg)], str(path))
        return load_spec(path, context=context)
    acc = None
    if accelerate_config_path is not None:
        acc = _read_yaml(Path(accelerate_config_path), "accelerate_config")
        if not isinstance(acc, dict):
            raise SpecError([("accelerate_config", f"{accelerate_config_path} is not a mapping")], str(path))
    imp = _lf_import(data, acc, path.resolve().parent)
    if notes is not None:
        notes.extend(imp.notes)
    if imp.unsupported:
        raise SpecError([(k, why) for k, why in imp.unsupported.items()], f"{path} (LLaMA-Factory)")
    try:
        return parse_spec(imp.data, source=f"{path} (LLaMA-Factory)", context=context)
    except SpecError as exc:  # name the LF key the user wrote next to our field path
        raise SpecError([(_lf_name(p), msg) for p, msg in exc.problems], exc.source) from None


def _lf_name(path: str) -> str:
    for prefix in sorted(_REVERSE, key=len, reverse=True):
        if path == prefix or path.startswith(prefix + "."):
            return f"{_REVERSE[prefix]} ({path})"
    return path


def cli(argv: list[str]) -> int:
    cmd, rest = (argv[0], argv[1:]) if argv else ("import-lf", [])
    if cmd == "export-lf":
        return _cli_export(rest)
    parser = argparse.ArgumentParser(
        prog="studio import-lf",
        description="convert a LLaMA-Factory training YAML (+ accelerate config) to a Studio spec",
    )
    parser.add_argument("file")
    parser.add_argument("--accelerate-config", default=None)
    parser.add_argument("-o", "--output", required=True, help="spec YAML to write")
    ns = parser.parse_args(rest)
    notes: list[str] = []
    try:
        spec = load_any(ns.file, ns.accelerate_config, context=False, notes=notes)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    save_spec(spec, ns.output)
    print(f"wrote {ns.output}")
    return 0


def _cli_export(rest: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="studio export-lf", description="write a spec as LLaMA-Factory YAML")
    parser.add_argument("spec")
    parser.add_argument("-o", "--output", required=True, help="LLaMA-Factory train_args YAML to write")
    parser.add_argument("--accelerate-config-out", default=None, help="also write the accelerate config here")
    ns = parser.parse_args(rest)
    try:
        spec = load_any(ns.spec, context=False)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    args, acc = spec_to_lf(spec)
    _write_yaml(Path(ns.output), args)
    print(f"wrote {ns.output}")
    if ns.accelerate_config_out:
        _write_yaml(Path(ns.accelerate_config_out), acc)
        print(f"wrote {ns.accelerate_config_out}")
    return 0


def _write_yaml(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
