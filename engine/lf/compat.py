"""LLaMA-Factory compatibility: its training YAML (+ accelerate config) in, our RunSpec out, and back.

Light: yaml, json and engine.spec.schema only (never torch). ``studio train`` / ``studio validate`` call ``load_any``
so a LLaMA-Factory user's ``train_args.yaml`` and ``accelerate_config.yaml`` work unchanged on the features we support.
Every key we do not support is reported by name (``SpecError``), never silently dropped; keys that are accepted but
change nothing (``overwrite_cache``, ``logging_dir``) produce a note. Absent keys take LLaMA-Factory's and
transformers' defaults (not ours), so a converted run is the run LLaMA-Factory would have made.

Commands (argv[0] is the command name):
  studio import-lf FILE [--accelerate-config F] -o SPEC
  (studio export-lf, which resolves what Studio decides at launch first, is engine.runs.export_lf)
LLaMA-Factory's export YAML (``llamafactory-cli export``) is read by ``lf_export_to_merge`` for ``studio merge
--lf-yaml`` (engine.export.jobs).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import yaml

from engine.core import folders, workspace
from engine.lf.keys import (  # _CONVERTED, _DIRECT are also imported from here (tests/engine/test_lf_compat.py)
    _CONVERTED,
    _DIRECT,
    _EXPORT_KEYS,
    _EXPORT_QUANT_OPTIONS,
    _FEATURES,
    _FLASH_IN,
    _FLASH_OUT,
    _GALORE_BY_OPTIM,
    _HF4_REMOVED,
    _LF_DEFAULTS,
    _LF_MARKERS,
    _LOW_RANK_KEYS,
    _NOTED,
    _NULLABLE,
    _OPTIMIZER_SWITCHES,
    _OPTIONS_OF_OFF_FEATURES,
    _STAGE_DIRECT,
    PROCESSOR_TEMPLATES,
    _csv,
    _Import,
    _lf_path,
    _looked,
    _truthy,
)
from engine.lf.launch import _accelerate_out, _from_accelerate, _from_ds_json
from engine.lf.messages import message
from engine.spec.hf_args import HF_TRAINING_ARGS, TRANSFORMERS_VERSION, type_problem
from engine.spec.rules import HERE_ONLY
from engine.spec.schema import (
    RunSpec,
    SpecError,
    load_spec,
    parse_spec,
    read_model_config,
    safe_load_yaml,
    save_spec,
    spec_to_dict,
)


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


def _off(value: Any, default: Any) -> bool:
    """A feature key at LF's default (or null, or false / empty where the default is null): the feature is off."""
    return value is None or value == default or (default is None and value in (False, "", [], {}))


def _lf_import(args: dict, acc: dict | None, base_dir: Path | None) -> _Import:
    imp = _Import()
    written = set(args)
    args = {**{k: v for k, v in _LF_DEFAULTS.items() if k not in args}, **args}
    extra: dict[str, Any] = {}
    by_stage = _STAGE_DIRECT.get(str(args.get("stage", "sft")), {})
    for key, value in args.items():
        if key in _DIRECT and (value is not None or key in _NULLABLE):  # LF writes null for "not set"
            imp.put(by_stage.get(key, _DIRECT[key]), value)
        elif key in _DIRECT or key in _CONVERTED or key in _OPTIONS_OF_OFF_FEATURES:
            continue
        elif key in _NOTED:
            imp.notes.append(message("lf.noted", key=key, why=message(_NOTED[key])))
        elif key in _FEATURES:
            if not _off(value, _FEATURES[key][0]):
                imp.bad(key, message(_FEATURES[key][1]))
        elif key in _HF4_REMOVED:
            default, instead = _HF4_REMOVED[key]
            if _off(value, default):
                imp.notes.append(message("lf.hf4_noted", key=key))
            else:
                imp.bad(key, message("lf.hf4_removed", version=TRANSFORMERS_VERSION, instead=message(instead)))
        elif key in HF_TRAINING_ARGS:  # a TrainingArguments field LF passes through: so does Studio, checked
            problem = type_problem(key, value)
            if problem:
                imp.bad(key, message("lf.value_problem", problem=problem))
            else:
                extra[key] = value
        else:
            imp.bad(key, message("lf.unknown_key"))
    if extra:
        imp.put("train.extra_args", extra)
    imp.put("schema_version", 1)
    if "lora_alpha" not in args or args["lora_alpha"] is None:  # LF: alpha defaults to 2 x rank
        rank = args.get("lora_rank")
        imp.put("method.lora.alpha", rank * 2 if isinstance(rank, int) and not isinstance(rank, bool) else 16)
    _convert(args, imp, base_dir)
    _paths(args, imp, base_dir)
    if "cutoff_len" not in written and not args.get("rope_scaling"):
        _fit_default_cutoff(args, imp)
    if acc:
        _from_accelerate(acc, args, imp, base_dir)
    return imp


