"""LLaMA-Factory training args in: its flat training YAML (+ accelerate config) converted to a RunSpec dict.

Light: engine.lf.keys / launch / messages, engine.spec and engine.core only (never torch). Every key we do not support
is reported by name (``_Import.unsupported``), never silently dropped; keys that are accepted but change nothing
(``overwrite_cache``, ``logging_dir``) produce a note. Absent keys take LLaMA-Factory's and transformers' defaults (not
ours), so a converted run is the run LLaMA-Factory would have made. Reading the files and the spec's own checks on
the result: engine.lf.compat; the way back (spec -> LF YAML): engine.lf.to_lf.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from engine.core import folders, workspace
from engine.lf.keys import (
    _CONVERTED,
    _DIRECT,
    _FEATURES,
    _FLASH_IN,
    _GALORE_BY_OPTIM,
    _HF4_REMOVED,
    _LF_DEFAULTS,
    _LOSS_SWITCHES,
    _LOW_RANK_KEYS,
    _NOTED,
    _NULLABLE,
    _OPTIMIZER_SWITCHES,
    _OPTIONS_OF_OFF_FEATURES,
    _RAY_KEYS,
    _STAGE_DIRECT,
    PROCESSOR_TEMPLATES,
    _csv,
    _Import,
    _lf_path,
    _looked,
    _truthy,
    user_path,
)
from engine.lf.launch_settings import _from_accelerate, _from_ds_json, _from_fsdp_args
from engine.lf.messages import message
from engine.models import ms_models
from engine.models.resolve import resolve_config
from engine.spec.hf_args import HF_TRAINING_ARGS, TRANSFORMERS_VERSION, type_problem


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
    if "use_openmind_hub" not in args and os.environ.get("USE_OPENMIND_HUB", "").strip().lower() in ("1", "true", "y"):
        imp.bad("use_openmind_hub", message("lf.refused_openmind_env"))  # LF's default for the key is this variable
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
    _ray(args, imp, written)
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
    cfg = _model_config(args)
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
        raw = user_path(args["output_dir"])
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


def _on_modelscope(args: dict) -> bool:
    """LF's ``use_modelscope_hub`` (the model id is ModelScope's), whose default is ``USE_MODELSCOPE_HUB``."""
    value = args.get("use_modelscope_hub")
    return ms_models.use_modelscope() if value is None else _truthy(value)


def _model_config(args: dict) -> dict | None:
    name, revision = str(args.get("model_name_or_path", "")), args.get("model_revision") or None
    return resolve_config(name, revision, modelscope=_on_modelscope(args)).config


def _convert(args: dict, imp: _Import, base_dir: Path | None) -> None:
    if _on_modelscope(args):
        imp.put("model.hub", "modelscope")
    flash = str(args.get("flash_attn", "auto"))
    imp.put("model.attn_implementation", _FLASH_IN.get(flash, flash))
    if args.get("rope_scaling"):
        factor = 2.0
        cfg = _model_config(args)
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
    _loss_switches(args, imp)
    _from_fsdp_args(args, imp)
    _fp8(args, imp)
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


def _ray(args: dict, imp: _Import, written: set[str]) -> None:
    """LF's Ray launcher -> ``launch.target: ray``: on where LF runs Ray (USE_RAY=1), or where the YAML sets one of
    its ray keys away from LF's default (LF's own Ray example: ray_num_workers 4). Then every ray key lands in
    ``launch.ray`` at LF's value, resources_per_worker defaulting to LF's one GPU per worker; ray_storage_path only
    when written (Studio keeps Ray's results in the run folder, not LF's ./saves), relative to the working folder."""
    for key in ("master_addr", "master_port"):
        if args.get(key) is not None:
            imp.notes.append(message("lf.noted", key=key, why=message("lf.noted_ray_master")))
    if args.get("ray_storage_filesystem") is not None:
        imp.bad("ray_storage_filesystem", message("lf.refused_ray_filesystem"))
    given = [k for k in _RAY_KEYS if k in written and not _off(args[k], _RAY_KEYS[k][1])]
    if not given and os.environ.get("USE_RAY", "").strip().lower() not in ("true", "y", "1"):
        return
    imp.put("launch.target", "ray")
    if imp.data.get("launch", {}).get("backend", "single") == "single":
        imp.put("launch.backend", "ddp")
    imp.notes.append(message("lf.ray_target"))
    for key, (path, default) in _RAY_KEYS.items():
        value = args.get(key, default)
        if isinstance(value, str) and key in ("resources_per_worker", "ray_init_kwargs") and value.startswith("{"):
            try:
                value = json.loads(value)  # LF takes a JSON string too
            except ValueError as exc:
                imp.bad(key, message("lf.value_problem", problem=f"not JSON ({exc})"))
                continue
        if key == "resources_per_worker" and value == default and _truthy(args.get("use_cpu")):
            continue  # on CPU: one CPU per worker
        if value is None or (key == "ray_storage_path" and key not in given):
            continue
        if key == "ray_storage_path" and isinstance(value, str):
            value = os.path.abspath(user_path(value))  # a ~user that does not exist stays literal (no RuntimeError)
        imp.put(path, value)


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


def _loss_switches(args: dict, imp: _Import) -> None:
    """LF's use_dft_loss / use_eaft_loss / use_asft_loss -> train.loss; asft_alpha and eaft_alpha pass through.
    LF's trainer takes the first that is on, in that order; two on are refused, naming the second."""
    on = [k for k in _LOSS_SWITCHES if _truthy(args.get(k))]
    if len(on) > 1:
        imp.bad(on[1], message("lf.two_losses", first=on[0], second=on[1]))
    elif on:
        imp.put("train.loss", _LOSS_SWITCHES[on[0]])
        imp.names["train.loss"] = on[0]


def _fp8(args: dict, imp: _Import) -> None:
    """LF's fp8 / fp8_backend -> train.fp8 / train.fp8_backend (accelerate's FP8; MS-AMP is no longer one of its
    backends). fp8_enable_fsdp_float8_all_gather is an FSDP2 hook: noted under Studio's FSDP, which is version 1."""
    if not _truthy(args.get("fp8")):
        return  # LF's other fp8 keys do nothing while it is off
    imp.put("train.fp8", True)
    backend = str(args.get("fp8_backend") or "auto")
    if backend == "msamp":
        imp.bad("fp8_backend", message("lf.fp8_msamp"))
    else:
        imp.put("train.fp8_backend", backend)
    if _truthy(args.get("fp8_enable_fsdp_float8_all_gather")):
        imp.notes.append(message("lf.fp8_all_gather"))


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