_STAGES_OUT = {"ppo": "lf.stage_ppo"}  # stage -> the catalog key of why it is refused


def _fit_default_cutoff(args: dict, imp: _Import) -> None:
    """LF's default cutoff_len (2048, not written in the YAML) on a model with fewer positions: what the model
    takes, with a note. A cutoff_len the user wrote is never changed (the spec's context rule refuses it)."""
    cfg = read_model_config(str(args.get("model_name_or_path", "")), args.get("model_revision") or None)
    max_pos = cfg.get("max_position_embeddings") if cfg else None
    default = _LF_DEFAULTS["cutoff_len"]
    if isinstance(max_pos, int) and not isinstance(max_pos, bool) and 8 <= max_pos < default:
        imp.put("data.cutoff_len", max_pos)
        imp.notes.append(message("lf.cutoff_default", default=default, max_pos=max_pos))


def _paths(args: dict, imp: _Import, base_dir: Path | None) -> None:
    """Paths as LF resolves them: the working directory first, then the YAML's folder (``_lf_path``)."""
    if "dataset_dir" in args:
        ddir = str(args["dataset_dir"])
        if ddir.upper() == "ONLINE" or ddir.startswith("REMOTE:"):
            imp.bad("dataset_dir", message("lf.dataset_dir_online", ddir=ddir))
        else:
            found, looked = _lf_path(ddir, base_dir)
            if found is None:
                imp.missing["dataset_dir"] = message("lf.no_folder", ddir=ddir, looked=_looked(looked))
            imp.put("data.dataset_dir", str(found or looked[0]))
    else:  # LF's default dataset_dir is ./data
        found, looked = _lf_path("data/dataset_info.json", base_dir)
        if found is not None:
            imp.put("data.dataset_dir", str(found.parent))
        else:
            imp.notes.append(message("lf.no_dataset_dir", looked=_looked(looked)))
    if args.get("output_dir"):
        found, _ = _lf_path(args["output_dir"], base_dir, must_exist=False)
        raw = Path(str(args["output_dir"])).expanduser()
        if not raw.is_absolute() and found is not None and folders.place_problem(found) is not None:
            # LF writes a relative output_dir under the working directory; Studio writes outside the workspace only
            # under a root STUDIO_OUTPUT_ROOTS allows, so the same relative path goes inside the workspace
            inside = workspace.home() / raw
            imp.notes.append(message("lf.output_inside", raw=raw, inside=inside, found=found))
            found = inside
        imp.put("output.output_dir", str(found))
        imp.put("output.layout", "llamafactory")  # the adapter's files in output_dir itself, where LF saves them
    if args.get("deepspeed"):
        ds = args["deepspeed"]
        if isinstance(ds, dict):
            _from_ds_json(ds, imp)
        else:
            found, looked = _lf_path(ds, base_dir)
            if found is None:
                imp.bad("deepspeed", message("lf.deepspeed_not_found", path=ds, looked=_looked(looked)))
            else:
                _from_ds_json(str(found), imp)
        imp.put("launch.backend", "deepspeed")
        imp.notes.append(message("lf.deepspeed_one_process"))
    if args.get("adapter_name_or_path"):
        value = args["adapter_name_or_path"]
        found, looked = _lf_path(str(value).split(",")[0].strip(), base_dir)
        where = str(found) if found is not None else message("lf.not_found", looked=_looked(looked))
        imp.bad("adapter_name_or_path", message("lf.adapter_refused", where=where))
    if args.get("tokenized_path"):
        found, looked = _lf_path(args["tokenized_path"], base_dir, must_exist=False)
        if found.is_dir() and any(found.iterdir()):
            imp.bad("tokenized_path", message("lf.tokenized_refused", path=found))
        else:
            imp.notes.append(message("lf.tokenized_ignored", path=found))


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
            imp.notes.append(message("lf.rope_factor", factor=f"{factor:g}"))
        imp.put("model.rope_scaling", {"type": args["rope_scaling"], "factor": factor})
    stage = args.get("stage", "sft")
    if isinstance(stage, str) and stage in _STAGES_OUT:
        imp.bad("stage", message(_STAGES_OUT[stage]))
    else:
        imp.put("method.stage", stage)
    imp.put("method.finetuning", args.get("finetuning_type", "lora"))
    if str(args.get("template")) in PROCESSOR_TEMPLATES:  # a vision-language family Studio renders with its processor
        imp.put("data.template", "auto")
        imp.notes.append(message("lf.noted_processor_template", template=args["template"]))
    if "oft_target" in args:
        imp.put("method.oft.targets", _csv(args["oft_target"]))
    _optimizer_switches(args, imp)
    if stage == "kto":
        _kto_batch(args, imp)
    if "include_num_input_tokens_seen" in args:
        seen = args["include_num_input_tokens_seen"]
        imp.put(
            "train.count_input_tokens", {True: "all", False: "no"}.get(seen, seen) if isinstance(seen, bool) else seen
        )
    if _truthy(args.get("use_cpu")) or _truthy(args.get("no_cuda")):
        imp.put("launch.device", "cpu")
    if _truthy(args.get("adafactor")):
        imp.put("train.optimizer", "adafactor")
    if not _truthy(args.get("do_train", True)):
        imp.bad("do_train", message("lf.do_train"))
    if str(args.get("quantization_method", "bnb")).lower() not in ("bnb", "bitsandbytes"):
        imp.bad("quantization_method", message("lf.quantization_method"))
    if "lora_target" in args:
        imp.put("method.lora.targets", _csv(args["lora_target"]))
    mods = _csv(args.get("freeze_trainable_modules", "all"))
    imp.put("method.freeze.trainable_modules", [] if mods == ["all"] else mods)
    if args.get("freeze_extra_modules"):
        imp.put("method.freeze.extra_modules", _csv(args["freeze_extra_modules"]))
    if isinstance(args.get("freeze_trainable_layers"), int) and args["freeze_trainable_layers"] < 0:
        imp.bad("freeze_trainable_layers", message("lf.freeze_negative"))
    if "dataset" in args:
        imp.put("data.datasets", _csv(args["dataset"]))
    if args.get("eval_dataset"):
        imp.put("data.eval_datasets", _csv(args["eval_dataset"]))
    if args.get("tool_format") is not None:
        imp.put("data.tool_format", args["tool_format"])
    if args.get("interleave_probs") is not None:
        try:
            imp.put("data.mix_probs", [float(p) for p in _csv(args["interleave_probs"])])
        except ValueError:
            imp.bad("interleave_probs", message("lf.interleave_probs", value=args["interleave_probs"]))
    # LF packs by default for pt. Its pt packing (concatenated blocks) is ours; its plain sft packing lets samples
    # attend to each other, ours never does.
    packing = args.get("packing")
    pretrain = args.get("stage", "sft") == "pt"
    if packing is None:
        packing = pretrain
    imp.put("data.packing", _truthy(packing) or _truthy(args.get("neat_packing", False)))
    if _truthy(packing) and not _truthy(args.get("neat_packing", False)) and not pretrain:
        imp.notes.append(message("lf.packing_neat"))
    if pretrain and not (_truthy(packing) or _truthy(args.get("neat_packing", False))):
        imp.notes.append(message("lf.packing_pt"))
    if _truthy(args.get("pure_bf16")):
        imp.put("train.precision", "bf16")
        imp.put("model.dtype", "bfloat16")
    elif _truthy(args.get("bf16")) and _truthy(args.get("fp16")):
        imp.bad("fp16", message("lf.bf16_and_fp16"))
    elif _truthy(args.get("bf16")) or _truthy(args.get("fp16")):
        imp.put("train.precision", "bf16" if _truthy(args.get("bf16")) else "fp16")
    else:
        imp.put("train.precision", "fp32")  # neither flag: transformers trains in fp32
    for key in ("enable_liger_kernel", "use_liger_kernel"):  # LF's name, and transformers' passed through
        if key in args:
            imp.put("train.liger_kernel", "on" if _truthy(args[key]) else "off")
    if "gradient_checkpointing" in args:
        imp.put("train.gradient_checkpointing", "on" if _truthy(args["gradient_checkpointing"]) else "off")
    elif "disable_gradient_checkpointing" in args:
        imp.put("train.gradient_checkpointing", "off" if _truthy(args["disable_gradient_checkpointing"]) else "on")
    else:  # LF checkpoints by default; Studio decides from the memory plan (auto) unless the YAML says
        imp.notes.append(message("lf.checkpointing"))
    report = args.get("report_to", "none")
    report = ["none"] if report is None else _csv(report)
    if "all" in report:
        imp.bad("report_to", message("lf.report_to_all"))
    imp.put("output.report_to", report)


def _kto_batch(args: dict, imp: _Import) -> None:
    """LF's KTO examples train 1 sample per device x 8 accumulation steps: LF builds the KL pairs itself, TRL's
    KTOTrainer pairs answers within a device batch and needs 2 or more. An even accumulation is halved and the batch
    doubled (the same effective batch, with a note); otherwise the spec's rule refuses the batch, naming it."""
    batch, accum = args.get("per_device_train_batch_size"), args.get("gradient_accumulation_steps")
    plain = all(isinstance(v, int) and not isinstance(v, bool) for v in (batch, accum))
    if plain and batch == 1 and accum >= 2 and accum % 2 == 0:
        imp.put("train.per_device_batch_size", 2)
        imp.put("train.gradient_accumulation", accum // 2)
        imp.notes.append(message("lf.kto_batch", accum=accum, half=accum // 2))


def _optimizer_switches(args: dict, imp: _Import) -> None:
    """LF's use_galore / use_apollo / use_badam / use_adam_mini / use_muon -> train.optimizer, and the options of
    GaLore or APOLLO (whichever is on) -> train.low_rank. Options of one that is off are accepted and unused."""
    on = [k for k in _OPTIMIZER_SWITCHES if _truthy(args.get(k))]
    if len(on) > 1:
        imp.bad(on[1], message("lf.two_optimizers", first=on[0], second=on[1]))
        return
    if not on:
        return
    optimizer = _OPTIMIZER_SWITCHES[on[0]]
    if on[0] == "use_galore":
        optim = str(args.get("optim") or "adamw_torch")
        if optim not in _GALORE_BY_OPTIM:
            imp.bad("optim", message("lf.galore_optim", optim=optim))
            return
        optimizer = _GALORE_BY_OPTIM[optim]
    imp.put("train.optimizer", optimizer)
    imp.names["train.optimizer"] = on[0]
    prefix = {"use_galore": "galore_", "use_apollo": "apollo_"}.get(on[0])
    if prefix is None:
        return
    for key, field in _LOW_RANK_KEYS.items():
        imp.names[f"train.low_rank.{field}"] = prefix + key
        value = args.get(prefix + key)
        if value is None:
            continue
        imp.put(f"train.low_rank.{field}", _csv(value) if key == "target" else value)
    if prefix == "apollo_":
        for key in ("proj", "scale_type"):
            if args.get(f"apollo_{key}") is not None:
                imp.put(f"train.low_rank.apollo_{key}", args[f"apollo_{key}"])
        if _truthy(args.get("apollo_scale_front")):
            imp.bad("apollo_scale_front", message("lf.apollo_scale_front"))


# ----------------------------------------------------------------------------------------------- export YAML
def lf_export_to_merge(args: Any, base_dir: str | Path | None = None) -> _Import:
    """A LLaMA-Factory export YAML (``llamafactory-cli export``) as the options of a Studio merge.

    ``imp.data``: ``base`` (the model folder), ``adapters`` (folders, in order; may be empty: a full model is
    re-exported), ``out_dir``, ``max_shard_size`` (export_size GB), ``device`` (cpu / cuda), ``legacy_format``
    (.bin instead of safetensors) and ``push_to_hub`` (export_hub_model_id or None). ``imp.unsupported`` names each
    key refused, with why; ``imp.notes`` one line per key accepted that changes nothing; ``imp.missing`` the
    adapters found nowhere (by key ``adapter_name_or_path[i]``: a Studio run id is looked up by the caller). Paths
    resolve as LF resolves them: the working directory first, then the YAML's folder (``base_dir``).
    """
    imp = _Import()
    base = Path(base_dir) if base_dir is not None else None
    if not isinstance(args, dict):
        imp.bad("export_yaml", message("lf.export_not_mapping"))
        return imp
    a = {**_EXPORT_KEYS, **args}
    for key in args:
        if key in _EXPORT_KEYS or key in _EXPORT_QUANT_OPTIONS:
            continue
        known = (_DIRECT, _CONVERTED, _NOTED, _FEATURES, _HF4_REMOVED, _OPTIONS_OF_OFF_FEATURES, HF_TRAINING_ARGS)
        if any(key in table for table in known):
            imp.notes.append(message("lf.export_training_key", key=key))
        else:
            imp.bad(key, message("lf.export_unknown_key"))
    if a["export_quantization_bit"] is not None:
        imp.bad("export_quantization_bit", message("lf.export_gptq"))
    if a["quantization_bit"] is not None:
        imp.bad("quantization_bit", message("lf.export_quantized"))
    finetuning = str(a["finetuning_type"] or "lora")
    adapters = _csv(a["adapter_name_or_path"]) if a["adapter_name_or_path"] else []
    if finetuning not in ("lora", "full", "freeze"):
        imp.bad("finetuning_type", message("lf.export_finetuning", finetuning=finetuning))
    elif adapters and finetuning != "lora":
        imp.bad("adapter_name_or_path", message("lf.export_adapters_need_lora", finetuning=finetuning))
    if _truthy(a["trust_remote_code"]):
        imp.notes.append(message("lf.export_trust_remote_code"))
    if a["template"]:
        imp.notes.append(message("lf.export_template", template=a["template"]))
    model = a["model_name_or_path"]
    if not model:
        imp.bad("model_name_or_path", message("lf.export_no_model"))
    else:
        imp.data["base"] = _export_model(str(model), base, imp)
    imp.data["adapters"] = []
    for i, name in enumerate(adapters):
        found, looked = _lf_path(name, base)
        if found is None:
            imp.missing[f"adapter_name_or_path[{i}]"] = message(
                "lf.export_adapter_missing", name=name, looked=_looked(looked)
            )
        imp.data["adapters"].append(str(found) if found is not None else name)
    if not a["export_dir"]:
        imp.bad("export_dir", message("lf.export_no_dir"))
    else:
        out, _ = _lf_path(a["export_dir"], None, must_exist=False)  # LF writes under the working directory
        imp.data["out_dir"] = str(out)
    size = a["export_size"]
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not size > 0:
        imp.bad("export_size", message("lf.export_size", value=size))
    else:
        imp.data["max_shard_size"] = f"{size:g}GB"
    device = str(a["export_device"]).lower()
    if device not in ("cpu", "auto"):
        imp.bad("export_device", message("lf.export_device", value=a["export_device"]))
    elif device == "auto":
        from engine.machine import hardware

        gpus = hardware.detect().gpus
        imp.data["device"] = "cuda" if gpus else "cpu"
        if not gpus:
            imp.notes.append(message("lf.export_device_cpu"))
    else:
        imp.data["device"] = "cpu"
    legacy = a["export_legacy_format"]
    if not isinstance(legacy, bool):
        imp.bad("export_legacy_format", message("lf.export_legacy", value=legacy))
    imp.data["legacy_format"] = legacy is True
    imp.data["push_to_hub"] = str(a["export_hub_model_id"]) if a["export_hub_model_id"] else None
    return imp


def _export_model(name: str, base_dir: Path | None, imp: _Import) -> str:
    """The base model's folder: a path as LF resolves it, else a hub id's snapshot in the Hugging Face cache."""
    found, looked = _lf_path(name, base_dir)
    if found is not None:
        if not (found / "config.json").is_file():
            imp.bad("model_name_or_path", message("lf.export_no_config", path=found))
        return str(found)
    from engine.models.resolve import from_cache, is_hub_id, split_revision

    repo, rev = split_revision(name)
    if is_hub_id(repo):
        _, hit = from_cache(repo, rev)
        if hit:
            return str(Path(hit).parent)
    imp.bad("model_name_or_path", message("lf.export_model_missing", name=name, looked=_looked(looked)))
    return name


# ----------------------------------------------------------------------------------------------- export
def workspace_path(path: str) -> Path:
    """A spec path as Studio reads it: absolute as written, relative from the workspace ($STUDIO_HOME)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    from engine.core import workspace

    return workspace.home() / p


def spec_to_lf(spec: RunSpec) -> tuple[dict, dict]:
    """A spec as LLaMA-Factory training args + an accelerate config in the shape of the seed's examples.

    Precision 'auto' is written as bf16 (LF has no 'auto'); model.dtype, quantization compute dtype, launch.device
    cpu and share_gpus have no LF key and are left out. Stage pt without packing is written as packing: false, with
    which LF truncates each text at cutoff_len where Studio cuts it into blocks.
    """
    m, d, t, o = spec.method, spec.data, spec.train, spec.output
    if m.stage == "grpo":  # LLaMA-Factory has no GRPO stage
        raise SpecError([("method.stage", message("lf.no_grpo"))])
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
        if m.lora.loraplus_lr_ratio is not None:
            args["loraplus_lr_ratio"] = m.lora.loraplus_lr_ratio
            args["loraplus_lr_embedding"] = m.lora.loraplus_lr_embedding
        if m.lora.pissa_init:
            args.update(pissa_init=True, pissa_iter=m.lora.pissa_iter, pissa_convert=m.lora.pissa_convert)
    elif m.finetuning == "oft":
        args.update(
            {
                "oft_rank": m.oft.rank,
                "oft_block_size": m.oft.block_size,
                "oft_target": ",".join(m.oft.targets),
                "module_dropout": m.oft.dropout,
            }
        )
    elif m.finetuning == "freeze":
        args["freeze_trainable_layers"] = m.freeze.trainable_layers
        args["freeze_trainable_modules"] = ",".join(m.freeze.trainable_modules) or "all"
        if m.freeze.extra_modules:
            args["freeze_extra_modules"] = ",".join(m.freeze.extra_modules)
    if m.stage == "dpo":
        args.update({"pref_beta": m.dpo.beta, "pref_loss": m.dpo.loss_type})
        if m.dpo.loss_type == "simpo":
            args.update({"simpo_gamma": m.dpo.simpo_gamma, "pref_ftx": m.dpo.ftx})
    if m.stage == "kto":
        args.update(
            {
                "pref_beta": m.kto.beta,
                "kto_chosen_weight": m.kto.desirable_weight,
                "kto_rejected_weight": m.kto.undesirable_weight,
            }
        )
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
        args["val_size"] = int(d.val_size) if d.val_size >= 1 else d.val_size  # LF: a whole number is rows
    if d.eval_datasets:
        args["eval_dataset"] = ",".join(d.eval_datasets)
    if d.mask_history:
        args["mask_history"] = True
    if not d.enable_thinking:
        args["enable_thinking"] = False
    if d.tool_format != "template":
        args["tool_format"] = d.tool_format
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
    args["dataloader_num_workers"] = d.dataloader_workers
    if o.output_dir:  # absolute: Studio reads a relative one from the workspace, LF from the working directory
        args["output_dir"] = str(workspace_path(o.output_dir))
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
            "save_strategy": t.save_strategy,
            "save_only_model": t.save_only_model,
            "eval_strategy": t.eval_strategy,
            "include_num_input_tokens_seen": t.count_input_tokens,
            "ddp_timeout": spec.launch.ddp_timeout,
        }
    )
    args.update(_optimizer_out(t))
    if t.per_device_eval_batch_size is not None:
        args["per_device_eval_batch_size"] = t.per_device_eval_batch_size
    if t.neftune_noise_alpha is not None:
        args["neftune_noise_alpha"] = t.neftune_noise_alpha
    if t.precision in ("bf16", "auto") and spec.model.dtype == "bfloat16":
        args["pure_bf16"] = True
    elif t.precision in ("bf16", "auto"):
        args["bf16"] = True
    elif t.precision == "fp16":
        args["fp16"] = True
    else:  # fp32: said, not left to the reader to know LF's defaults
        args.update(bf16=False, fp16=False)
    if t.gradient_checkpointing != "auto":  # auto has no LF key: LF would checkpoint, Studio decides at launch
        args["disable_gradient_checkpointing"] = t.gradient_checkpointing == "off"
    if t.liger_kernel != "auto":  # auto has no LF key (LF's default is off; Studio decides per run)
        args["enable_liger_kernel"] = t.liger_kernel == "on"
    args.update(
        {
            "seed": t.seed,
            "report_to": ",".join(o.report_to),
        }
    )
    if t.resume_from:
        args["resume_from_checkpoint"] = t.resume_from
    _direct_out(spec, args)
    args.update(t.extra_args)  # LF passes TrainingArguments through, as Studio does
    return args, _accelerate_out(spec)


def _optimizer_out(t) -> dict[str, Any]:
    """train.optimizer as LF writes it: its use_* switch (GaLore's flavour in optim), GaLore / APOLLO options."""
    switch = {v: k for k, v in _OPTIMIZER_SWITCHES.items()}
    galore = {v: k for k, v in _GALORE_BY_OPTIM.items() if k in ("adamw_torch", "adamw_8bit", "adafactor")}
    if t.optimizer in galore:
        out: dict[str, Any] = {"use_galore": True, "optim": galore[t.optimizer]}
        prefix = "galore_"
    elif t.optimizer in switch:
        out = {switch[t.optimizer]: True, "optim": "adamw_torch"}
        prefix = "apollo_" if t.optimizer == "apollo_adamw" else ""
    else:
        return {}
    if prefix:
        lr = t.low_rank
        for key, field in _LOW_RANK_KEYS.items():
            value = getattr(lr, field)
            out[prefix + key] = ",".join(value) if key == "target" else value
        if out[prefix + "scale"] is None:
            del out[prefix + "scale"]  # LF's default (2 for GaLore, 32 for APOLLO) is Studio's empty scale
        if prefix == "apollo_":
            out.update(apollo_proj=lr.apollo_proj, apollo_scale_type=lr.apollo_scale_type)
    if t.optimizer == "badam":
        b = t.badam
        out.update(
            badam_mode=b.mode,
            badam_switch_mode=b.switch_mode,
            badam_switch_interval=b.switch_interval,
            badam_update_ratio=b.update_ratio,
            badam_mask_mode=b.mask_mode,
            badam_verbose=b.verbose,
        )
        if b.start_block is not None:
            out["badam_start_block"] = b.start_block
    return out


def _direct_out(spec: RunSpec, args: dict) -> None:
    """Every other pass-through key of the table (``_DIRECT``) whose field differs from Studio's default: a mapping
    added to engine.lf.keys is written without a change here."""
    data, default = spec_to_dict(spec), _default_dict(spec)
    for key, path in _DIRECT.items():
        if key in args:
            continue
        value, base = _at(data, path), _at(default, path)
        if value is not _NONE and value is not None and value != base:
            args[key] = value


_NONE = object()


def _at(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return _NONE
        data = data[part]
    return data


def _default_dict(spec: RunSpec) -> dict:
    """Studio's defaults for a spec on this model and these datasets (the fields every spec must name)."""
    try:
        return spec_to_dict(
            RunSpec.model_validate(
                {"model": {"name_or_path": spec.model.name_or_path}, "data": {"datasets": list(spec.data.datasets)}}
            )
        )
    except Exception:  # noqa: BLE001 - no defaults: every field counts as set
        return {}


def _leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def lf_lost_fields(spec: RunSpec, args: dict, acc: dict | None) -> dict[str, Any]:
    """The spec's fields that LLaMA-Factory YAML (+ ``acc``) cannot carry: read back, they come out different.
    {path: the spec's value}. A relative output folder written absolute is the same folder, not a loss."""
    imp = _lf_import(args, acc, None)
    try:
        back = spec_to_dict(RunSpec.model_validate(imp.data))
    except Exception:  # noqa: BLE001 - compare with what was read, as far as it goes
        back = imp.data
    want, got = _leaves(spec_to_dict(spec)), _leaves(back)
    lost = {p: v for p, v in want.items() if got.get(p, _NONE) != v}
    out_dir = spec.output.output_dir
    if out_dir and got.get("output.output_dir") == str(workspace_path(out_dir)):
        lost.pop("output.output_dir", None)
    lost.pop("schema_version", None)
    lost.pop("output.layout", None)  # LF has one layout: a run of the file saves in output_dir itself
    return lost


def needs_accelerate_config(spec: RunSpec) -> bool:
    """A launch LLaMA-Factory starts with an accelerate config (several processes or machines, DeepSpeed, FSDP,
    chosen GPUs): anything but the default launch."""
    return spec_to_dict(spec).get("launch") != _default_dict(spec).get("launch")


def spec_to_lf_text(spec: RunSpec, *, no_template: bool = False, header: list = ()) -> tuple[str, str | None]:
    """The LLaMA-Factory training YAML of a spec, with the fields it has no key for listed as comments at the end,
    and its accelerate config YAML (None when the launch is the default one). ``no_template``: no template key (LF
    then parses the tokenizer's own chat template); ``header``: lines written as comments at the top (what
    engine.runs.export_lf resolved)."""
    args, acc = spec_to_lf(spec)
    if no_template:
        args.pop("template", None)
    with_acc = needs_accelerate_config(spec)
    lost = lf_lost_fields(spec, args, acc if with_acc else None)
    text = "# LLaMA-Factory training YAML written by Studio\n"
    text += "".join(f"# {line}\n" for line in header)
    text += yaml.safe_dump(args, sort_keys=False, allow_unicode=True)
    if lost:
        text += "\n# Studio settings LLaMA-Factory has no key for (a run of this file does without them):\n" + "".join(
            f"#   {path}: {json.dumps(value, ensure_ascii=False)}\n" for path, value in lost.items()
        )
    return text, (yaml.safe_dump(acc, sort_keys=False, allow_unicode=True) if with_acc else None)


# ----------------------------------------------------------------------------------------------- loading
_REVERSE = {path: key for key, path in {**_DIRECT, **_CONVERTED}.items() if path} | {
    path: key for keys in _STAGE_DIRECT.values() for key, path in keys.items()
}


def _read_yaml(path: Path, what: str) -> Any:
    try:
        return safe_load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError([(what, message("lf.cannot_read", path=path, error=exc.strerror or exc))], str(path)) from None
    except yaml.YAMLError as exc:
        raise SpecError([(what, message("lf.bad_yaml_file", path=path, error=exc))], str(path)) from None


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
            raise SpecError([("accelerate_config", message("lf.accelerate_for_lf"))], str(path))
        return load_spec(path, context=context)
    acc = None
    if accelerate_config_path is not None:
        acc = _read_yaml(Path(accelerate_config_path), "accelerate_config")
        if not isinstance(acc, dict):
            problem = ("accelerate_config", message("lf.not_mapping_file", path=accelerate_config_path))
            raise SpecError([problem], str(path))
    return _lf_spec(data, acc, path.resolve().parent, f"{path} (LLaMA-Factory)", context, notes)


def _lf_spec(
    data: dict, acc: dict | None, base_dir: Path | None, source: str, context: bool, notes: list[str] | None
) -> RunSpec:
    imp = _lf_import(data, acc, base_dir)
    if notes is not None:
        notes.extend(imp.notes)
    problems = dict(imp.unsupported)
    if context:
        problems.update({k: why for k, why in imp.missing.items() if k not in problems})
    if problems:  # every key named at once: the spec's own rules on the keys it took, too (use_galore with LoRA)
        try:
            parse_spec(imp.data, source=source, context=False)
        except SpecError as exc:
            for p, msg in exc.problems:
                problems.setdefault(_lf_name(p, imp.names), msg)
        raise SpecError(list(problems.items()), source)
    try:
        return parse_spec(imp.data, source=source, context=context)
    except SpecError as exc:  # name the LF key the user wrote next to our field path
        raise SpecError([(_lf_name(p, imp.names), msg) for p, msg in exc.problems], exc.source) from None


def lf_text_to_spec(text: str, accelerate_text: str | None = None, *, notes: list[str] | None = None) -> RunSpec:
    """A LLaMA-Factory training YAML (+ accelerate config) given as text (pasted or uploaded in the page): the spec,
    its files not checked (the form checks them), or SpecError naming each key refused. Relative paths resolve from
    the working directory, as LF's would with no YAML folder."""
    source = "LLaMA-Factory YAML"
    try:
        data = safe_load_yaml(text or "")
    except yaml.YAMLError as exc:
        raise SpecError([("lf_yaml", message("lf.bad_yaml", error=exc))], source) from None
    if not is_lf_args(data):
        raise SpecError([("lf_yaml", message("lf.not_lf_yaml"))], source)
    acc = None
    if accelerate_text and accelerate_text.strip():
        try:
            acc = safe_load_yaml(accelerate_text)
        except yaml.YAMLError as exc:
            raise SpecError([("accelerate_config", message("lf.bad_yaml", error=exc))], source) from None
        if not isinstance(acc, dict):
            raise SpecError([("accelerate_config", message("lf.accelerate_not_mapping"))], source)
    return _lf_spec(data, acc, None, source, False, notes)


def load_any_spec(
    path: str | Path, accelerate_config: str | Path | None = None, *, elsewhere: bool = False
) -> RunSpec:
    """What the CLI commands (train, validate, preview) load: our spec or a LLaMA-Factory training YAML (+ its
    accelerate config), validated with its files; the import's notes go to stderr. ``elsewhere``: checked for
    another machine (``--gpus N``), so what only this machine's cache and network decide (``HERE_ONLY``: a hub model
    it could not download) is a note, not a refusal."""
    notes: list[str] = []
    try:
        spec = load_any(path, accelerate_config, notes=notes)
    except SpecError as exc:
        here = [(p, m) for p, m in exc.problems if getattr(m, "key", "") in HERE_ONLY]
        if not elsewhere or not here:
            raise
        rest = [(p, m) for p, m in exc.problems if (p, m) not in here]
        if rest:
            raise SpecError(rest, exc.source) from None
        notes = []
        spec = load_any(path, accelerate_config, context=False, notes=notes)
        notes += [f"{p}: {m} (on this machine; the target machine needs the model)" for p, m in here]
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return spec


def _lf_name(path: str, names: dict[str, str] | None = None) -> str:
    """The LF key the user wrote for a spec path: ``names`` (the keys this import read, e.g. use_badam for
    train.optimizer), else the key tables."""
    reverse = {**_REVERSE, **(names or {})}
    for prefix in sorted(reverse, key=len, reverse=True):
        if path == prefix or path.startswith(prefix + "."):
            return f"{reverse[prefix]} ({path})"
    return path


def cli(argv: list[str]) -> int:
    """``studio import-lf`` (``studio export-lf`` is engine.runs.export_lf)."""
    rest = argv[1:] if argv[:1] == ["import-lf"] else argv
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
